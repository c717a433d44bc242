"""The reference optimization agent: a Messages API tool-use loop over the catalog's tools.

The model drives each round (recall and suggest_next, write a candidate, compile_kernel,
benchmark_kernel, reflect, record_lesson); the harness keeps the books. It files every
call under the run's session, makes the current best attempt the parent of the next,
turns every bad call into a tool error the model can fix, and ends the run:

- ``budget``: the round budget is spent (benchmarks);
- ``roofline``: an attempt reached ``Budget.sol_threshold`` percent of the roofline floor;
- ``no_suggestions``: suggest_next ran dry after having suggested techniques;
- ``model_ended``: the model ended its turn without calling a tool;
- ``token_budget`` / ``turn_limit`` / ``max_tokens``: hard limits.

After the first three, benchmarks close and the model gets ``Budget.wrap_up_turns``
replies to record its last lesson and sum up.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillbase.agent import prompts
from skillbase.agent.client import MessagesClient
from skillbase.agent.dispatch import RunState, ToolRunner
from skillbase.agent.models import AgentEvent, OnEvent, OptimizeResult
from skillbase.agent.options import AgentOptions, Budget
from skillbase.agent.usage import RunRecord, log_run
from skillbase.errors import AgentError, NotFound, ToolchainUnavailable
from skillbase.models import AttemptSummary, new_id, utcnow
from skillbase.tools import anthropic_tool_definitions

if TYPE_CHECKING:
    from skillbase.api import SkillBase
    from skillbase.models import Hardware

STOP_WORDS = {
    "budget": "the round budget is spent",
    "roofline": "an attempt reached the roofline threshold",
    "no_suggestions": "suggest_next has no technique left to try",
    "model_ended": "the model ended its turn",
    "token_budget": "the token budget is spent",
    "turn_limit": "the model used all the replies allowed",
    "max_tokens": "the model's reply was cut at the output token limit twice in a row",
}


def optimize(
    sb: "SkillBase",
    task: str,
    *,
    model: str | None = None,
    budget: "int | Budget | Mapping | None" = 5,
    device: str = "auto",
    session: str | None = None,
    progress: OnEvent | None = None,
    options: AgentOptions | None = None,
    workspace: str | Path | None = None,
) -> OptimizeResult:
    """Optimize ``task`` with the reference agent; every attempt and lesson lands in ``sb``'s store.

    ``device`` is 'auto', 'cuda' (fails with ToolchainUnavailable when no GPU is visible)
    or 'cpu' (verification only). ``progress`` receives an AgentEvent per step.
    Raises ConfigError without an API key, NotFound for an unknown task, AgentError when
    the API fails for good (after retries).
    """
    started, clock = utcnow(), time.perf_counter()
    opts = options or AgentOptions.from_env(sb.settings, model=model)
    plan = Budget.of(budget)
    info = sb.task(task)
    hardware = _hardware(sb, device)
    state = RunState(
        task=info.name, session=session or new_id(f"opt_{info.name}"), device=hardware.kind, max_rounds=plan.rounds
    )
    emit = progress or (lambda event: None)
    client = MessagesClient(opts, on_event=emit)
    runner = ToolRunner(
        sb, state, agent=opts.agent_name, workspace=Path(workspace) if workspace else None, on_event=emit
    )
    emit(
        AgentEvent(
            kind="start",
            message=f"optimizing {info.name} with {opts.model} on {hardware.name} "
            f"(session {state.session}, {plan.rounds} rounds)",
            data={"session": state.session, "endpoint": client.endpoint},
        )
    )
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": prompts.optimize_kickoff(info, session=state.session, budget=plan, hardware=hardware),
        }
    ]
    try:
        reason, turns, summary = _converse(client, runner, messages, plan, emit)
    except AgentError as e:
        _log(sb, state, opts, client, f"error: {e.message}", started)  # the tokens were spent all the same
        raise
    finally:
        client.close()
    emit(AgentEvent(kind="stop", message=f"stopped: {STOP_WORDS[reason]}", round=state.rounds, data={"reason": reason}))
    return _result(sb, state, opts, client, reason, turns, summary, started, time.perf_counter() - clock)


def _hardware(sb: "SkillBase", device: str) -> "Hardware":
    """The device the run benchmarks on, checked before any token is spent."""
    try:
        return sb.toolchain.hardware(device)
    except ToolchainUnavailable as e:
        raise ToolchainUnavailable(
            f"--gpu asks for a CUDA GPU, but {e.message}",
            hint="run without --gpu to verify candidates under the Triton interpreter "
            "(no timing), or run on a machine with a GPU",
        ) from None


def _converse(
    client: MessagesClient, runner: ToolRunner, messages: list[dict[str, Any]], plan: Budget, emit: OnEvent
) -> tuple[str, int, str]:
    """Talk until a stop; returns (stop reason, model replies, the model's last words)."""
    state = runner.state
    tools = anthropic_tool_definitions()
    turns, wrap_turns, cut_short, stop, last_text = 0, 0, 0, None, ""
    while True:
        if plan.tokens and client.usage.tokens >= plan.tokens:
            return "token_budget", turns, last_text
        if turns >= plan.turns + (plan.wrap_up_turns if stop else 0):
            return stop or "turn_limit", turns, last_text
        emit(
            AgentEvent(kind="request", message=f"asking {client.options.model} (reply {turns + 1})", round=state.rounds)
        )
        reply = client.create(system=prompts.OPTIMIZE_SYSTEM, messages=messages, tools=tools)
        turns += 1
        content = [_block(b) for b in reply.content]
        messages.append({"role": "assistant", "content": content})
        said = " ".join(b["text"] for b in content if b["type"] == "text").strip()
        if said:
            last_text = said
            emit(AgentEvent(kind="text", message=said, round=state.rounds))
        uses = [b for b in content if b["type"] == "tool_use"]
        if not uses:
            if reply.stop_reason == "max_tokens" and cut_short == 0 and not stop:
                cut_short += 1
                messages.append(
                    {
                        "role": "user",
                        "content": "harness: your reply was cut at the output token "
                        "limit. Continue, more briefly: one tool call at a time.",
                    }
                )
                continue
            return (stop or ("max_tokens" if reply.stop_reason == "max_tokens" else "model_ended")), turns, last_text
        cut_short = 0
        results = runner.run_all(uses)
        if stop:
            wrap_turns += 1
            if wrap_turns > plan.wrap_up_turns:
                return stop, turns, last_text
        else:
            stop = _stop_condition(state, plan)
            if stop:
                state.wrapping_up = STOP_WORDS[stop]
                results[-1]["content"].append(
                    {
                        "type": "text",
                        "text": (
                            f"harness: the run is ending: {STOP_WORDS[stop]}. Benchmarks are closed. Record a lesson for "
                            f"the latest attempt if you have not, then end your turn with a short summary."
                        ),
                    }
                )
        messages.append({"role": "user", "content": results})


def _stop_condition(state: RunState, plan: Budget) -> str | None:
    if state.best_pct_sol is not None and state.best_pct_sol >= plan.sol_threshold:
        return "roofline"
    if state.rounds >= plan.rounds:
        return "budget"
    if state.suggestions_exhausted:
        return "no_suggestions"
    return None


def _block(block: Any) -> dict[str, Any]:
    """An assistant content block as request JSON (only the fields the API accepts back)."""
    kind = block.type
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(mode="json", exclude_none=True)  # thinking and other blocks go back as received


def _result(
    sb: "SkillBase",
    state: RunState,
    opts: AgentOptions,
    client: MessagesClient,
    reason: str,
    turns: int,
    summary: str,
    started,
    seconds: float,
) -> OptimizeResult:
    attempts = [AttemptSummary.of(sb.get_attempt(a)) for a in state.attempts]
    best = next((a for a in attempts if a.id == state.best_id), None)
    lessons = []
    for xid in state.lessons:
        try:
            lessons.append(sb.get_experience(xid))
        except NotFound:
            continue  # deleted meanwhile by a curator; the run still reports the rest
    notes = []
    if state.device == "cpu":
        notes.append(
            "no GPU: candidates were verified under the Triton interpreter on the CPU; timing needs a GPU, "
            "so medians, speedups and % of the roofline are empty"
        )
    usage = client.usage.report()
    path = _log(sb, state, opts, client, reason, started)
    return OptimizeResult(
        session=state.session,
        task=state.task,
        model=opts.model,
        device=state.device,
        stop_reason=reason,
        stop_detail=STOP_WORDS[reason],
        rounds=state.rounds,
        turns=turns,
        attempts=attempts,
        best=best,
        lessons=lessons,
        summary=summary,
        usage=usage,
        seconds=seconds,
        notes=notes,
        log_path=str(path),
    )


def _log(sb: "SkillBase", state: RunState, opts: AgentOptions, client: MessagesClient, reason: str, started) -> Path:
    return log_run(
        sb.settings,
        RunRecord(
            kind="optimize",
            session=state.session,
            task=state.task,
            model=opts.model,
            base_url=opts.base_url,
            started_at=started,
            stop_reason=reason,
            usage=client.usage.report(),
            records={"attempts": state.attempts, "experiences": state.lessons},
        ),
    )
