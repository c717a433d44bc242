"""Draft skills from groups of experiences, linked to their evidence.

Experiences that explain a step (a parent and a correct child attempt) are grouped by
the techniques they name; each group becomes one skill the model writes (name,
description, body, conditions, pitfalls) while the harness supplies what must be
true: the techniques, the evidence (attempt and experience ids, measured gains), and
runnable examples taken from the recorded candidates themselves.

Before anything is stored, a draft that would duplicate an existing skill (same name
already curated, or ``skills.find_similar`` finds it) is merged into that skill as new
evidence instead. A new draft must pass lint, examples verified through the toolchain;
lint errors go back to the model to fix once. Drafts then await a curator.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skillbase.agent import prompts
from skillbase.agent.client import MessagesClient
from skillbase.agent.models import AgentEvent, OnEvent, SkillOutcome
from skillbase.agent.structured import ask, tool_spec
from skillbase.errors import NotFound, SkillbaseError
from skillbase.models import (
    SKILL_NAME_RE,
    AppliesWhen,
    Attempt,
    Evidence,
    Experience,
    Language,
    Provenance,
    Skill,
)
from skillbase.skills.dedupe import find_similar
from skillbase.skills.lint import lint

if TYPE_CHECKING:
    from skillbase.api import SkillBase

MAX_EXAMPLE_CHARS = 6_000  # of each source shown to the model


class SkillDraft(BaseModel):
    """What the model writes; everything measured is filled in by the harness."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        max_length=64,
        pattern=SKILL_NAME_RE.pattern,
        description="lowercase words joined by hyphens, naming the technique, e.g. 'wide-blocks-for-streaming'",
    )
    description: str = Field(
        min_length=40, max_length=1024, description="what the skill does, then a sentence starting 'Use it when'"
    )
    body: str = Field(min_length=100, max_length=16_000, description="markdown with the required sections")
    applies_when: AppliesWhen = Field(default_factory=AppliesWhen)
    languages: list[Language] = Field(default_factory=list)
    expected_effect: str = Field("", max_length=1000, description="the effect measured, in words; no invented numbers")
    pitfalls: list[str] = Field(default_factory=list, max_length=12)


SKILL_TOOL = tool_spec("draft_skill", "Write one reusable skill from the experiences shown.", SkillDraft)


@dataclass
class Group:
    techniques: tuple[str, ...]
    experiences: list[Experience] = field(default_factory=list)
    attempts: dict[str, Attempt] = field(default_factory=dict)


def group_experiences(sb: "SkillBase", experiences: list[Experience]) -> tuple[list[Group], list[str]]:
    """Experiences that explain a step with a correct child, grouped by their techniques."""
    groups: dict[tuple[str, ...], Group] = {}
    seen, loose = set(), 0
    for exp in experiences:
        if exp.id in seen:
            continue
        seen.add(exp.id)
        pair = _pair(sb, exp)
        if pair is None or not exp.techniques:
            loose += 1
            continue
        group = groups.setdefault(tuple(sorted(exp.techniques)), Group(tuple(sorted(exp.techniques))))
        group.experiences.append(exp)
        group.attempts.update({a.id: a for a in pair})
    notes = (
        [f"{loose} experience(s) explain no parent -> correct child step with named techniques; they stay experiences"]
        if loose
        else []
    )
    return list(groups.values()), notes


def _pair(sb: "SkillBase", exp: Experience) -> tuple[Attempt, Attempt] | None:
    if not (exp.before_attempt and exp.after_attempt):
        return None
    try:
        before, after = sb.get_attempt(exp.before_attempt), sb.get_attempt(exp.after_attempt)
    except NotFound:
        return None
    return (before, after) if after.verdict == "correct" else None


def draft_skills(
    sb: "SkillBase",
    client: MessagesClient,
    experiences: list[Experience],
    *,
    agent: str,
    max_skills: int,
    verify_examples: bool,
    emit: OnEvent,
    notes: list[str],
) -> list[SkillOutcome]:
    """One outcome per group: proposed as a draft, merged into an existing skill, or skipped (with why)."""
    groups, found = group_experiences(sb, experiences)
    notes += found
    if len(groups) > max_skills:
        notes.append(f"{len(groups) - max_skills} more group(s) left for the next run (max_skills={max_skills})")
    outcomes = []
    for group in groups[:max_skills]:
        outcome = _draft(sb, client, group, agent, verify_examples)
        emit(
            AgentEvent(
                kind="distill",
                message=f"skill {outcome.name}: {outcome.action}" + (f" ({outcome.reason})" if outcome.reason else ""),
                data=outcome.model_dump(mode="json"),
            )
        )
        outcomes.append(outcome)
    return outcomes


