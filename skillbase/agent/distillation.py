"""Distillation: turn new attempts and lessons into experiences and draft skills.

1. Steps. Every new attempt whose parent is known and that no lesson explains yet is a
   step: an ``improvement`` or a ``regression`` when both are correct and timed on the same
   hardware (gain beyond 2% either way), a ``fix`` when the parent failed and the child is
   correct. Untimed correct -> correct steps (CPU runs) carry no speed to learn from.
2. Lessons. The model writes one lesson per step (title, lesson, conditions); the
   harness records it as an Experience with ``source='distilled'``, the attempts linked,
   the techniques the attempt named, and the gain measured from the attempts, never typed.
3. Skills. Experiences that explain a step, grouped by their techniques, become one
   draft skill per group (``skillbase.agent.drafts``): linted, merged into an existing
   skill as evidence when it would duplicate one, else proposed as a draft for curation.

``since`` (default: the end of the last distill run in the run log) bounds what is new.
"""

from __future__ import annotations

import difflib
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skillbase.agent import drafts, prompts
from skillbase.agent.client import MessagesClient
from skillbase.agent.models import AgentEvent, DistilledStep, DistillResult, OnEvent
from skillbase.agent.options import AgentOptions
from skillbase.agent.structured import ask, tool_spec
from skillbase.agent.usage import RunRecord, log_run, read_runs
from skillbase.errors import AgentError, InvalidInput, NotFound
from skillbase.models import Attempt, Experience, utcnow

if TYPE_CHECKING:
    from skillbase.api import SkillBase

NOISE = 1.02  # a gain within 2% of 1 is timing noise, not a lesson
STEPS_PER_REQUEST = 5
MAX_DIFF_CHARS = 4_000
SCAN_LIMIT = 2_000  # newest records read per run


@dataclass
class Step:
    kind: Literal["improvement", "regression", "fix"]
    before: Attempt
    after: Attempt
    gain: float | None


class DistilledLesson(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=1, description="the step number this lesson explains")
    title: str = Field(min_length=1, max_length=120, description="a short headline")
    lesson: str = Field(
        min_length=20,
        max_length=2000,
        description="what changed, what was measured and why, in sentences another engineer can act on",
    )
    conditions: str = Field("", max_length=500, description="where it holds: shapes, dtype, GPU")


class LessonBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lessons: list[DistilledLesson] = Field(min_length=1, description="one lesson per step")


LESSONS_TOOL = tool_spec("record_lessons", "Record one lesson for each optimization step shown.", LessonBatch)


def parse_since(value: datetime | str | None) -> datetime | None:
    """A datetime from a datetime, an ISO date or time, or an age such as '30m', '12h', '7d'."""
    if value is None or isinstance(value, datetime):
        return value if value is None or value.tzinfo else value.replace(tzinfo=timezone.utc)
    text = value.strip()
    age = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([mhdw])", text)
    if age:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[age.group(2)]
        return utcnow() - timedelta(**{unit: float(age.group(1))})
    try:
        return parse_since(datetime.fromisoformat(text))
    except ValueError:
        raise InvalidInput(
            f"cannot read --since {value!r}",
            hint="give an ISO date or time (2026-11-20, 2026-11-20T14:00) or an age (30m, 12h, 7d)",
        ) from None


