"""Curation: every change to a skill is a new version in the Store's ledger, with who and why.

The operations a curator (CLI ``skillbase skills ...``) and an agent (MCP
``propose_skill``) perform on the skill library:

    add_skill(store, Path("my-skill/"), author="ana", reason="from the team wiki")     # lands as a draft
    approve_skill(store, "my-skill", curator="ana", reason="examples verified")
    edit_skill(store, "my-skill", {"pitfalls": [...]}, author="ana", reason="one more pitfall")
    rollback_skill(store, "my-skill", 1, author="ana", reason="the edit was wrong")
    deprecate_skill(store, "old-skill", author="ana", reason="superseded", superseded_by="my-skill")
    merge_skills(store, "a", "b", into="a", author="ana", reason="same idea")
    propose_skill(store, skill, agent="agent-7", from_experiences=["exp_..."])            # always a draft ...
    propose_skill(store, skill, agent="agent-7", policy=AutoApprovePolicy(min_attempts=3, min_gain=1.2))
                                                            # ... unless the caller's policy passes on measured data
    import_skills(store, Path("exported/"), author="ana", reason="team export")

Rules: a skill added or imported without ``approve=True`` and every agent
proposal is a draft; only ``approve_skill`` (a curator), an explicit
``approve=True`` by a curator, or an ``AutoApprovePolicy`` the caller passes
in makes it approved. Identical content adds no version. Bad input (unknown
techniques, duplicate names, invalid records, oversized files) raises before
anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from skillbase.errors import InvalidInput, NotFound
from skillbase.models import Provenance, Record, Skill, SkillVersion
from skillbase.skills.files import SKILL_FILE, check_files
from skillbase.skills.markdown import read_skill_dir

if TYPE_CHECKING:
    from skillbase.memory.store import Store
    from skillbase.toolchain.facade import Toolchain

EDITABLE_FIELDS = (
    "description",
    "techniques",
    "applies_when",
    "languages",
    "expected_effect",
    "pitfalls",
    "evidence",
    "examples",
    "provenance",
    "body",
    "files",
)
TOTAL_FILES_FACTOR = 4  # a skill's files together may hold 4x settings.max_source_bytes


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


def list_skills(store: "Store", status: str | None = None) -> list[Skill]:
    """The latest version of every skill (only those with ``status`` when given), by name."""
    if status is not None and status not in ("draft", "approved", "deprecated"):
        raise InvalidInput(f"unknown status {status!r}", hint="draft, approved or deprecated")
    return store.list_skills(status)


def show_skill(store: "Store", name: str, version: int | None = None) -> Skill:
    """A skill's latest version, or the version asked for (NotFound otherwise)."""
    return store.get_skill(name, version)


def skill_history(store: "Store", name: str) -> list[SkillVersion]:
    """Every version of a skill, oldest first, each with author, reason and time."""
    return store.skill_history(name)


# ---------------------------------------------------------------------------
# Checks shared by every write
# ---------------------------------------------------------------------------


def _exists(store: "Store", name: str) -> bool:
    try:
        store.get_skill(name)
    except NotFound:
        return False
    return True


def prepare(store: "Store", skill: Skill) -> Skill:
    """The skill as it will be stored: techniques canonical, files within limits, pointers valid.

    Raises UnknownTechnique, LimitExceeded or InvalidInput; writes nothing.
    """
    limit = store.settings.max_source_bytes
    check_files(skill.files, max_bytes=limit, where=f"skill {skill.name}")
    total = sum(len(t.encode("utf-8", errors="replace")) for t in skill.files.values())
    if total > TOTAL_FILES_FACTOR * limit:
        raise InvalidInput(
            f"skill {skill.name}: its files hold {total} bytes; the limit is {TOTAL_FILES_FACTOR * limit}"
        )
    techniques = [store.canonical_technique(t) for t in skill.techniques]
    if skill.superseded_by is not None:
        if skill.superseded_by == skill.name:
            raise InvalidInput(f"skill {skill.name} cannot supersede itself")
        if not _exists(store, skill.superseded_by):
            raise InvalidInput(f"skill {skill.name}: superseded_by names {skill.superseded_by!r}, which does not exist")
    return skill.model_copy(update={"techniques": list(dict.fromkeys(techniques))})


