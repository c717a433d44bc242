"""The agent-facing tools: one catalog, used by the MCP server, the reference agent and any
agent framework. Each tool has a name, a description written for the model that will
choose it, a typed input model, an output model and a function that calls ``SkillBase``.

    from skillbase import SkillBase
    from skillbase.tools import TOOLS, anthropic_tool_definitions, call

    tools = anthropic_tool_definitions()          # register with the Messages API (or any framework)
    with SkillBase() as sb:
        out = call(sb, "load_task", {"task": "row_softmax"})     # a pydantic model
        out.model_dump(mode="json")                              # what goes back to the model

``call`` validates the arguments (unknown fields, wrong types and missing fields raise
``InvalidInput`` naming the field and the fix), runs the tool and bounds its output:
long logs, tracebacks and sources are clipped with a note saying where the rest is
(the ``attempt://{id}``, ``skill://{name}`` and ``task://{name}`` resources).

Tasks are named by built-in name or by a path; candidates arrive as source text or a
path. Paths must lie inside the workspace (the directory the server or agent runs in)
or the built-in task folder, so a tool call can never read or import a file elsewhere.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from skillbase import seeds
from skillbase.errors import InvalidInput, NotFound
from skillbase.models import (
    AppliesWhen,
    AttemptSummary,
    BenchmarkResult,
    CompileReport,
    Experience,
    Language,
    ProfileReport,
    RecallResult,
    Skill,
    Suggestion,
    TaskSummary,
    Technique,
)

if TYPE_CHECKING:
    from skillbase.api import SkillBase

Progress = Callable[[float, str], None]
"""``progress(fraction 0..1, message)``, called from the thread running the tool."""

# Output bounds: what one tool result may carry before it is clipped with a pointer to the rest.
MAX_REFERENCE_CHARS = 12_000
MAX_TRACEBACK_CHARS = 2_000
MAX_DIAGNOSTICS = 20
MAX_EVIDENCE_PER_ITEM = 5
MAX_SKILL_BODY_CHARS = 16_000
MAX_EXAMPLE_CHARS = 24_000
MAX_PROFILED_KERNELS = 16

_BUILTIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_ATTEMPT_ID = r"^att_[0-9a-f]{12}_[0-9a-f]{8}$"
_EXPERIENCE_ID = r"^exp_[0-9a-f]{12}_[0-9a-f]{8}$"


# ---------------------------------------------------------------------------
# Call context and shared argument types
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CallContext:
    """Who is calling and where: the progress callback, the agent's name (recorded with
    attempts and proposals) and the workspace that task and source paths must lie in."""

    progress: Progress | None = None
    agent: str = "agent"
    workspace: Path = field(default_factory=Path.cwd)


class ToolInput(BaseModel):
    """Base of every input model: unknown fields are errors, so typos never pass silently."""

    model_config = ConfigDict(extra="forbid")


TaskRef = Annotated[
    str,
    Field(
        min_length=1,
        max_length=1024,
        description="a built-in task name such as 'row_softmax' or 'matmul', or the path of a KernelBench-format "
        "task file inside the workspace",
    ),
]
Source = Annotated[
    str,
    Field(
        description="the full text of a Python module defining ModelNew (Triton kernels, or CUDA C++ through "
        "torch.utils.cpp_extension.load_inline); at most 256 kB"
    ),
]
SourcePath = Annotated[
    str,
    Field(
        min_length=1,
        max_length=1024,
        description="instead of `source`: the path of the solution file inside the workspace",
    ),
]
AttemptId = Annotated[str, Field(pattern=_ATTEMPT_ID, description="an attempt id such as 'att_01a2077aecac_a2ae15ef'")]
Session = Annotated[
    str, Field(min_length=1, max_length=128, description="a label grouping this agent run's attempts and lessons")
]
TechniqueList = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=64)]],
    Field(
        max_length=12,
        description="techniques applied, by canonical name or alias, e.g. ['online-softmax', 'vectorized loads']",
    ),
]


class _Candidate(ToolInput):
    task: TaskRef
    source: Source | None = None
    source_path: SourcePath | None = None

    @model_validator(mode="after")
    def _one_candidate(self):
        if (self.source is None) == (self.source_path is None):
            raise ValueError(
                "give exactly one of `source` (the module text) and `source_path` (a file in the workspace)"
            )
        return self


# ---------------------------------------------------------------------------
# Input models
# ---------------------------------------------------------------------------


class LoadTaskInput(ToolInput):
    task: TaskRef


class CompileKernelInput(_Candidate):
    arch: str = Field("sm_90", pattern=r"^sm_\d{2,3}a?$", description="target GPU architecture; sm_90 is Hopper (H100)")


class BenchmarkKernelInput(_Candidate):
    parent_id: AttemptId | None = Field(None, description="the attempt this candidate improves on (its lineage parent)")
    techniques: TechniqueList = Field(default_factory=list)
    used: list[Annotated[str, Field(min_length=1, max_length=80)]] = Field(
        default_factory=list,
        max_length=20,
        description="ids of recalled items (skill names, exp_... or att_... ids) that shaped this candidate; "
        "whether it beat its parent is recorded as feedback on each",
    )
    session: Session | None = None
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto", description="'auto' uses a GPU when there is one; 'cpu' only verifies, under the Triton interpreter"
    )


class ProfileKernelInput(_Candidate):
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto",
        description="'auto' profiles on a GPU when there is one; without one the answer says what was measured instead",
    )
    attempt_id: AttemptId | None = Field(
        None, description="store the profile with this attempt (default: the latest attempt of the same source)"
    )


class RecallInput(ToolInput):
    task: TaskRef | None = None
    query: str | None = Field(
        None, min_length=1, max_length=2000, description="plain words, e.g. 'softmax rows too wide for registers'"
    )
    source: Source | None = Field(None, description="the current candidate's source, to match on its code")
    attempt_id: AttemptId | None = Field(
        None, description="use this attempt's source, verdict and bottleneck as the query"
    )
    arch: str | None = Field(None, pattern=r"^sm_\d{2,3}a?$", description="the GPU to recall for, e.g. 'sm_90'")
    k: int = Field(5, ge=1, le=20, description="how many skills and experiences to return")
    run: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="only this suite run's attempts (its run directory's name) and the lessons "
        "about them, instead of skills and experiences",
    )

    @model_validator(mode="after")
    def _something(self):
        if not (self.task or self.query or self.source or self.attempt_id):
            raise ValueError("give at least one of `task`, `query`, `source` or `attempt_id`")
        return self


class SuggestNextInput(ToolInput):
    task: TaskRef
    session: Session | None = Field(None, description="only count the attempts of this session")
    k: int = Field(3, ge=1, le=10, description="how many techniques to suggest")


class RecordLessonInput(ToolInput):
    lesson: str = Field(
        min_length=1,
        max_length=4000,
        description="what worked or failed and why, in a few sentences another agent can act on",
    )
    after_attempt: AttemptId | None = Field(None, description="the attempt that showed the lesson")
    before_attempt: AttemptId | None = Field(
        None, description="the attempt it is compared with (default: after's parent)"
    )
    task: TaskRef | None = Field(None, description="the task, when no attempt is given")
    techniques: TechniqueList = Field(default_factory=list)
    title: str = Field("", max_length=120, description="a short headline")
    conditions: str = Field("", max_length=500, description="where it held: shapes, dtype, GPU")
    session: Session | None = None

    @model_validator(mode="after")
    def _anchored(self):
        if not (self.after_attempt or self.before_attempt or self.task):
            raise ValueError(
                "a lesson needs `after_attempt` (usually the attempt just benchmarked), `before_attempt` or `task`"
            )
        return self


class GetSkillInput(ToolInput):
    name: str = Field(min_length=1, max_length=64, description="the skill's name, e.g. 'online-softmax-one-pass'")
    version: int | None = Field(None, ge=1, description="a past version; default the latest")
    include_examples: bool = Field(False, description="also return the example files (task and solution sources)")


class ProposeSkillInput(ToolInput):
    name: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$",
        description="lowercase words joined by hyphens, e.g. 'split-wide-rows-across-programs'",
    )
    description: str = Field(
        min_length=1, max_length=1024, description="what the skill does and when to use it, in one paragraph"
    )
    body: str = Field(
        min_length=1,
        max_length=MAX_SKILL_BODY_CHARS,
        description="markdown: the technique explained, with a short code sketch",
    )
    techniques: TechniqueList = Field(default_factory=list)
    applies_when: AppliesWhen | None = Field(None, description="families, bottlenecks, dtypes, min_arch it applies to")
    languages: list[Language] = Field(default_factory=list)
    expected_effect: str = Field("", max_length=1000, description="the speedup seen and where")
    pitfalls: list[Annotated[str, Field(max_length=500)]] = Field(default_factory=list, max_length=12)
    from_experiences: list[Annotated[str, Field(pattern=_EXPERIENCE_ID)]] = Field(
        default_factory=list, max_length=20, description="ids of the recorded experiences it distils"
    )
    reason: str = Field("proposed by an agent", max_length=300, description="why this skill should exist")


class AttemptHistoryInput(ToolInput):
    task: TaskRef
    session: Session | None = Field(None, description="only this session's attempts")
    limit: int = Field(50, ge=1, le=200, description="at most this many of the newest attempts")


# ---------------------------------------------------------------------------
# Output models (the API's models, wrapped where a tool adds to them)
# ---------------------------------------------------------------------------


class Output(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskView(Output):
    """A task as an agent first sees it."""

    summary: TaskSummary
    reference_source: str = Field(description="the task module: the PyTorch reference Model and get_inputs")
    source_truncated: bool = False
    solutions: list[str] = Field(default_factory=list, description="built-in solution names of this task")
    resource: str = Field(description="URI of the full task")


class SuggestionList(Output):
    task: str
    session: str | None = None
    suggestions: list[Suggestion]


class SkillView(Output):
    skill: Skill
    example_files: list[str] = Field(default_factory=list, description="paths of the skill's example files")
    clipped: list[str] = Field(default_factory=list, description="parts left out to bound the size, and where they are")
    resource: str


class ProposalView(Output):
    """What propose_skill stored: always a draft awaiting a curator."""

    name: str
    version: int
    status: str
    from_experiences: list[str]
    decision: str | None = Field(None, description="the auto-approve policy's decision, when one ran")
    resource: str


class ListTechniquesInput(ToolInput):
    category: str | None = Field(
        None, min_length=1, max_length=64, description="only this category, e.g. 'memory-access' or 'tuning'"
    )


class TechniqueVocabulary(Output):
    techniques: list[Technique] = Field(
        description="name (what `techniques` arguments take), category, what it is, and the aliases also accepted"
    )


class AttemptHistory(Output):
    task: str
    session: str | None = None
    attempts: list[AttemptSummary] = Field(description="oldest first; parent_id links each to the one it improved")
    best_id: str | None = Field(None, description="the fastest correct timed attempt listed")


# ---------------------------------------------------------------------------
# Paths: only inside the workspace or the built-in tasks
# ---------------------------------------------------------------------------


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def resolve_path(value: str, ctx: CallContext, *, what: str) -> Path:
    """An existing file path inside the workspace or the built-in tasks, resolved (symlinks too).

    Raises InvalidInput for anything outside them, so ``../../etc/passwd`` is refused
    before it is opened.
    """
    workspace = ctx.workspace.resolve()
    raw = Path(value).expanduser()
    path = (raw if raw.is_absolute() else workspace / raw).resolve()
    roots = [workspace, seeds.TASKS_DIR.resolve()]
    if not _inside(path, roots):
        raise InvalidInput(
            f"{what} path {value!r} is outside the workspace {str(workspace)!r}",
            hint=f"pass a path inside {workspace} (or a built-in task name); the server reads no file elsewhere",
        )
    if path.is_dir() and (path / "task.py").is_file():
        path = path / "task.py"
    if not path.is_file():
        raise InvalidInput(f"{what} path {value!r} is not a file", hint=f"pass an existing file inside {workspace}")
    return path


def names_a_task(value: str, ctx: CallContext) -> bool:
    """Whether ``value`` is taken as a task's name (built-in or recorded): no file is read for it."""
    return (
        bool(_BUILTIN_NAME.match(value))
        and not value.endswith(".py")
        and ((seeds.TASKS_DIR / value / "task.py").is_file() or not (ctx.workspace / value).exists())
    )