def distill(
    sb: "SkillBase",
    since: datetime | str | None = None,
    *,
    model: str | None = None,
    progress: OnEvent | None = None,
    options: AgentOptions | None = None,
    max_steps: int = 20,
    max_skills: int = 5,
    verify_examples: bool = True,
) -> DistillResult:
    """Distil attempts and lessons newer than ``since`` (default: the last distill run's end;
    everything on the first run) into experiences and draft skills; see the module docstring.

    Raises ConfigError without an API key, AgentError when the API fails for good.
    """
    started, clock = utcnow(), time.perf_counter()
    opts = options or AgentOptions.from_env(sb.settings, model=model)
    cutoff = parse_since(since) if since is not None else _last_run_end(sb)
    emit = progress or (lambda event: None)
    attempts = list(reversed(sb.memory.list_attempts(since=cutoff, limit=SCAN_LIMIT)))
    experiences = list(reversed(sb.memory.list_experiences(since=cutoff, limit=SCAN_LIMIT)))
    emit(
        AgentEvent(
            kind="start",
            message=f"distilling {len(attempts)} attempts and {len(experiences)} experiences "
            f"since {cutoff.isoformat() if cutoff else 'the beginning'}",
        )
    )
    client = MessagesClient(opts, on_event=emit)
    notes: list[str] = []
    distilled: list[DistilledStep] = []
    skills = []
    try:
        steps, notes = find_steps(sb, attempts, max_steps)
        made = _distil_steps(sb, client, steps, opts.agent_name, emit, notes)
        distilled = [_step_record(s, e) for s, e in made]
        skills = drafts.draft_skills(
            sb,
            client,
            experiences + [e for _, e in made],
            agent=opts.agent_name,
            max_skills=max_skills,
            verify_examples=verify_examples,
            emit=emit,
            notes=notes,
        )
    except AgentError as e:
        _log(sb, opts, started, f"error: {e.message}", client, distilled, skills)
        raise
    finally:
        client.close()
    path = _log(sb, opts, started, "done", client, distilled, skills)
    return DistillResult(
        since=cutoff,
        attempts_seen=len(attempts),
        experiences_seen=len(experiences),
        distilled=distilled,
        skills=skills,
        notes=notes,
        usage=client.usage.report(),
        seconds=time.perf_counter() - clock,
        log_path=str(path),
    )


def _last_run_end(sb: "SkillBase") -> datetime | None:
    runs = [r for r in read_runs(sb.settings, "distill") if r.stop_reason == "done"]
    return runs[-1].ended_at if runs else None


# ---------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------


def measured_gain(before: Attempt, after: Attempt) -> float | None:
    """before.median / after.median when both are correct and timed on the same hardware."""
    if before.verdict != "correct" or after.verdict != "correct" or before.hardware != after.hardware:
        return None
    if not (before.median_ms and after.median_ms):
        return None
    return before.median_ms / after.median_ms


def find_steps(sb: "SkillBase", attempts: list[Attempt], limit: int) -> tuple[list[Step], list[str]]:
    """The parent -> child steps among ``attempts`` that deserve a lesson and have none yet."""
    explained: dict[str, set[str]] = {}
    steps, untimed, noise = [], 0, 0
    for child in attempts:
        if not child.parent_id or child.verdict != "correct":
            continue
        if child.task not in explained:
            explained[child.task] = {
                e.after_attempt for e in sb.memory.list_experiences(task=child.task, limit=SCAN_LIMIT)
            }
        if child.id in explained[child.task]:
            continue
        try:
            parent = sb.get_attempt(child.parent_id)
        except NotFound:
            continue  # a parent from another store; nothing to compare with
        gain = measured_gain(parent, child)
        if parent.verdict != "correct":
            steps.append(Step("fix", parent, child, None))
        elif gain is None:
            untimed += 1
        elif gain >= NOISE or gain <= 1 / NOISE:
            steps.append(Step("improvement" if gain > 1 else "regression", parent, child, gain))
        else:
            noise += 1
    notes = []
    if untimed:
        notes.append(
            f"{untimed} correct parent -> child step(s) were not timed (no GPU), so no speed lesson was "
            "distilled from them"
        )
    if noise:
        notes.append(f"{noise} step(s) changed speed by less than {NOISE - 1:.0%}: timing noise, no lesson")
    if len(steps) > limit:
        notes.append(f"{len(steps) - limit} more step(s) left for the next run (max_steps={limit})")
    return steps[:limit], notes