def _put(store: "Store", skill: Skill, *, author: str, reason: str) -> Skill:
    if not author or not author.strip() or not reason or not reason.strip():
        raise InvalidInput("every change needs an author and a reason", hint="say who changed the skill and why")
    return store.put_skill(prepare(store, skill), author=author, reason=reason)


def _load(source: Skill | Path | str, store: "Store") -> Skill:
    if isinstance(source, Skill):
        return source
    path = Path(source)
    folder = path.parent if path.name == SKILL_FILE else path
    return read_skill_dir(folder, max_bytes=store.settings.max_source_bytes)


# ---------------------------------------------------------------------------
# Add, edit, approve, deprecate, rollback
# ---------------------------------------------------------------------------


def add_skill(
    store: "Store",
    source: Skill | Path | str,
    *,
    author: str,
    reason: str = "added",
    approve: bool = False,
    check: bool = True,
) -> Skill:
    """Add a new skill from a ``Skill``, a skill folder or its ``SKILL.md``; version 1 in the ledger.

    It lands as a draft unless ``approve`` (a curator approving explicitly,
    which like ``approve_skill`` needs a clean fast lint unless ``check`` is
    false). InvalidInput when a skill of that name exists (use ``edit_skill``).
    """
    skill = _load(source, store)
    if _exists(store, skill.name):
        raise InvalidInput(
            f"a skill named {skill.name!r} already exists", hint="change it with edit_skill, or pick another name"
        )
    prov = skill.provenance
    if prov.author == "unknown":
        prov = prov.model_copy(update={"author": author})
    skill = skill.model_copy(
        update={"status": "approved" if approve else "draft", "superseded_by": None, "provenance": prov}
    )
    if approve and check:
        _lint_gate(store, skill, None)
    return _put(store, skill, author=author, reason=reason)