def _draft(sb: "SkillBase", client: MessagesClient, group: Group, agent: str, verify: bool) -> SkillOutcome:
    vocabulary = ", ".join(t.name for t in sb.memory.list_techniques())
    prompt = prompts.skill_request(_evidence_text(group), list(group.techniques), vocabulary)

    def check(draft: SkillDraft) -> tuple[Any, list[str]]:
        try:
            skill = build_skill(sb, group, draft, agent)
        except (ValidationError, SkillbaseError) as e:
            return None, [str(e)[:1000]]
        target = merge_target(sb, skill)
        if target:
            return (skill, target, []), []
        issues = lint(skill, store=sb.memory, toolchain=sb.toolchain if verify else None, verify_examples=verify)
        errors = [f"{i.code}: {i.message}" for i in issues if i.level == "error"]
        return (
            skill,
            None,
            [f"{i.level} {i.code}: {i.message}" for i in issues if i.level in ("error", "warning")],
        ), errors

    answer = ask(client, system=prompts.DISTILL_SYSTEM, prompt=prompt, tool=SKILL_TOOL, model=SkillDraft, check=check)
    base = dict(
        techniques=list(group.techniques),
        experiences=[e.id for e in group.experiences],
        attempts=sorted(group.attempts),
    )
    if answer.value is None:
        return SkillOutcome(
            name="-".join(group.techniques)[:64],
            action="skipped",
            lint=answer.problems,
            reason="the draft did not pass lint after a second try",
            **base,
        )
    skill, target, lint_found = answer.value_checked
    if target:
        return _merge(sb, skill, target, agent, base)
    ids = [e.id for e in group.experiences]
    proposal = sb.propose_skill(
        skill,
        agent=agent,
        from_experiences=ids,
        reason=f"distilled from {len(ids)} experience(s): {', '.join(ids[:5])}",
    )
    stored = proposal.skill
    return SkillOutcome(
        name=stored.name,
        action="proposed",
        version=stored.version,
        status=stored.status,
        lint=lint_found,
        reason="awaits curation",
        **base,
    )


def build_skill(sb: "SkillBase", group: Group, draft: SkillDraft, agent: str) -> Skill:
    """The skill as stored: the model's prose, the harness's techniques, evidence and examples."""
    best = _example_experience(group)
    after = group.attempts[best.after_attempt]
    before = group.attempts[best.before_attempt]
    files, examples = _examples(sb, before, after)
    evidence = [
        Evidence(
            attempt_id=e.after_attempt,
            experience_id=e.id,
            task=e.task,
            gain=e.gain,
            hardware=e.hardware,
            note=(e.title or e.lesson)[:200],
        )
        for e in group.experiences
    ]
    return Skill(
        name=draft.name,
        description=draft.description,
        techniques=list(group.techniques),
        applies_when=draft.applies_when,
        languages=draft.languages or ([after.language] if after.language else []),
        expected_effect=draft.expected_effect,
        pitfalls=draft.pitfalls,
        evidence=evidence,
        examples=examples,
        status="draft",
        body=draft.body,
        files=files,
        provenance=Provenance(author=agent, source="distilled", from_experiences=[e.id for e in group.experiences]),
    )


def _example_experience(group: Group) -> Experience:
    """The experience whose attempts make the example: the largest measured gain, else the newest."""
    timed = [e for e in group.experiences if e.gain]
    return max(timed, key=lambda e: e.gain) if timed else group.experiences[-1]


def _examples(sb: "SkillBase", before: Attempt, after: Attempt) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Example files from the recorded candidates; the task by built-in name, else its file copied in."""
    try:
        info = sb.task(after.task)
    except NotFound:
        return {}, []  # a task only the store knows: no runnable example here
    files = {"examples/after.py": after.source}
    task_ref = info.name
    if not info.builtin:
        files["examples/task.py"], task_ref = sb.task_source(info), "examples/task.py"
    examples = [{"task": task_ref, "solution": "examples/after.py"}]
    if before.verdict == "correct":
        files["examples/before.py"] = before.source
        examples.append({"task": task_ref, "solution": "examples/before.py"})
    return files, examples


def merge_target(sb: "SkillBase", skill: Skill) -> str | None:
    """The existing skill this draft should add evidence to instead of being proposed, if any."""
    try:
        existing = sb.get_skill(skill.name)
    except NotFound:
        existing = None
    if existing is not None and existing.status != "draft":
        return existing.superseded_by or (existing.name if existing.status == "approved" else None)
    similar = find_similar(sb.memory, skill, limit=1)
    return similar[0].b if similar else None


def _merge(sb: "SkillBase", skill: Skill, target: str, agent: str, base: dict[str, Any]) -> SkillOutcome:
    existing = sb.get_skill(target)
    linked = {(e.attempt_id, e.experience_id) for e in existing.evidence}
    new = [e for e in skill.evidence if (e.attempt_id, e.experience_id) not in linked]
    if not new:
        return SkillOutcome(
            name=target,
            action="merged",
            version=existing.version,
            status=existing.status,
            reason="its evidence was already linked",
            **base,
        )
    stored = sb.edit_skill(
        target,
        {"evidence": existing.evidence + new},
        author=agent,
        reason=f"distilled evidence from {', '.join(e.experience_id for e in new)} "
        f"(a draft {skill.name!r} would have duplicated it)",
    )
    return SkillOutcome(
        name=target,
        action="merged",
        version=stored.version,
        status=stored.status,
        reason=f"{len(new)} evidence item(s) added instead of a near-duplicate draft {skill.name!r}",
        **base,
    )


def _evidence_text(group: Group) -> str:
    parts = []
    for e in group.experiences:
        gain = f"measured gain {e.gain:.2f}x" if e.gain else "speed not measured (verified on CPU or a fix)"
        parts.append(
            f"### Experience {e.id}: {e.title or '(untitled)'}\ntask {e.task} ({e.family}, {e.dtype}); "
            f"{gain}; attempts {e.before_attempt} -> {e.after_attempt}\nconditions: "
            f"{e.conditions or 'not stated'}\nlesson: {e.lesson}\n"
        )
    best = _example_experience(group)
    before, after = group.attempts[best.before_attempt], group.attempts[best.after_attempt]
    diff = "".join(
        difflib.unified_diff(before.source.splitlines(True), after.source.splitlines(True), "before.py", "after.py")
    )
    parts.append(
        f"### The change ({best.before_attempt} -> {best.after_attempt})\n```diff\n"
        f"{diff[:MAX_EXAMPLE_CHARS]}\n```\n### The candidate after it\n```python\n"
        f"{after.source[:MAX_EXAMPLE_CHARS]}\n```"
    )
    return "\n".join(parts)