def _describe(n: int, s: Step) -> str:
    b, a = s.before, s.after
    if s.gain is not None:
        measured = (
            f"measured {s.gain:.2f}x: parent median {b.median_ms:.4f} ms -> child {a.median_ms:.4f} ms "
            f"on {a.hardware} (CUDA events)"
        )
    else:
        message = b.bench_report.message if b.bench_report else ""
        measured = f"the parent was {b.verdict} ({message[:300]}); the child is correct; speed not compared"
    diff = "".join(difflib.unified_diff(b.source.splitlines(True), a.source.splitlines(True), "parent.py", "child.py"))
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + f"\n... [{len(diff) - MAX_DIFF_CHARS} more characters of diff]"
    return (
        f"## Step {n} ({s.kind}; task {a.task}, {a.family}, {a.dtype}; bottleneck {b.bottleneck})\n"
        f"{measured}\ntechniques named by the child: {', '.join(a.techniques) or 'none'}\n"
        f"```diff\n{diff}\n```\n"
    )


def _distil_steps(
    sb: "SkillBase", client: MessagesClient, steps: list[Step], agent: str, emit: OnEvent, notes: list[str]
) -> list[tuple[Step, Experience]]:
    made = []
    for start in range(0, len(steps), STEPS_PER_REQUEST):
        batch = steps[start : start + STEPS_PER_REQUEST]
        text = "\n".join(_describe(i + 1, s) for i, s in enumerate(batch))
        answer = ask(
            client,
            system=prompts.DISTILL_SYSTEM,
            prompt=prompts.lesson_request(text),
            tool=LESSONS_TOOL,
            model=LessonBatch,
            check=lambda v, n=len(batch): (None, _check_batch(v, n)),
        )
        if answer.value is None:
            notes.append(f"steps {start + 1}-{start + len(batch)}: no usable lessons ({'; '.join(answer.problems)})")
            continue
        for item in answer.value.lessons:
            step = batch[item.step - 1]
            exp = sb.memory.record_experience(_experience(step, item, agent))
            emit(
                AgentEvent(
                    kind="distill",
                    message=f"{step.kind} {step.before.id} -> {step.after.id}: {item.title}",
                    data={"experience_id": exp.id},
                )
            )
            made.append((step, exp))
    return made


def _check_batch(batch: LessonBatch, n: int) -> list[str]:
    numbers = [item.step for item in batch.lessons]
    problems = [f"there is no step {k}; steps are 1-{n}" for k in numbers if k > n]
    problems += [f"step {k} has two lessons" for k in sorted({k for k in numbers if numbers.count(k) > 1})]
    missing = [str(k) for k in range(1, n + 1) if k not in numbers]
    if missing:
        problems.append(f"lessons for step(s) {', '.join(missing)} are missing")
    return problems


def _experience(step: Step, item: DistilledLesson, agent: str) -> Experience:
    a, b = step.after, step.before
    return Experience(
        title=item.title,
        lesson=item.lesson,
        task=a.task,
        task_signature=a.task_signature,
        family=a.family,
        dtype=a.dtype,
        before_attempt=b.id,
        after_attempt=a.id,
        techniques=list(a.techniques),
        gain=step.gain,
        bottleneck=b.bottleneck,
        arch=a.arch,
        hardware=a.hardware,
        conditions=item.conditions,
        source="distilled",
        session=a.session,
        agent=agent,
    )


def _step_record(step: Step, exp: Experience) -> DistilledStep:
    return DistilledStep(
        experience_id=exp.id, kind=step.kind, before_attempt=step.before.id, after_attempt=step.after.id, gain=step.gain
    )


def _log(
    sb: "SkillBase",
    opts: AgentOptions,
    started: datetime,
    reason: str,
    client: MessagesClient,
    distilled: list[DistilledStep],
    skills: list[Any],
) -> Any:
    return log_run(
        sb.settings,
        RunRecord(
            kind="distill",
            model=opts.model,
            base_url=opts.base_url,
            started_at=started,
            stop_reason=reason,
            usage=client.usage.report(),
            records={
                "experiences": [d.experience_id for d in distilled],
                "skills": [s.name for s in skills if s.action != "skipped"],
            },
        ),
    )
