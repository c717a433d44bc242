"""Lint skills: is this skill well-formed, in our vocabulary, and do its examples really work?

``lint(target)`` takes a skill folder, a ``SKILL.md`` path or a ``Skill``
record and returns ``LintIssue``s; a skill passes when none has level
``error``. ``lint_many`` lints several at once and verifies all their examples
in one batch over the toolchain's warm workers (two Triton interpreters in
parallel while the compile worker builds the CUDA ones).

Checks and their codes:

- ``schema`` (error): the frontmatter or record does not validate.
- ``name-folder`` (error): the folder is not named after the skill.
  ``name-reserved`` (error): the name contains "anthropic" or "claude" (Agent Skills).
  ``name-duplicate`` (error): two linted skills share a name.
- ``description-when`` (error): the description does not say when to use the skill.
  ``description-angle-brackets`` (warning): '<' or '>' are rewritten on Agent Skills export.
- ``technique-unknown`` (error, with the closest names), ``technique-alias`` (warning: use the
  canonical name), ``techniques-missing`` (warning).
- ``family-unknown``, ``dtype-unknown``, ``min-arch``, ``feature-unknown``, ``feature-conflict``
  (errors): ``applies_when`` outside the vocabularies of skillbase.models.
- ``languages-missing`` (warning).
- ``section-missing`` (error): a body section of SECTIONS is absent; ``example-code-missing``
  (warning): the Example section has no fenced code.
- ``examples-missing`` (warning), ``example-keys``, ``example-path``, ``example-file-missing``,
  ``example-task-unknown`` (errors): the examples list is malformed or names missing files.
- ``example-failed`` (error): a Triton example is not verified correct under the interpreter
  (``Toolchain.benchmark(device="cpu")``), or a CUDA example does not compile for sm_90 with nvcc.
  ``example-verified`` (info) says what passed; ``example-skipped`` (info) what could not run here.
- ``evidence-unknown``, ``provenance-unknown``, ``superseded-unknown`` (errors): ids or names that
  the store does not hold; ``evidence-unlinked`` (warning): evidence without an attempt or
  experience id; ``evidence-unchecked`` (info): no store was given to check ids against;
  ``evidence-missing`` (info): an approved skill with no measured evidence yet.
- ``status-superseded`` (error): ``superseded_by`` on a skill that is not deprecated.

Example verification never imports candidate code here: it goes through the
toolchain's isolated workers, whose results are cached by content.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from skillbase.config import Settings
from skillbase.errors import InvalidInput, NotFound, SkillbaseError, UnknownTechnique
from skillbase.models import (
    CODE_FEATURES,
    DTYPES,
    FAMILIES,
    OCCUPANCY_LIMITERS,
    PROFILE_METRICS,
    Record,
    Skill,
    parse_metric_condition,
)
from skillbase.skills.files import SKILL_FILE, check_relative_path, write_folder
from skillbase.skills.markdown import EXAMPLE_FILE_KEYS, SkillFormatError, is_builtin_task_ref, read_skill_file

if TYPE_CHECKING:
    from skillbase.memory.store import Store
    from skillbase.toolchain.facade import Toolchain

SECTIONS = ("When to use it", "The idea", "Steps", "Example", "How to check it worked")
RESERVED_WORDS = ("anthropic", "claude")
MIN_ARCH_RE = re.compile(r"^sm_\d{2,3}a?$")
WHEN_RE = re.compile(
    r"\b(use (it|this|this skill|them)?\s*(when|for|if|on|in|to|before|after|whenever|with|where)"
    r"|use when|when to use|apply (it )?when)\b",
    re.IGNORECASE,
)
_CUDA_90A = re.compile(r"sm_90a|compute_90a")


class LintIssue(Record):
    """One finding of lint. ``level`` error fails the skill; warning and info do not."""

    level: Literal["error", "warning", "info"]
    code: str
    message: str
    field: str | None = None
    skill: str | None = None


class LintResult(Record):
    """The issues of one linted skill; ``source`` is its file or 'record'."""

    skill: str
    source: str
    issues: list[LintIssue]

    @property
    def passed(self) -> bool:
        return not errors(self.issues)


def errors(issues: Iterable[LintIssue]) -> list[LintIssue]:
    """The issues of level error."""
    return [i for i in issues if i.level == "error"]


# ---------------------------------------------------------------------------
# Loading targets
# ---------------------------------------------------------------------------


@dataclass
class _Target:
    label: str
    source: str
    skill: Skill | None
    folder: Path | None  # where the example files are
    issues: list[LintIssue] = field(default_factory=list)

    def add(self, level: str, code: str, message: str, field_: str | None = None) -> None:
        self.issues.append(
            LintIssue(
                level=level,
                code=code,
                message=message,
                field=field_,
                skill=self.skill.name if self.skill else self.label,
            )
        )


def _load(target: Skill | Path | str, max_bytes: int, scratch: Path) -> _Target:
    if isinstance(target, Skill):
        t = _Target(target.name, "record", target, None)
        if target.files:  # a record carries its examples; lay them out to verify them
            files = {}
            for rel, text in target.files.items():
                try:
                    files[check_relative_path(rel, where=f"files of {target.name}")] = text
                except InvalidInput as e:
                    t.add("error", "example-path", e.message, "files")
            t.folder = scratch / target.name
            write_folder(t.folder, files)
        return t
    path = Path(target)
    folder = path.parent if path.name == SKILL_FILE else path
    if not (folder / SKILL_FILE).exists():
        raise NotFound(f"no {SKILL_FILE} at {str(path)!r}", hint="pass a skill folder or its SKILL.md")
    t = _Target(folder.name, str(folder / SKILL_FILE), None, folder)
    try:
        t.skill = read_skill_file(folder / SKILL_FILE, max_bytes=max_bytes)
    except SkillFormatError as e:
        t.add("error", "schema", e.message, e.field)
    except InvalidInput as e:
        t.add("error", "schema", str(e))
    return t


# ---------------------------------------------------------------------------
# Static checks
# ---------------------------------------------------------------------------


def _check_name(t: _Target) -> None:
    s = t.skill
    if t.source != "record" and t.folder is not None and t.folder.name != s.name:
        t.add("error", "name-folder", f"the folder is named {t.folder.name!r} but the skill is {s.name!r}", "name")
    for word in RESERVED_WORDS:
        if word in s.name:
            t.add("error", "name-reserved", f"the name contains the reserved word {word!r} (Agent Skills rule)", "name")


def _check_description(t: _Target) -> None:
    d = t.skill.description
    if not WHEN_RE.search(d):
        t.add(
            "error",
            "description-when",
            "the description does not say when to use the skill; add a sentence such as 'Use it when ...'",
            "description",
        )
    if "<" in d or ">" in d:
        t.add(
            "warning",
            "description-angle-brackets",
            "the description has '<' or '>'; Agent Skills export rewrites them (no XML-like text allowed there)",
            "description",
        )


def _check_techniques(t: _Target, canonical: Callable[[str], str]) -> None:
    s = t.skill
    if not s.techniques:
        t.add(
            "warning",
            "techniques-missing",
            "no techniques: the skill cannot be linked to measured outcomes",
            "techniques",
        )
    for i, name in enumerate(s.techniques):
        try:
            canon = canonical(name)
        except UnknownTechnique as e:
            t.add("error", "technique-unknown", str(e), f"techniques.{i}")
            continue
        if canon != name:
            t.add(
                "warning",
                "technique-alias",
                f"{name!r} is an alias; write the canonical name {canon!r}",
                f"techniques.{i}",
            )


def _check_applies_when(t: _Target) -> None:
    w = t.skill.applies_when
    for i, fam in enumerate(w.families):
        if fam not in FAMILIES:
            t.add(
                "error",
                "family-unknown",
                f"unknown family {fam!r}; known: {', '.join(FAMILIES)}",
                f"applies_when.families.{i}",
            )
    for i, dt in enumerate(w.dtypes):
        if dt not in DTYPES:
            t.add(
                "error",
                "dtype-unknown",
                f"unknown dtype {dt!r}; known: {', '.join(DTYPES)}",
                f"applies_when.dtypes.{i}",
            )
    if w.min_arch is not None and not MIN_ARCH_RE.match(w.min_arch):
        t.add("error", "min-arch", f"min_arch {w.min_arch!r} is not like 'sm_80' or 'sm_90a'", "applies_when.min_arch")
    for key in ("requires_features", "excludes_features"):
        for i, feat in enumerate(getattr(w, key)):
            if feat not in CODE_FEATURES:
                t.add(
                    "error",
                    "feature-unknown",
                    f"unknown code feature {feat!r}; known: {', '.join(CODE_FEATURES)}",
                    f"applies_when.{key}.{i}",
                )
    for i, cond in enumerate(w.metrics):
        _check_metric_condition(t, cond, f"applies_when.metrics.{i}")
    both = sorted(set(w.requires_features) & set(w.excludes_features))
    if both:
        t.add("error", "feature-conflict", f"features both required and excluded: {', '.join(both)}", "applies_when")
    if not t.skill.languages:
        t.add(
            "warning", "languages-missing", "no languages: say whether it applies to triton, cuda or both", "languages"
        )


def _check_metric_condition(t: _Target, cond: str, where: str) -> None:
    parsed = parse_metric_condition(cond)
    if parsed is None:
        t.add(
            "error",
            "metric-condition",
            f"metric condition {cond!r} is not 'METRIC OP VALUE' (e.g. 'dram_pct > 85')",
            where,
        )
        return
    name, op, value = parsed
    if name not in PROFILE_METRICS:
        t.add("error", "metric-unknown", f"unknown profile metric {name!r}; known: {', '.join(PROFILE_METRICS)}", where)
    elif name == "occupancy_limiter":
        if op not in ("==", "!=") or value not in OCCUPANCY_LIMITERS:
            t.add(
                "error",
                "metric-condition",
                f"occupancy_limiter compares with == or != to one of "
                f"{', '.join(OCCUPANCY_LIMITERS)}, not {op} {value!r}",
                where,
            )
    else:
        try:
            float(value)
        except ValueError:
            t.add("error", "metric-condition", f"{name} is a number; {value!r} is not", where)


def _sections(body: str) -> dict[str, str]:
    out: dict[str, str] = {}
    current = None
    for line in body.split("\n"):
        m = re.match(r"^##\s+(.+?)\s*$", line)
        if m:
            current = m.group(1)
            out.setdefault(current, "")
        elif current is not None:
            out[current] += line + "\n"
    return out


def _check_body(t: _Target) -> None:
    found = _sections(t.skill.body)
    for name in SECTIONS:
        if name not in found:
            t.add("error", "section-missing", f"the body has no '## {name}' section", "body")
    if "Example" in found and "```" not in found["Example"]:
        t.add("warning", "example-code-missing", "the '## Example' section has no fenced code block", "body")


def _check_status(t: _Target, store: "Store | None") -> None:
    s = t.skill
    if s.superseded_by is not None:
        if s.status != "deprecated":
            t.add("error", "status-superseded", "superseded_by is set but the skill is not deprecated", "superseded_by")
        if store is not None and not _exists(lambda: store.get_skill(s.superseded_by)):
            t.add(
                "error",
                "superseded-unknown",
                f"superseded_by names {s.superseded_by!r}, which the store lacks",
                "superseded_by",
            )


def _exists(get: Callable[[], Any]) -> bool:
    try:
        get()
    except NotFound:
        return False
    return True


def _check_evidence(t: _Target, store: "Store | None") -> None:
    s = t.skill
    if s.status == "approved" and not s.evidence:
        t.add("info", "evidence-missing", "approved without measured evidence yet", "evidence")
    ids = [(f"evidence.{i}", e) for i, e in enumerate(s.evidence)]
    for where, e in ids:
        if e.attempt_id is None and e.experience_id is None:
            t.add("warning", "evidence-unlinked", "evidence names neither an attempt nor an experience", where)
    if store is None:
        if s.evidence or s.provenance.from_experiences:
            t.add("info", "evidence-unchecked", "evidence ids not checked: no store given", "evidence")
        return
    for where, e in ids:
        if e.attempt_id and not _exists(lambda: store.get_attempt(e.attempt_id)):
            t.add("error", "evidence-unknown", f"attempt {e.attempt_id!r} is not in the store", f"{where}.attempt_id")
        if e.experience_id and not _exists(lambda: store.get_experience(e.experience_id)):
            t.add(
                "error",
                "evidence-unknown",
                f"experience {e.experience_id!r} is not in the store",
                f"{where}.experience_id",
            )
    for i, xid in enumerate(s.provenance.from_experiences):
        if not _exists(lambda: store.get_experience(xid)):
            t.add(
                "error",
                "provenance-unknown",
                f"experience {xid!r} is not in the store",
                f"provenance.from_experiences.{i}",
            )


# ---------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------


@dataclass
class _Job:
    target: _Target
    index: int
    task_ref: str  # a built-in task name or an absolute file path
    solution: Path
    label: str


def _example_jobs(t: _Target) -> list[_Job]:
    s = t.skill
    if not s.examples:
        t.add(
            "warning", "examples-missing", "no runnable example: add examples/task.py and examples/after.py", "examples"
        )
        return []
    if t.folder is None:
        t.add("info", "example-skipped", "examples not verified: the record carries no example files", "examples")
        return []
    jobs = []
    for i, ex in enumerate(s.examples):
        where = f"examples.{i}"
        if set(ex) != set(EXAMPLE_FILE_KEYS):
            t.add(
                "error", "example-keys", f"an example has keys {sorted(ex)}; it needs exactly task and solution", where
            )
            continue
        task_ref = ex["task"]
        paths = {}
        for key in ("task", "solution"):
            if key == "task" and is_builtin_task_ref(task_ref, t.folder):
                continue
            try:
                rel = check_relative_path(ex[key], where=f"{where}.{key}")
            except InvalidInput as e:
                t.add("error", "example-path", e.message, f"{where}.{key}")
                break
            path = t.folder / rel
            if not path.is_file():
                t.add("error", "example-file-missing", f"{rel} does not exist beside {SKILL_FILE}", f"{where}.{key}")
                break
            paths[key] = path
        else:
            if "task" not in paths and not _builtin_exists(task_ref):
                t.add("error", "example-task-unknown", f"no built-in task named {task_ref!r}", f"{where}.task")
                continue
            jobs.append(_Job(t, i, str(paths.get("task", task_ref)), paths["solution"], ex["solution"]))
    return jobs


def _builtin_exists(name: str) -> bool:
    from skillbase.toolchain import tasks

    return name in tasks.builtin_names()


def _nvcc_available() -> bool:
    return shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").exists()


def _cuda_arch(source: str) -> str:
    # Kernels using sm_90a-only instructions (setmaxnreg, wgmma) ask for it in their nvcc flags.
    return "sm_90a" if _CUDA_90A.search(source) else "sm_90"


def _verify(jobs: list[_Job], toolchain: "Toolchain") -> None:
    """Run every job through the toolchain; each adds an example-verified/failed/skipped issue."""
    triton, cuda = [], []
    for job in jobs:
        try:
            task = toolchain.load_task(job.task_ref)
            cand = toolchain.resolve_solution(task, str(job.solution))
        except SkillbaseError as e:
            job.target.add("error", "example-failed", f"{job.label}: {e}", f"examples.{job.index}")
            continue
        (cuda if cand.language == "cuda" else triton).append((job, task, cand))
    compiled: dict[int, Any] = {}
    nvcc = _nvcc_available()
    worker = threading.Thread(target=_compile_all, args=(cuda if nvcc else [], toolchain, compiled), daemon=True)
    worker.start()
    for (job, _, _), report in zip(triton, _bench_all(toolchain, [(t, c) for _, t, c in triton])):
        _judge_bench(job, report)
    worker.join()
    for i, (job, _, cand) in enumerate(cuda):
        _judge_compile(job, compiled.get(i), _cuda_arch(cand.source), nvcc)


def _bench_all(toolchain: "Toolchain", pairs: list) -> list[Any]:
    if not pairs:
        return []
    try:
        return toolchain.benchmark_many(pairs, "cpu")
    except SkillbaseError:
        pass  # one bad job stops the batch; run them one by one to pin each error on its example
    out = []
    for task, cand in pairs:
        try:
            out.append(toolchain.benchmark(task, cand, device="cpu"))
        except SkillbaseError as e:
            out.append(e)
    return out


def _compile_all(cuda: list, toolchain: "Toolchain", out: dict[int, Any]) -> None:
    for i, (_, task, cand) in enumerate(cuda):
        try:
            out[i] = toolchain.compile(task, cand, arch=_cuda_arch(cand.source))
        except Exception as e:  # noqa: BLE001 - reported on the example, never lost in this thread
            out[i] = e


def _judge_bench(job: _Job, report: Any) -> None:
    where = f"examples.{job.index}.solution"
    if isinstance(report, SkillbaseError):
        job.target.add("error", "example-failed", f"{job.label}: {report}", where)
    elif report.verdict != "correct":
        job.target.add("error", "example-failed", f"{job.label}: {report.message}", where)
    else:
        trials = report.correctness.trials if report.correctness else 0
        job.target.add(
            "info",
            "example-verified",
            f"{job.label}: correct under the Triton interpreter on the CPU ({trials} trials at the "
            "task's small shape; no correctness or anti-cheat check failed)",
            where,
        )


def _judge_compile(job: _Job, report: Any, arch: str, nvcc: bool) -> None:
    where = f"examples.{job.index}.solution"
    if not nvcc:
        job.target.add(
            "info", "example-skipped", f"{job.label}: CUDA example not compiled: nvcc is not installed", where
        )
    elif report is None or isinstance(report, Exception):
        job.target.add("error", "example-failed", f"{job.label}: the compile did not finish: {report!r}", where)
    elif not report.ok:
        first = next((d.message for d in report.diagnostics if d.severity == "error"), "compile failed")
        job.target.add("error", "example-failed", f"{job.label}: does not compile for {arch}: {first}", where)
    else:
        regs = ", ".join(f"{k.name} {k.registers} registers" for k in report.kernels[:3])
        job.target.add("info", "example-verified", f"{job.label}: compiles for {arch} with nvcc ({regs})", where)


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------


def _technique_lookup(store: "Store | None") -> Callable[[str], str]:
    if store is not None:
        return store.canonical_technique
    from skillbase import seeds
    from skillbase.memory.techniques import Vocabulary, load_seed_techniques

    return Vocabulary(load_seed_techniques(seeds.TECHNIQUES_FILE)).canonical


def _settings_of(settings: Settings | None, store: Any, toolchain: Any) -> Settings | None:
    return settings or getattr(store, "settings", None) or getattr(toolchain, "settings", None)


def lint_many(
    targets: Sequence[Skill | Path | str],
    *,
    settings: Settings | None = None,
    store: "Store | None" = None,
    toolchain: "Toolchain | None" = None,
    verify_examples: bool = True,
) -> list[LintResult]:
    """Lint several skills (folders, SKILL.md paths or records), in order.

    Technique names are checked against the store's vocabulary (the seed
    vocabulary without a store), evidence ids against the store. With
    ``verify_examples`` every example runs through ``toolchain`` (one is
    started from ``settings`` when not given, and stopped afterwards): Triton
    examples under the interpreter on the CPU, CUDA examples compiled for
    sm_90 by nvcc. ``verify_examples=False`` is the fast path (about a second
    for the 40 seeds). Raises NotFound for a path without a SKILL.md.
    """
    cfg = _settings_of(settings, store, toolchain)
    max_bytes = cfg.max_source_bytes if cfg else Settings.model_fields["max_source_bytes"].default
    canonical = _technique_lookup(store)
    with tempfile.TemporaryDirectory(prefix="skillbase-lint-") as scratch:
        loaded = [_load(t, max_bytes, Path(scratch)) for t in targets]
        jobs: list[_Job] = []
        seen: dict[str, str] = {}
        for t in loaded:
            if t.skill is None:
                continue
            if t.skill.name in seen:
                t.add("error", "name-duplicate", f"{seen[t.skill.name]} already defines skill {t.skill.name!r}", "name")
            seen.setdefault(t.skill.name, t.source)
            for check in (_check_name, _check_description, _check_applies_when, _check_body):
                check(t)
            _check_techniques(t, canonical)
            _check_status(t, store)
            _check_evidence(t, store)
            jobs += _example_jobs(t)  # static checks of the examples run either way
        if jobs and verify_examples:
            _run_jobs(jobs, cfg, toolchain)
        return [
            LintResult(skill=t.skill.name if t.skill else t.label, source=t.source, issues=t.issues) for t in loaded
        ]


def _run_jobs(jobs: list[_Job], settings: Settings | None, toolchain: "Toolchain | None") -> None:
    if toolchain is not None:
        _verify(jobs, toolchain)
        return
    if settings is None:
        raise InvalidInput(
            "verifying examples needs a toolchain or settings",
            hint="pass toolchain=..., settings=..., or verify_examples=False",
        )
    from skillbase.toolchain import Toolchain

    with Toolchain(settings) as tc:
        _verify(jobs, tc)


def lint(
    target: Skill | Path | str,
    *,
    settings: Settings | None = None,
    store: "Store | None" = None,
    toolchain: "Toolchain | None" = None,
    verify_examples: bool = True,
) -> list[LintIssue]:
    """Lint one skill (a folder, its SKILL.md, or a ``Skill`` record); see ``lint_many``.

    The skill passes when no issue has level 'error' (``errors(issues) == []``).
    """
    return lint_many([target], settings=settings, store=store, toolchain=toolchain, verify_examples=verify_examples)[
        0
    ].issues


def lint_dir(root: Path, **kwargs: Any) -> list[LintResult]:
    """Lint every skill folder under ``root`` (each ``<root>/<name>/SKILL.md``), sorted by name."""
    folders = sorted(p.parent for p in Path(root).glob(f"*/{SKILL_FILE}"))
    if not folders:
        raise NotFound(f"no skill folders under {str(root)!r}", hint=f"expected <root>/<name>/{SKILL_FILE}")
    return lint_many(folders, **kwargs)