def edit_skill(store: "Store", name: str, changes: Skill | Mapping[str, Any], *, author: str, reason: str) -> Skill:
    """A new version of ``name`` with ``changes`` applied: a mapping of EDITABLE_FIELDS, or a whole
    ``Skill`` of the same name (for example the edited SKILL.md). Status changes go through
    approve / deprecate; identical content adds no version."""
    current = store.get_skill(name)
    if isinstance(changes, Skill):
        if changes.name != name:
            raise InvalidInput(
                f"the edited skill is named {changes.name!r}, not {name!r}",
                hint="renaming is not an edit: add the new skill and deprecate this one",
            )
        if changes.status != current.status or changes.superseded_by != current.superseded_by:
            raise InvalidInput(
                f"an edit cannot change the status of {name!r} ({current.status} -> {changes.status})",
                hint="use approve_skill or deprecate_skill",
            )
        updates = {f: getattr(changes, f) for f in EDITABLE_FIELDS}
    else:
        bad = [k for k in changes if k not in EDITABLE_FIELDS]
        if bad:
            raise InvalidInput(
                f"cannot edit field(s) {', '.join(bad)} of {name!r}",
                hint=f"editable: {', '.join(EDITABLE_FIELDS)}; status changes use approve/deprecate",
            )
        updates = dict(changes)
    try:
        edited = Skill.model_validate({**current.model_dump(), **updates})
    except ValidationError as e:
        first = e.errors()[0]
        raise InvalidInput(f"edit of {name!r}: field {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return _put(store, edited, author=author, reason=reason)


def _lint_gate(store: "Store", skill: Skill, toolchain: "Toolchain | None") -> None:
    """InvalidInput listing the lint errors of ``skill`` (fast checks; examples too with a toolchain)."""
    from skillbase.skills.lint import errors, lint

    found = errors(lint(skill, store=store, toolchain=toolchain, verify_examples=toolchain is not None))
    if found:
        listed = "; ".join(f"{i.code}: {i.message}" for i in found[:5])
        raise InvalidInput(
            f"skill {skill.name!r} does not pass lint, so it cannot be approved: {listed}",
            hint="fix it with edit_skill, or approve with check=False",
        )


def approve_skill(
    store: "Store", name: str, *, curator: str, reason: str, check: bool = True, toolchain: "Toolchain | None" = None
) -> Skill:
    """Approve a draft (or restore a deprecated skill): the curator's action that makes it visible as approved.

    With ``check`` the skill must pass lint first (fast checks; its examples
    too when a ``toolchain`` is given); InvalidInput lists the errors otherwise.
    """
    skill = store.get_skill(name)
    if check:
        _lint_gate(store, skill, toolchain)
    return _put(
        store, skill.model_copy(update={"status": "approved", "superseded_by": None}), author=curator, reason=reason
    )


def deprecate_skill(store: "Store", name: str, *, author: str, reason: str, superseded_by: str | None = None) -> Skill:
    """Mark a skill deprecated (kept, with its history), optionally pointing at the skill that replaces it."""
    skill = store.get_skill(name)
    return _put(
        store,
        skill.model_copy(update={"status": "deprecated", "superseded_by": superseded_by}),
        author=author,
        reason=reason,
    )


def rollback_skill(store: "Store", name: str, version: int, *, author: str, reason: str | None = None) -> Skill:
    """A new version whose content equals version ``version`` (history is never rewritten)."""
    old = store.get_skill(name, version)
    why = f"rollback to version {version}" + (f": {reason}" if reason else "")
    return _put(store, old, author=author, reason=why)


# ---------------------------------------------------------------------------
# Merge
# ---------------------------------------------------------------------------


class MergeResult(Record):
    """The merged skill and the skills deprecated in its favour."""

    merged: Skill
    deprecated: list[Skill]


def _union(*lists: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for items in lists:
        for x in items:
            if x not in out:
                out.append(x)
    return out


def _merge_files(base: Skill, other: Skill) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Files and examples of both; the other's files that clash move under merged/<other>/."""
    files = dict(base.files)
    moved: dict[str, str] = {}
    for rel, text in other.files.items():
        target = rel if files.get(rel, text) == text else f"merged/{other.name}/{rel}"
        files[target] = text
        moved[rel] = target
    examples = [{k: moved.get(v, v) for k, v in ex.items()} for ex in other.examples]
    return files, _union(base.examples, examples)


def _merge_applies(a: Skill, b: Skill) -> dict[str, Any]:
    # The merged skill applies wherever either did: any-lists stay "any", requirements shrink.
    wa, wb = a.applies_when, b.applies_when

    def either(x: list, y: list) -> list:
        return [] if not x or not y else _union(x, y)

    arches = [w.min_arch for w in (wa, wb)]
    return {
        "families": either(wa.families, wb.families),
        "bottlenecks": either(wa.bottlenecks, wb.bottlenecks),
        "dtypes": either(wa.dtypes, wb.dtypes),
        "min_arch": None if None in arches else min(arches, key=lambda s: (len(s), s)),
        "requires_features": [f for f in wa.requires_features if f in wb.requires_features],
        "excludes_features": [f for f in wa.excludes_features if f in wb.excludes_features],
    }


def merge_skills(
    store: "Store",
    a: str,
    b: str,
    *,
    into: str,
    author: str,
    reason: str,
    description: str | None = None,
    body: str | None = None,
) -> MergeResult:
    """Merge skills ``a`` and ``b`` into ``into`` (``a``, ``b`` or a new name).

    The merged skill keeps the text of ``into`` (or of ``a`` for a new name)
    unless ``description`` / ``body`` are given, and takes the union of both
    skills' techniques, evidence, pitfalls, languages, examples and files; its
    provenance lists both in ``merged_from`` with both sets of source
    experiences. Each merged-away skill is deprecated with ``superseded_by``
    pointing at the merged one. Nothing merges without this call: ``dedupe``
    only proposes.
    """
    if a == b:
        raise InvalidInput("cannot merge a skill with itself")
    sa, sb = store.get_skill(a), store.get_skill(b)
    for s in (sa, sb):
        if s.status == "deprecated":
            raise InvalidInput(
                f"skill {s.name!r} is deprecated", hint="approve it again before merging, or merge others"
            )
    if into not in (a, b) and _exists(store, into):
        raise InvalidInput(f"a skill named {into!r} already exists", hint=f"merge into {a!r}, {b!r} or a new name")
    base, other = (sb, sa) if into == b else (sa, sb)
    files, examples = _merge_files(base, other)
    merged_from = _union(
        base.provenance.merged_from, other.provenance.merged_from, [s.name for s in (base, other) if s.name != into]
    )
    provenance = base.provenance.model_copy(
        update={
            "from_experiences": _union(base.provenance.from_experiences, other.provenance.from_experiences),
            "merged_from": merged_from,
        }
    )
    try:
        merged = Skill.model_validate(
            {
                **base.model_dump(),
                "name": into,
                "description": description or base.description,
                "body": body if body is not None else base.body,
                "techniques": _union(base.techniques, other.techniques),
                "evidence": _union(base.evidence, other.evidence),
                "pitfalls": _union(base.pitfalls, other.pitfalls),
                "languages": _union(base.languages, other.languages),
                "expected_effect": base.expected_effect or other.expected_effect,
                "examples": examples,
                "files": files,
                "applies_when": _merge_applies(base, other),
                "provenance": provenance,
                "status": "approved" if "approved" in (base.status, other.status) else "draft",
            }
        )
    except ValidationError as e:
        raise InvalidInput(f"the merged skill is invalid: {e.errors()[0]['msg']}") from None
    prepare(store, merged)  # fail before the first write
    why = f"merge of {a} and {b}: {reason}"
    stored = _put(store, merged, author=author, reason=why)
    gone = [
        deprecate_skill(store, s.name, author=author, reason=f"merged into {into}: {reason}", superseded_by=into)
        for s in (sa, sb)
        if s.name != into
    ]
    return MergeResult(merged=stored, deprecated=gone)


# ---------------------------------------------------------------------------
# Agent proposals and the auto-approve policy
# ---------------------------------------------------------------------------


class AutoApprovePolicy(Record):
    """Thresholds on measured evidence under which an agent's proposal is approved without a curator.

    Counted from the store, never from numbers typed into the proposal: an
    attempt qualifies when its verdict is 'correct' and its measured gain
    (parent median / its median, or its speedup over eager when it has no
    parent) is at least ``min_gain``. The proposal is approved when at least
    ``min_attempts`` qualifying attempts span at least ``min_tasks`` tasks.
    """

    min_attempts: int = 3
    min_gain: float = 1.1
    min_tasks: int = 2


class PolicyDecision(Record):
    approved: bool
    reason: str
    qualifying_attempts: list[str] = []
    tasks: list[str] = []


class Proposal(Record):
    """What ``propose_skill`` stored, and what the auto-approve policy decided (None without one)."""

    skill: Skill
    decision: PolicyDecision | None = None


def _measured_gain(store: "Store", attempt_id: str) -> tuple[float | None, str | None]:
    att = store.get_attempt(attempt_id)
    if att.verdict != "correct":
        return None, att.task
    if att.parent_id and att.median_ms:
        parent = store.get_attempt(att.parent_id)
        if parent.verdict == "correct" and parent.median_ms:
            return parent.median_ms / att.median_ms, att.task
    return att.speedup_vs_eager, att.task


def evaluate_policy(store: "Store", skill: Skill, policy: AutoApprovePolicy) -> PolicyDecision:
    """Apply ``policy`` to the attempts behind a skill's evidence and source experiences."""
    attempt_ids = [e.attempt_id for e in skill.evidence if e.attempt_id]
    for xid in _union([e.experience_id for e in skill.evidence if e.experience_id], skill.provenance.from_experiences):
        try:
            exp = store.get_experience(xid)
        except NotFound:
            continue  # an id the store lacks proves nothing
        attempt_ids += [exp.after_attempt] if exp.after_attempt else []
    qualifying, tasks = [], []
    for aid in _union(attempt_ids):
        try:
            gain, task = _measured_gain(store, aid)
        except NotFound:
            continue
        if gain is not None and gain >= policy.min_gain:
            qualifying.append(aid)
            tasks = _union(tasks, [task])
    ok = len(qualifying) >= policy.min_attempts and len(tasks) >= policy.min_tasks
    reason = (
        f"{len(qualifying)} correct attempt(s) with measured gain >= {policy.min_gain:g}x on {len(tasks)} "
        f"task(s); the policy needs {policy.min_attempts} on {policy.min_tasks}"
    )
    return PolicyDecision(approved=ok, reason=reason, qualifying_attempts=qualifying, tasks=tasks)


def propose_skill(
    store: "Store",
    skill: Skill,
    *,
    agent: str,
    from_experiences: Iterable[str] = (),
    reason: str = "proposed by an agent",
    policy: AutoApprovePolicy | None = None,
) -> Proposal:
    """Store an agent's proposed skill as a draft (a new version if the agent's earlier draft exists).

    The experiences it came from must exist. An approved or deprecated skill
    of the same name is never overwritten by a proposal. With a ``policy``
    passed in by the caller, the draft is approved when the measured evidence
    meets it; otherwise it waits for a curator's ``approve_skill``.
    """
    for xid in from_experiences:
        try:
            store.get_experience(xid)
        except NotFound:
            raise InvalidInput(
                f"experience {xid!r} does not exist", hint="cite experiences recorded in the store"
            ) from None
    if _exists(store, skill.name) and store.get_skill(skill.name).status != "draft":
        raise InvalidInput(
            f"skill {skill.name!r} exists and is {store.get_skill(skill.name).status}; a proposal cannot replace it",
            hint="propose under a new name, or ask a curator to edit it",
        )
    prov = Provenance(
        author=agent,
        source="agent",
        from_experiences=_union(from_experiences, skill.provenance.from_experiences),
        merged_from=skill.provenance.merged_from,
    )
    draft = skill.model_copy(update={"status": "draft", "superseded_by": None, "provenance": prov})
    stored = _put(store, draft, author=agent, reason=reason)
    if policy is None:
        return Proposal(skill=stored)
    decision = evaluate_policy(store, stored, policy)
    if decision.approved:
        stored = _put(
            store,
            stored.model_copy(update={"status": "approved"}),
            author="auto-approve-policy",
            reason=f"auto-approved: {decision.reason}",
        )
    return Proposal(skill=stored, decision=decision)


# ---------------------------------------------------------------------------
# Import
# ---------------------------------------------------------------------------


def import_skills(
    store: "Store",
    path: Path | str,
    *,
    author: str,
    reason: str = "imported",
    approve: bool = False,
    replace: bool = False,
    check: bool = True,
) -> list[Skill]:
    """Import Agent Skills folders or markdown files (see ``agent_skills.read_agent_skills``) into the store.

    Everything is read and validated first (formats, sizes, paths, duplicate
    names, techniques); nothing is written unless all of it is good. Imported
    skills are drafts unless ``approve`` (each must then pass the fast lint
    unless ``check`` is false). A name already in the store is an error unless
    ``replace`` (which adds a new version).
    """
    from skillbase.skills.agent_skills import read_agent_skills

    skills = read_agent_skills(Path(path), max_bytes=store.settings.max_source_bytes)
    taken = [s.name for s in skills if _exists(store, s.name)]
    if taken and not replace:
        raise InvalidInput(
            f"skill(s) already in the store: {', '.join(taken[:10])}",
            hint="rename them, or import with replace=True to add new versions",
        )
    status = "approved" if approve else "draft"
    ready = [prepare(store, s.model_copy(update={"status": status, "superseded_by": None})) for s in skills]
    for s in ready if approve and check else []:
        _lint_gate(store, s, None)
    return [_put(store, s, author=author, reason=reason) for s in ready]