def resolve_task(value: str, ctx: CallContext) -> str:
    """A task name passes through (the API knows built-in and recorded names); anything
    path-like must be a file inside the workspace."""
    if names_a_task(value, ctx):
        return value
    return str(resolve_path(value, ctx, what="task"))


@contextmanager
def _when_missing(hint: str):
    """Replace the hint of a NotFound with one that names the tool to call next."""
    try:
        yield
    except NotFound as e:
        raise NotFound(e.message, hint=hint) from None


def _check_attempts(sb: "SkillBase", *ids: str | None) -> None:
    with _when_missing("attempt_history lists the attempt ids of a task"):
        for attempt_id in ids:
            if attempt_id:
                sb.get_attempt(attempt_id)


def _candidate(args: _Candidate, ctx: CallContext) -> dict[str, str]:
    if args.source is not None:
        return {"source": args.source}
    return {"solution": str(resolve_path(args.source_path, ctx, what="solution"))}


def _clip(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n... [{len(text) - limit} more characters]", True


# ---------------------------------------------------------------------------
# The tools
# ---------------------------------------------------------------------------


def load_task(sb: "SkillBase", args: LoadTaskInput, ctx: CallContext) -> TaskView:
    try:
        info = sb.task(resolve_task(args.task, ctx))
    except NotFound:  # a name only the store holds: what it knows, without the reference's source
        summary = sb.load_task(args.task)
        return TaskView(summary=summary, reference_source="", solutions=[], resource=f"task://{summary.info.name}")
    source, cut = _clip(sb.task_source(info), MAX_REFERENCE_CHARS)
    return TaskView(
        summary=sb.load_task(info),
        reference_source=source,
        source_truncated=cut,
        solutions=sorted(info.solutions),
        resource=f"task://{info.name}",
    )


def compile_kernel(sb: "SkillBase", args: CompileKernelInput, ctx: CallContext) -> CompileReport:
    report = sb.compile(resolve_task(args.task, ctx), **_candidate(args, ctx), arch=args.arch)
    if len(report.diagnostics) > MAX_DIAGNOSTICS:
        report = report.model_copy(update={"diagnostics": report.diagnostics[:MAX_DIAGNOSTICS]})
    return report


def benchmark_kernel(sb: "SkillBase", args: BenchmarkKernelInput, ctx: CallContext) -> BenchmarkResult:
    _check_attempts(sb, args.parent_id)
    result = sb.benchmark(
        resolve_task(args.task, ctx),
        **_candidate(args, ctx),
        device=args.device,
        parent_id=args.parent_id,
        techniques=args.techniques,
        session=args.session,
        agent=ctx.agent,
        used=args.used,
        progress=ctx.progress,
    )
    report = result.report
    if report.error and len(report.error.traceback) > MAX_TRACEBACK_CHARS:
        tail = report.error.traceback[-MAX_TRACEBACK_CHARS:]
        where = f"read attempt://{result.attempt_id}" if result.attempt_id else "rerun with the CLI"
        error = report.error.model_copy(update={"traceback": f"[... earlier lines cut; {where} for all]\n{tail}"})
        report = report.model_copy(update={"error": error})
    return result.model_copy(update={"report": report})


def list_techniques(sb: "SkillBase", args: ListTechniquesInput, ctx: CallContext) -> TechniqueVocabulary:
    rows = sb.list_techniques()
    if args.category:
        rows = [t for t in rows if t.category == args.category]
        if not rows:
            known = sorted({t.category for t in sb.list_techniques()})
            raise InvalidInput(
                f"no technique of category {args.category!r}",
                hint=f"categories: {', '.join(known)}; or call list_techniques without one",
            )
    return TechniqueVocabulary(techniques=rows)


def recall(sb: "SkillBase", args: RecallInput, ctx: CallContext) -> RecallResult:
    source, report, task = args.source, None, args.task
    if args.attempt_id:
        _check_attempts(sb, args.attempt_id)
        attempt = sb.get_attempt(args.attempt_id)
        source, report, task = source or attempt.source, attempt.bench_report, task or attempt.task
    task_ref = resolve_task(task, ctx) if task else None
    profile = sb.memory.get_profile(args.attempt_id) if args.attempt_id else None
    result = sb.recall(
        args.query, task=task_ref, source=source, report=report, arch=args.arch, k=args.k, run=args.run, profile=profile
    )
    items = [i.model_copy(update={"evidence": i.evidence[:MAX_EVIDENCE_PER_ITEM]}) for i in result.items]
    return result.model_copy(update={"items": items})


def profile_kernel(sb: "SkillBase", args: ProfileKernelInput, ctx: CallContext) -> ProfileReport:
    _check_attempts(sb, args.attempt_id)
    report = sb.profile(
        resolve_task(args.task, ctx),
        **_candidate(args, ctx),
        device=args.device,
        attempt_id=args.attempt_id,
        progress=ctx.progress,
    )
    # The raw CSV is for fixtures and humans (the CLI's --json has it); the counters are parsed above it.
    return report.model_copy(
        update={
            "raw_csv": "",
            "kernels": report.kernels[:MAX_PROFILED_KERNELS],
            "findings": report.findings[:MAX_DIAGNOSTICS],
        }
    )


def suggest_next(sb: "SkillBase", args: SuggestNextInput, ctx: CallContext) -> SuggestionList:
    info = sb.task(resolve_task(args.task, ctx))
    return SuggestionList(
        task=info.name, session=args.session, suggestions=sb.suggest(info, session=args.session, k=args.k)
    )


def record_lesson(sb: "SkillBase", args: RecordLessonInput, ctx: CallContext) -> Experience:
    _check_attempts(sb, args.after_attempt, args.before_attempt)
    task = sb.task_name(resolve_task(args.task, ctx)) if args.task else None
    return sb.record_lesson(
        args.lesson,
        task=task,
        before_attempt=args.before_attempt,
        after_attempt=args.after_attempt,
        techniques=args.techniques,
        title=args.title,
        conditions=args.conditions,
        session=args.session,
        agent=ctx.agent,
    )


def get_skill(sb: "SkillBase", args: GetSkillInput, ctx: CallContext) -> SkillView:
    try:
        skill = sb.get_skill(args.name, args.version)
    except NotFound as e:
        names = [k.name for k in sb.list_skills()]
        close = difflib.get_close_matches(args.name, names, n=3, cutoff=0.5)
        hint = (f"did you mean {', '.join(close)}? " if close else "") + "recall names the skills that fit a task"
        raise NotFound(e.message, hint=hint) from None
    uri = f"skill://{skill.name}"
    clipped: list[str] = []
    body, cut = _clip(skill.body, MAX_SKILL_BODY_CHARS)
    if cut:
        clipped.append(f"body after {MAX_SKILL_BODY_CHARS} characters (read {uri})")
    files: dict[str, str] = {}
    if args.include_examples:
        budget = MAX_EXAMPLE_CHARS
        for path, text in skill.files.items():
            if len(text) <= budget:
                files[path], budget = text, budget - len(text)
            else:
                clipped.append(f"example file {path} ({len(text)} characters; over the output budget)")
    view = skill.model_copy(update={"body": body, "files": files})
    return SkillView(skill=view, example_files=sorted(skill.files), clipped=clipped, resource=uri)


def propose_skill(sb: "SkillBase", args: ProposeSkillInput, ctx: CallContext) -> ProposalView:
    try:
        skill = Skill(
            name=args.name,
            description=args.description,
            body=args.body,
            techniques=args.techniques,
            applies_when=args.applies_when or AppliesWhen(),
            languages=args.languages,
            expected_effect=args.expected_effect,
            pitfalls=args.pitfalls,
        )
    except ValidationError as e:
        raise InvalidInput(
            f"the skill is malformed: {_first_error(e)}", hint="fix the field and propose again"
        ) from None
    proposal = sb.propose_skill(skill, agent=ctx.agent, from_experiences=args.from_experiences, reason=args.reason)
    stored = proposal.skill
    decision = proposal.decision.reason if proposal.decision else None
    return ProposalView(
        name=stored.name,
        version=stored.version,
        status=stored.status,
        from_experiences=stored.provenance.from_experiences,
        decision=decision,
        resource=f"skill://{stored.name}",
    )


def _history_by_name(sb: "SkillBase", args: AttemptHistoryInput, ctx: CallContext) -> bool:
    """A history asked for by a task's name, for which the API reads no file either: a ledger lookup."""
    return names_a_task(args.task, ctx) and not sb.reads_task_file(args.task)


def attempt_history(sb: "SkillBase", args: AttemptHistoryInput, ctx: CallContext) -> AttemptHistory:
    attempts = sb.attempt_history(resolve_task(args.task, ctx), session=args.session, limit=args.limit)
    timed = [a for a in attempts if a.verdict == "correct" and a.median_ms]
    best = min(timed, key=lambda a: a.median_ms).id if timed else None
    return AttemptHistory(
        task=attempts[0].task if attempts else args.task, session=args.session, attempts=attempts, best_id=best
    )


# ---------------------------------------------------------------------------
# The catalog
# ---------------------------------------------------------------------------


# Keywords that constrain only values of their own JSON type: a schema made of these and one "type"
# accepts null once "null" joins its type, and nothing else changes (unlike enum, const, anyOf ...).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
_TYPE_BOUND = _ANNOTATIONS | {
    "type",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
}
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})  # name -> schema
_SCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_SCHEMA_ONE = frozenset(
    {
        "items",
        "additionalProperties",
        "additionalItems",
        "not",
        "contains",
        "propertyNames",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)


def plain_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The same JSON schema (it accepts and refuses the same values) with pydantic's indirections
    taken out: each ``$ref`` to a ``$defs`` entry replaced by the entry itself (recursive ones are
    kept), and ``anyOf: [X, {type: null}]`` written as X with ``"null"`` added to its ``type`` (and to
    its ``enum``), where X is one type's schema.

    The MCP SDK's client checks every tool result against the tool's ``outputSchema`` with the
    ``jsonschema`` package, where each ``$ref`` is a resolver lookup and each ``anyOf`` a branch per
    value: a recall result took 2.0 ms to check against pydantic's schema and 1.2 ms against this one,
    a third of the load generator's CPU before (benchmarks/schema_check.py, docs/performance.md)."""
    defs = schema.get("$defs", {})

    def target(node: dict[str, Any]) -> str | None:
        ref = node.get("$ref")
        return ref[len("#/$defs/") :] if isinstance(ref, str) and ref.startswith("#/$defs/") else None

    def refers(name: str, node: Any, seen: frozenset[str]) -> bool:  # does $defs[name] reach itself?
        if isinstance(node, dict):
            to = target(node)
            if to == name or (to in defs and to not in seen and refers(name, defs[to], seen | {to})):
                return True
            return any(refers(name, v, seen) for v in node.values())
        return isinstance(node, list) and any(refers(name, v, seen) for v in node)

    recursive = {name for name in defs if refers(name, defs[name], frozenset({name}))}

    def plain(node: Any) -> Any:  # node: a schema
        if not isinstance(node, dict):
            return node  # true / false
        to = target(node)
        if to in defs and to not in recursive:
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if not siblings.keys() & (defs[to].keys() - _ANNOTATIONS):
                return plain({**defs[to], **siblings})  # a field's own title or description wins
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$defs":
                continue
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {name: plain(v) for name, v in value.items()}
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [plain(v) for v in value]
            elif key in _SCHEMA_ONE:
                out[key] = [plain(v) for v in value] if isinstance(value, list) else plain(value)
            else:
                out[key] = value
        branches = out.get("anyOf")
        if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
            other = branches[1 - branches.index({"type": "null"})]
            if (
                isinstance(other, dict)
                and isinstance(other.get("type"), str)
                and other["type"] != "null"
                and other.keys() <= _TYPE_BOUND | {"enum"}
                and isinstance(other.get("enum", []), list)
                and not other.keys() & (out.keys() - _ANNOTATIONS - {"anyOf"})
            ):
                del out["anyOf"]
                out = {**other, **out, "type": [other["type"], "null"]}
                if "enum" in other and None not in other["enum"]:
                    out["enum"] = [*other["enum"], None]  # an enum applies to every type: null joins it
        return out

    out = plain(schema)
    kept = {name: plain(defs[name]) for name in sorted(recursive)}
    if kept:
        out["$defs"] = kept
    return out


@dataclass(frozen=True)
class ToolSpec:
    """One agent-facing tool."""

    name: str
    title: str
    description: str
    input_model: type[ToolInput]
    output_model: type[BaseModel]
    fn: Callable[["SkillBase", Any, CallContext], BaseModel]
    read_only: bool = True
    long_running: bool = False
    # Whether a call with these (validated) arguments is a lookup by key: a few milliseconds of reads,
    # no file loaded, no model, no search, no lock that a slow call holds. A server may run such a
    # call on its event loop instead of handing it to a thread (mcp_server.server).
    quick: Callable[["SkillBase", Any, CallContext], bool] | None = None

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments, as MCP ``inputSchema`` and Anthropic ``input_schema``."""
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        return schema

    def output_schema(self) -> dict[str, Any]:
        """The JSON schema of the result (MCP ``outputSchema``): the output model's, in the shape that is
        cheapest to check (``plain_schema``), since an MCP client checks every result against it."""
        return plain_schema(self.output_model.model_json_schema())

    def validate(self, arguments: Any) -> ToolInput:
        """Parse raw arguments, raising InvalidInput that names each bad field and the fix."""
        if not isinstance(arguments, dict):
            raise InvalidInput(
                f"{self.name} takes a JSON object of arguments, not {type(arguments).__name__}", hint=self.usage()
            )
        try:
            return self.input_model.model_validate(_decode_json_strings(self.input_model, arguments))
        except ValidationError as e:
            problems = "; ".join(_describe(err, self.name) for err in e.errors()[:6])
            raise InvalidInput(f"bad arguments for {self.name}: {problems}", hint=self.usage()) from None

    def usage(self) -> str:
        """One line listing the parameters, their types and which are required."""
        schema = self.input_model.model_json_schema()
        required = set(schema.get("required", []))
        parts = []
        for name, prop in schema.get("properties", {}).items():
            parts.append(f"{name} ({_type_name(prop)}{', required' if name in required else ''})")
        return f"call {self.name} with " + ", ".join(parts)


@functools.cache
def _properties(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema().get("properties", {})


def _decode_json_strings(model: type[BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
    """Some clients send list and object arguments as JSON text; decode those, leave the rest."""
    out = dict(arguments)
    props = _properties(model)
    for name, value in arguments.items():
        kinds = {p.get("type") for p in props.get(name, {}).get("anyOf", [props.get(name, {})])}
        if isinstance(value, str) and value[:1] in "[{" and "string" not in kinds:
            try:
                out[name] = json.loads(value)
            except ValueError:
                pass  # left as it is; validation names the field
    return out


def _type_name(prop: dict[str, Any]) -> str:
    if "type" in prop:
        return "list" if prop["type"] == "array" else str(prop["type"])
    if "enum" in prop:
        return " | ".join(repr(v) for v in prop["enum"])
    if "anyOf" in prop:
        names = [_type_name(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " | ".join(dict.fromkeys(names)) or "null"
    return "object"


def _describe(err: dict[str, Any], tool: str) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
    kind = err.get("type", "")
    if kind == "missing":
        return f"`{loc}` is required"
    if kind == "extra_forbidden":
        return f"`{loc}` is not a parameter of {tool}"
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return msg if loc == "arguments" else f"`{loc}`: {msg}"


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc'])}: {str(err['msg']).removeprefix('Value error, ')}"


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="load_task",
        title="Load a kernel task",
        input_model=LoadTaskInput,
        output_model=TaskView,
        fn=load_task,
        description=(
            "Load a GPU kernel optimization task and see what it computes: the PyTorch reference source, input and "
            "output shapes, dtype, family, the fewest bytes moved and FLOPs, and, when the task was measured on a "
            "GPU before, the physical floor time, the eager and torch.compile baseline times and the best attempt "
            "so far. `info.understanding` is read from the traced forward of any file, META or not: the ranked "
            "families, each ATen op with its FLOPs and bytes, the bytes one fused kernel must move, the regime "
            "(launch/memory/compute) and what fusing would remove. Call this first for any task. `task` is a built-in name (row_softmax, matmul, layernorm, ...; "
            "an unknown name returns the list) or a KernelBench-format file in the workspace. Cheap: under a "
            "second, no GPU."
        ),
    ),
    ToolSpec(
        name="compile_kernel",
        title="Compile a candidate",
        input_model=CompileKernelInput,
        output_model=CompileReport,
        fn=compile_kernel,
        description=(
            "Compile a candidate solution for a GPU architecture without running it and report, per kernel, "
            "registers per thread, spilled bytes, shared memory, warps and stages, plus the first compiler error "
            "located in your source. Use it to check that a candidate builds and to catch register spills before "
            "paying for a benchmark; it says nothing about correctness or speed (benchmark_kernel does). The "
            "candidate is `source` (module text defining ModelNew) or `source_path`. Costs about 1-10 s; works "
            "without a GPU."
        ),
    ),
    ToolSpec(
        name="benchmark_kernel",
        title="Verify, time and record a candidate",
        input_model=BenchmarkKernelInput,
        output_model=BenchmarkResult,
        fn=benchmark_kernel,
        read_only=False,
        long_running=True,
        description=(
            "Verify a candidate against the task's PyTorch reference, time it, and record it as an attempt in the "
            "shared memory; returns its attempt_id. The candidate (`source` text or `source_path`) is a Python "
            "module defining ModelNew, with the reference Model's constructor and forward, whose work runs in its "
            "own Triton or CUDA C++ kernels. It is checked on several fresh random inputs and against known "
            "cheats (calling the reference, PyTorch fallbacks, mutating inputs, caching results, work outside the "
            "timed region). A wrong, crashing or cheating candidate comes back as a verdict (incorrect, rejected, "
            "compile_error, runtime_error, timeout, crashed) with a message, not as an error. On a GPU the report "
            "has the median time with its spread, speedups over eager and torch.compile, percent of the roofline "
            "floor and the bottleneck; without a GPU it only verifies correctness under the Triton interpreter and "
            "says that timing needs a GPU. Pass `parent_id` (the attempt you improved on) and `techniques` (what "
            "you changed) so the lineage and gains are measured, and `used` with the ids of recalled items that "
            "shaped the candidate. Takes 5-60 s on a GPU, about 2-20 s on a CPU; sends progress notifications. "
            "The full report and source stay readable at attempt://{attempt_id}."
        ),
    ),
    ToolSpec(
        name="recall",
        title="Recall skills and experiences",
        input_model=RecallInput,
        output_model=RecallResult,
        fn=recall,
        description=(
            "Find the skills and past experiences most likely to make this kernel faster on this GPU, each with a "
            "score, why it was chosen and its measured evidence; with a task, also the techniques worth trying "
            "next. Call it after load_task, and again after a benchmark with `attempt_id` so the query uses that "
            "candidate's code, verdict, bottleneck and stored profile. Give at least one of `task`, `query` (plain words such as "
            "'softmax rows too wide for registers'), `source` or `attempt_id`. Read a recalled skill in full with "
            "get_skill. Cheap: about 0.05-0.5 s."
        ),
    ),
    ToolSpec(
        name="profile_kernel",
        title="Profile a candidate's kernels",
        input_model=ProfileKernelInput,
        output_model=ProfileReport,
        fn=profile_kernel,
        read_only=False,
        long_running=True,
        description=(
            "Profile a candidate's own kernels with Nsight Compute and say what limits them: per kernel the "
            "duration, DRAM and L2 throughput as % of peak, SM and tensor-pipe utilisation, achieved vs "
            "theoretical occupancy and its limiter, registers and spills, L1/L2 hit rates, sectors per global "
            "load/store request and the top warp-stall reasons; then a diagnosis in plain words (such as 'uncoalesced "
            "loads: 32.0 sectors per request, 4.0 expected'), the matching techniques and a bottleneck `state`. "
            "Use it when a correct candidate is slower than its roofline floor and you need to know why before "
            "choosing the next change. The profile is stored with the candidate's attempt (benchmark it first), "
            "and recall and suggest_next then condition on its state. Without a GPU or ncu the answer has "
            "`available: false`, the reason, and what was measured instead (kernel list with durations, compile "
            "report, roofline). It does not verify correctness (benchmark_kernel does). Takes 10-40 s on a GPU; "
            "bounded by a timeout."
        ),
    ),
    ToolSpec(
        name="suggest_next",
        title="Suggest the next technique",
        input_model=SuggestNextInput,
        output_model=SuggestionList,
        fn=suggest_next,
        description=(
            "Rank the techniques to try next on a task, given the attempts already made on it (only those of "
            "`session` when given): measured winners first, each with its expected speedup, uncertainty, tries "
            "and successes so far, why, and the skills that teach it, with a little exploration of untried "
            "techniques. Use it when choosing your next change. Cheap: under a second."
        ),
    ),
    ToolSpec(
        name="record_lesson",
        title="Record a lesson",
        input_model=RecordLessonInput,
        output_model=Experience,
        fn=record_lesson,
        read_only=False,
        description=(
            "Record what you learned, what worked or failed and why, tied to the attempts that taught it, so that "
            "later recall calls (yours and other agents') surface it for similar kernels. The gain is measured "
            "from the attempts (after over before, same hardware), never typed in; with only `after_attempt` its "
            "parent is the before. Call it after a benchmark that taught you something, failures included. "
            "Cheap."
        ),
    ),
    ToolSpec(
        name="get_skill",
        title="Read a skill",
        input_model=GetSkillInput,
        output_model=SkillView,
        fn=get_skill,
        quick=lambda sb, args, ctx: True,  # one skill (its example files included) read from the ledger
        description=(
            "Read one skill in full: when it applies, the technique explained, its expected effect, pitfalls, "
            "measured evidence and, with include_examples, its runnable example files. Use it after recall "
            "names a skill you mean to apply. An unknown name returns the closest names. Cheap."
        ),
    ),
    ToolSpec(
        name="propose_skill",
        title="Propose a new skill",
        input_model=ProposeSkillInput,
        output_model=ProposalView,
        fn=propose_skill,
        read_only=False,
        description=(
            "Propose a reusable skill distilled from your measured experiences. It lands as a draft for a human "
            "curator to review: never approved here, and it never replaces an approved skill. Cite the experiences "
            "it came from in `from_experiences`. Use it when a lesson generalises beyond one task; for a single "
            "observation use record_lesson. Cheap."
        ),
    ),
    ToolSpec(
        name="list_techniques",
        title="List the technique vocabulary",
        input_model=ListTechniquesInput,
        output_model=TechniqueVocabulary,
        fn=list_techniques,
        quick=lambda sb, args, ctx: True,
        description=(
            "List the technique names that benchmark_kernel's and record_lesson's `techniques` accept, each with "
            "its category, what it is and its accepted aliases. Use it before naming the techniques a candidate "
            "applies, or when a call answered 'unknown technique'. Cheap."
        ),
    ),
    ToolSpec(
        name="attempt_history",
        title="List a task's attempts",
        input_model=AttemptHistoryInput,
        output_model=AttemptHistory,
        fn=attempt_history,
        quick=_history_by_name,
        description=(
            "List the attempts made on a task, oldest first, each with its parent, techniques, verdict, median "
            "time and speedups: the lineage of the optimization so far. Use it to see what was tried before "
            "choosing what to try, or to find the attempt_id to pass as parent_id. The full source and report of "
            "one attempt are at the resource attempt://{id}. Cheap."
        ),
    ),
]

TOOLS_BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}


def get_tool(name: str) -> ToolSpec:
    """The tool called ``name``; InvalidInput listing the tools otherwise."""
    try:
        return TOOLS_BY_NAME[name]
    except KeyError:
        raise InvalidInput(f"no tool named {name!r}", hint="tools: " + ", ".join(TOOLS_BY_NAME)) from None


def call(
    sb: "SkillBase",
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    progress: Progress | None = None,
    agent: str = "agent",
    workspace: str | Path | None = None,
) -> BaseModel:
    """Validate ``arguments`` and run the tool ``name``; returns its output model.

    Raises the typed errors of ``skillbase.errors`` (``InvalidInput`` for bad
    arguments, ``NotFound`` for unknown tasks, skills and attempts, ...), each with a
    ``hint`` saying what to do next. A failing candidate is a verdict, not an error.
    """
    spec = get_tool(name)
    args = spec.validate(arguments if arguments is not None else {})
    ctx = CallContext(progress=progress, agent=agent, workspace=Path(workspace) if workspace else Path.cwd())
    return spec.fn(sb, args, ctx)


def anthropic_tool_definitions() -> list[dict[str, Any]]:
    """The catalog as Anthropic Messages API tool definitions: name, description, input_schema."""
    return [{"name": t.name, "description": t.description, "input_schema": t.input_schema()} for t in TOOLS]


def markdown_reference() -> str:
    """The tool reference table for the README, generated from the catalog so it cannot drift."""
    rows = ["| Tool | What it does | Parameters |", "|---|---|---|"]
    for t in TOOLS:
        schema = t.input_model.model_json_schema()
        required = set(schema.get("required", []))
        params = ", ".join(f"`{n}`" + ("" if n in required else "?") for n in schema.get("properties", {}))
        first = t.description.split(". ")[0].rstrip(".") + "."
        rows.append(f"| `{t.name}` | {first} | {params} |")
    return "\n".join(rows)
