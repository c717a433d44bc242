"""``skillbase optimize`` and ``skillbase distill``: the reference agent on the command line.

``skillbase.console`` adds these to the core CLI's app with ``register_agent_commands(app)``.
Progress goes to stderr (a live line while waiting, one line per step), the result
to stdout: a lineage table, or the result model's JSON with ``--json``.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.status import Status

from skillbase.agent.models import AgentEvent

_STYLE = {
    "tool": "cyan",
    "tool_error": "red",
    "round": "bold green",
    "retry": "yellow",
    "text": "dim",
    "stop": "bold",
    "distill": "magenta",
    "start": "bold",
}


class ProgressView:
    """A live status line while the model or a tool works, and one line per finished step."""

    def __init__(self, console: Console):
        self.console = console
        self.status = Status("starting", console=console)

    def __enter__(self) -> "ProgressView":
        self.status.start()
        return self

    def __exit__(self, *exc) -> None:
        self.status.stop()

    def __call__(self, event: AgentEvent) -> None:
        if event.kind == "request":
            self.status.update(f"round {event.round + 1}: {event.message}")
            return
        text = event.message if event.kind != "text" else _first_lines(event.message)
        style = _STYLE.get(event.kind, "")
        self.console.print(
            f"[{style}]{event.kind:>10}[/] {text}" if style else f"{event.kind:>10} {text}",
            markup=True,
            highlight=False,
        )
        if event.kind in ("tool", "tool_error", "round"):
            self.status.update(f"round {event.round + 1}: waiting for the model")


def _first_lines(text: str, n: int = 3) -> str:
    lines = text.strip().splitlines()
    return "\n           ".join(lines[:n]) + (" ..." if len(lines) > n else "")


def register_agent_commands(app: typer.Typer) -> None:
    """Add ``optimize`` and ``distill`` to the skillbase CLI."""
    app.command("optimize")(optimize_command)
    app.command("distill")(distill_command)


def optimize_command(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="Built-in task name or task file.")],
    model: Annotated[Optional[str], typer.Option(help="Model id (default $SKILLBASE_AGENT_MODEL).")] = None,
    budget: Annotated[int, typer.Option(help="Benchmark rounds at most.")] = 5,
    tokens: Annotated[Optional[int], typer.Option(help="Input + output tokens at most, all requests.")] = None,
    gpu: Annotated[
        Optional[bool],
        typer.Option(
            "--gpu/--cpu",
            help="Time on a CUDA GPU (fails without one) or only verify on the CPU; default: a GPU when there is one.",
        ),
    ] = None,
    session: Annotated[Optional[str], typer.Option(help="Session label for the attempts (default: new).")] = None,
    base_url: Annotated[
        Optional[str], typer.Option(help="Messages API endpoint (default $ANTHROPIC_BASE_URL).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Optimize a task with the reference agent (needs ANTHROPIC_API_KEY). Exit 9 when no attempt is correct."""
    from skillbase import cli as base
    from skillbase.agent.loop import optimize
    from skillbase.agent.options import AgentOptions, Budget

    device = "auto" if gpu is None else ("cuda" if gpu else "cpu")

    def work():
        sb = base._sb(ctx)
        opts = AgentOptions.from_env(sb.settings, model=model, base_url=base_url)
        plan = Budget.of({"rounds": budget, **({"tokens": tokens} if tokens else {})})
        with ProgressView(base.err) as view:
            return optimize(sb, task, budget=plan, device=device, session=session, progress=view, options=opts)

    base.run(as_json, work, render_optimize)


def render_optimize(r: Any) -> int | None:
    """The lineage table, the stop reason, the lessons and the usage."""
    from skillbase import cli as base

    t = base.table(
        "attempt",
        "parent",
        "techniques",
        "verdict",
        "median",
        "vs eager",
        "% SOL",
        ids=("attempt", "parent"),
        title=f"{r.task}: session {r.session}",
    )
    for a in r.attempts:
        mark = " *" if r.best and a.id == r.best.id else ""
        t.add_row(
            a.id + mark,
            a.parent_id or "-",
            ", ".join(a.techniques) or "-",
            base._verdict(a.verdict),
            base._ms(a.median_ms),
            base._x(a.speedup_vs_eager),
            "-" if a.pct_sol is None else f"{a.pct_sol:.0f}%",
        )
    base.out.print(t)
    base.out.print(
        "median: CUDA events over repeated runs; % SOL: roofline floor time over the median; * the best attempt"
        if r.device == "cuda"
        else "* the best attempt"
    )
    base.out.print(f"stopped after {r.rounds} rounds and {r.turns} replies: {r.stop_detail}")
    for exp in r.lessons:
        base.out.print(f"  lesson {exp.id}: {exp.title or exp.lesson[:100]}")
    for note in r.notes:
        base.out.print(f"[yellow]note[/]: {note}")
    base.out.print(f"usage: {_usage_line(r.usage)}; {r.seconds:.0f} s wall clock; logged to {r.log_path}")
    return None if any(a.verdict == "correct" for a in r.attempts) else base.CHECK_FAILED


def distill_command(
    ctx: typer.Context,
    since: Annotated[
        Optional[str], typer.Option(help="ISO date/time or age (30m, 12h, 7d); default: the last distill run.")
    ] = None,
    model: Annotated[Optional[str], typer.Option(help="Model id (default $SKILLBASE_AGENT_MODEL).")] = None,
    base_url: Annotated[
        Optional[str], typer.Option(help="Messages API endpoint (default $ANTHROPIC_BASE_URL).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Turn new attempts and lessons into experiences and draft skills awaiting curation (needs ANTHROPIC_API_KEY)."""
    from skillbase import cli as base
    from skillbase.agent.distillation import distill
    from skillbase.agent.options import AgentOptions

    def work():
        sb = base._sb(ctx)
        opts = AgentOptions.from_env(sb.settings, model=model, base_url=base_url)
        with ProgressView(base.err) as view:
            return distill(sb, since=since, progress=view, options=opts)

    base.run(as_json, work, render_distill)


def render_distill(r: Any) -> None:
    """What was distilled and what happened to each draft skill."""
    from skillbase import cli as base

    base.out.print(
        f"read {r.attempts_seen} attempts and {r.experiences_seen} experiences since "
        f"{r.since.isoformat() if r.since else 'the beginning'}"
    )
    if r.distilled:
        t = base.table(
            "experience",
            "kind",
            "before",
            "after",
            "gain",
            ids=("experience", "before", "after"),
            title="distilled experiences",
        )
        for d in r.distilled:
            t.add_row(
                d.experience_id,
                d.kind,
                d.before_attempt,
                d.after_attempt,
                base._x(d.gain) + (" (measured)" if d.gain else ""),
            )
        base.out.print(t)
    if r.skills:
        t = base.table("skill", "action", "version", "status", "evidence", "why", ids=("skill",), title="skills")
        for s in r.skills:
            t.add_row(
                s.name,
                s.action,
                str(s.version or "-"),
                s.status or "-",
                f"{len(s.experiences)} exp / {len(s.attempts)} att",
                s.reason,
            )
        base.out.print(t)
        for s in r.skills:
            for finding in s.lint:
                base.out.print(f"  {s.name}: {finding}")
    for note in r.notes:
        base.out.print(f"[yellow]note[/]: {note}")
    base.out.print(f"usage: {_usage_line(r.usage)}; {r.seconds:.0f} s wall clock; logged to {r.log_path}")


def _usage_line(u: Any) -> str:
    cost = (
        f"~${u.estimated_cost_usd:.4f} (estimate from list prices)"
        if u.estimated_cost_usd is not None
        else "cost unknown for this model"
    )
    return (
        f"{u.input_tokens:,} input + {u.output_tokens:,} output tokens in {u.requests} requests "
        f"({u.retries} retried), {cost}"
    )
