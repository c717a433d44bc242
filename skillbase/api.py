"""SkillBase: the one facade over the toolchain, the memory, the retrievers and the
skill library. The CLI, the MCP server and the agent call this and nothing else.

The reference agent sits above this layer: ``skillbase.SkillBase`` (defined in
``skillbase.agent.facade``) is this class plus ``optimize`` and ``distill``; the faces
use this one, so nothing here imports the agent.

    from skillbase import SkillBase

    with SkillBase() as sb:                       # store at $SKILLBASE_HOME (~/.skillbase)
        sb.init()                                 # seed once: techniques, skills, measured experiences
        task = sb.load_task("row_softmax")
        hints = sb.recall(task="row_softmax", k=5)
        result = sb.benchmark("row_softmax", source=my_kernel_source, techniques=["online softmax"])
        sb.record_lesson("Rows this wide do not fit in registers ...", after_attempt=result.attempt_id)

Each part is built on first use, so a command that only reads skills never starts
a GPU worker, and one that only benchmarks with ``record=False`` never opens chroma.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from skillbase import seeds
from skillbase import skills as skill_ops
from skillbase.config import Settings
from skillbase.errors import InvalidInput, LimitExceeded, NotFound, SkillbaseError
from skillbase.models import (
    Attempt,
    AttemptSummary,
    BenchmarkResult,
    BenchReport,
    Candidate,
    CompileReport,
    Experience,
    Feedback,
    InitReport,
    ProfileReport,
    RecallResult,
    Skill,
    SkillVersion,
    Suggestion,
    TaskInfo,
    TaskSummary,
    Technique,
)
from skillbase.toolchain import roofline, tasks, understand

Progress = Callable[[float, str], None]

# A gain within this of 1 is noise, not an improvement (feedback on recalled items).
IMPROVED = 1.02


class SkillBase:
    """Compile, verify and benchmark kernels; remember every attempt; recall what worked."""

    def __init__(self, settings: Settings | None = None, *, home: str | Path | None = None):
        """Use ``settings`` as given, or read them from the environment (``home`` overrides SKILLBASE_HOME)."""
        if settings is None:
            settings = Settings.from_env(**({"home": Path(home).expanduser()} if home else {}))
        self.settings = settings
        self._toolchain = None
        self._store = None
        self._retriever = None
        self._views = None
        # Servers call the API from several threads at once; each part must be built once.
        self._parts_lock = threading.RLock()

    # -- parts, built on first use --------------------------------------------

    @property
    def toolchain(self):
        """The kernel toolchain (isolated workers; started lazily)."""
        with self._parts_lock:
            if self._toolchain is None:
                from skillbase.toolchain import Toolchain

                self._toolchain = Toolchain(self.settings)
            return self._toolchain

    @property
    def memory(self):
        """The Store: ledger, vector index and reasoning graph."""
        store = self._store
        if store is not None:  # open: no wait for the lock, which a part being built holds for seconds
            return store
        with self._parts_lock:
            if self._store is None:
                from skillbase.memory.store import Store

                self._store = Store.open(self.settings)
            return self._store

    @property
    def memory_open(self) -> bool:
        """Whether the store is open: a read of it now waits for nothing to be built."""
        return self._store is not None

    @property
    def retriever(self):
        """Recall and next-technique suggestions over the Store."""
        with self._parts_lock:
            if self._retriever is None:
                from skillbase.retrievers.retriever import Retriever

                self._retriever = Retriever(self.memory, self.settings)
            return self._retriever

    @property
    def views(self):
        """Read-only, paginated views of the ledger for pages (the curation UI): their own SQLite
        connections, so a read never waits on a write in flight (``skillbase.memory.views``)."""
        with self._parts_lock:
            if self._views is None:
                from skillbase.memory.views import LedgerView

                self.memory  # creates and migrates the ledger the views read
                self._views = LedgerView(self.settings.ledger_path)
            return self._views

    def caller_scope(self, seen: dict[str, int]):
        """A context manager for one step of a longer-lived caller (an MCP client's tool call): searches
        inside it see every write recorded in earlier steps that shared ``seen``, and its own writes are
        added to ``seen``. Keep one dict per caller."""
        from skillbase.memory.store import caller_writes

        return caller_writes(seen)

    def warm_up(self) -> None:
        """Open the store and the retriever now (model weights, indexes, graph) by running one
        small recall, so that a server's first real call answers as fast as the rest."""
        self.recall("warm up", k=1)

    def close(self) -> None:
        """Stop workers and close the store. Safe to call twice."""
        with self._parts_lock:
            for part in (self._retriever, self._toolchain, self._store):
                if part is not None:
                    part.close()
            if self._views is not None:
                self._views.close()
            self._toolchain = self._store = self._retriever = self._views = None

    def __enter__(self) -> "SkillBase":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- setup ------------------------------------------------------------------

    def init(self) -> InitReport:
        """Seed the store: the technique vocabulary, the seed skills and the measured
        experiences. Idempotent: running it again adds nothing that is already there."""
        start = time.perf_counter()
        store = self.memory
        if seeds.EMBEDDINGS_FILE.is_file() and store.embedder.cache is not None:
            store.embedder.cache.import_npz(seeds.EMBEDDINGS_FILE)
        # Experiences first: the seed skills' evidence points at them.
        imported = sum(store.import_jsonl(f) for f in seeds.MEMORY_FILES if f.is_file())
        seeded = skill_ops.seed_skills(store, seeds.SKILLS_DIR)
        stats = store.stats()
        return InitReport(
            home=str(self.settings.home),
            techniques=len(store.list_techniques()),
            skills_added=len(seeded.added),
            skills_total=len(store.list_skills()),
            records_imported=imported,
            experiences_total=stats.counts.get("experiences", 0),
            seconds=time.perf_counter() - start,
        )

    # -- tasks ------------------------------------------------------------------

    def list_tasks(self) -> list[TaskInfo]:
        """The built-in tasks."""
        return self.toolchain.list_tasks()

    def task(self, task: str | TaskInfo) -> TaskInfo:
        """A task by built-in name or file path (a TaskInfo passes through)."""
        return task if isinstance(task, TaskInfo) else self.toolchain.load_task(task)

    def task_source(self, task: str | TaskInfo) -> str:
        """The task module's source: the PyTorch reference ``Model`` and its ``get_inputs``."""
        return Path(self.task(task).path).read_text(encoding="utf-8")

    def load_task(self, task: str | TaskInfo) -> TaskSummary:
        """What a task computes, its floor on the last GPU it was measured on, its
        eager / torch.compile baselines there, and the best attempt so far. A name only the store holds
        (a task recorded elsewhere, as the campaign's KernelBench problems are) gives what the store knows
        of it, with a note that its file is not here."""
        note = None
        try:
            info = self.task(task)
        except NotFound:
            if not isinstance(task, str):
                raise
            info = self._stored_task(task)
            note = (
                f"{task!r} is known to this store from its records only: its reference file is not here "
                "(pass the task file's path to benchmark against it)"
            )
        attempts = self.memory.list_attempts(task=info.name, limit=500)
        timed = [a for a in attempts if a.bench_report and a.bench_report.timing]
        latest = timed[0].bench_report if timed else None
        summary = TaskSummary(info=info, attempts=len(attempts), note=note)
        if latest is not None:
            hw = latest.hardware
            summary.hardware = hw.key
            summary.baselines_ms = {k: v.median_ms for k, v in latest.baselines.items()}
            summary.floor_ms = roofline.floor_ms(
                info.bytes_moved, info.flops, hw.peak_gbps, roofline.peak_rate(hw, info.dtype)
            )
            roof = understand.roof_of(hw)
            if info.understanding is not None and roof is not None:
                summary.info = info.model_copy(
                    update={"understanding": understand.with_roof(info.understanding, info.dtype, roof)}
                )
        correct = [a for a in timed if a.verdict == "correct"]
        if correct:
            summary.best = AttemptSummary.of(min(correct, key=lambda a: a.median_ms))
        return summary

    def _stored_task(self, name: str) -> TaskInfo:
        """The TaskInfo the store recorded for ``name``; NotFound (naming the built-ins) when it has none."""
        try:
            record = self.memory.get_task(name)
        except NotFound:
            record = None
        if record is None or record.info is None:
            names = ", ".join(tasks.builtin_names(tasks.builtin_dir()))
            raise NotFound(
                f"no task named {name!r} here or in the store",
                hint=f"use a task file's path, a built-in name ({names}) or a name that recall or "
                "attempt_history printed",
            )
        return record.info

    def candidate(self, task: TaskInfo, solution: str | None = None, source: str | None = None) -> Candidate:
        """The candidate to evaluate: a solution path or built-in solution name, or source text."""
        if (solution is None) == (source is None):
            raise InvalidInput("give exactly one of a solution (path or built-in name) and source code")
        if solution is not None:
            return self.toolchain.resolve_solution(task, solution)
        if len(source.encode()) > self.settings.max_source_bytes:
            raise LimitExceeded(
                f"the source is {len(source.encode())} bytes; the limit is {self.settings.max_source_bytes}",
                hint="send one solution module, not a bundle",
            )
        return Candidate(source=source)

    # -- the kernel loop ----------------------------------------------------------

    def compile(
        self, task: str | TaskInfo, solution: str | None = None, *, source: str | None = None, arch: str = "sm_90"
    ) -> CompileReport:
        """Compile a candidate for ``arch`` without running it: per-kernel registers,
        spills, shared memory, and the first error located in the candidate's source."""
        info = self.task(task)
        return self.toolchain.compile(info, self.candidate(info, solution, source), arch)

    def benchmark(
        self,
        task: str | TaskInfo,
        solution: str | None = None,
        *,
        source: str | None = None,
        device: str = "auto",
        parent_id: str | None = None,
        techniques: Iterable[str] = (),
        session: str | None = None,
        agent: str | None = None,
        used: Sequence[str] = (),
        progress: Progress | None = None,
        record: bool = True,
        use_cache: bool = True,
    ) -> BenchmarkResult:
        """Verify and time a candidate against the task's reference, and record it as
        an attempt (child of ``parent_id``, applying ``techniques``).

        ``used`` lists ids of recalled items (skill names, experience or attempt ids)
        that shaped this candidate; whether it beat its parent is recorded as feedback
        on each. A failing or cheating candidate is a verdict in the report, not an error.
        """
        info = self.task(task)
        cand = self.candidate(info, solution, source)
        techs = [self.memory.canonical_technique(t) for t in techniques] if record else list(techniques)
        parent = self.memory.get_attempt(parent_id) if parent_id else None
        report = self.toolchain.benchmark(info, cand, device, progress=progress, use_cache=use_cache)
        if not record:
            return BenchmarkResult(report=report, parent_id=parent_id)
        attempt = self.memory.record_benchmark(
            report, source=cand.source, task=info, parent_id=parent_id, techniques=techs, session=session, agent=agent
        )
        gain = _gain(parent, attempt)
        for item in used:
            self.memory.record_feedback(
                Feedback(
                    item_kind=_item_kind(item),
                    item_id=item,
                    used=True,
                    attempt_id=attempt.id,
                    improved=None if gain is None else gain > IMPROVED,
                )
            )
        return BenchmarkResult(
            attempt_id=attempt.id, report=report, parent_id=parent_id, gain_vs_parent=gain, recorded=True
        )

    def profile(
        self,
        task: str | TaskInfo,
        solution: str | None = None,
        *,
        source: str | None = None,
        device: str = "auto",
        attempt_id: str | None = None,
        progress: Progress | None = None,
        record: bool = True,
    ) -> ProfileReport:
        """Profile a candidate's own kernels with Nsight Compute: per-kernel counters, a diagnosis in plain
        words, the matching techniques and a bottleneck state. Stored with ``attempt_id`` (default: the
        latest attempt of this task with the same source), where the graph and later suggestions use its
        state. Without a GPU or ncu: ``available=False``, why, and what was measured instead."""
        info = self.task(task)
        cand = self.candidate(info, solution, source)
        report = self.toolchain.profile(info, cand, device, progress=progress)
        if not record:
            return report
        target = (
            self.memory.get_attempt(attempt_id).id
            if attempt_id
            else next(
                (
                    a.id
                    for a in self.memory.list_attempts(task=info.name, limit=500)
                    if a.source_hash == cand.source_hash
                ),
                None,
            )
        )
        if target is None:
            return report.model_copy(
                update={
                    "notes": report.notes
                    + ["not stored: no attempt of this source yet (benchmark it first, or pass attempt_id)"]
                }
            )
        self.memory.record_profile(target, report)
        return report.model_copy(update={"attempt_id": target})

    def record_evaluation(
        self,
        task: str | TaskInfo,
        report: BenchReport,
        *,
        source: str,
        parent_id: str | None = None,
        techniques: Iterable[str] = (),
        session: str | None = None,
        agent: str | None = None,
        run: str | None = None,
        notes: str = "",
        attempt_id: str | None = None,
        created_at: Any = None,
    ) -> Attempt:
        """Record a report evaluated elsewhere (a suite run, another host's GPU) as an attempt,
        exactly as ``benchmark`` would have. With ``attempt_id`` and ``created_at`` given,
        recording the same evaluation again changes nothing."""
        info = self.task(task)
        if report.task_signature != info.signature and report.task != info.name:
            raise InvalidInput(f"the report is of task {report.task!r}, not {info.name!r}")
        techs = [self.memory.canonical_technique(t) for t in techniques]
        return self.memory.record_benchmark(
            report,
            source=source,
            task=info,
            parent_id=parent_id,
            techniques=techs,
            session=session,
            agent=agent,
            run=run,
            notes=notes,
            attempt_id=attempt_id,
            created_at=created_at,
        )

    def recall(
        self,
        text: str | None = None,
        *,
        task: str | TaskInfo | None = None,
        source: str | None = None,
        report: BenchReport | None = None,
        arch: str | None = None,
        k: int = 5,
        kinds: tuple[str, ...] = ("skill", "experience"),
        run: str | None = None,
        profile: ProfileReport | None = None,
    ) -> RecallResult:
        """The skills and past experiences most likely to speed up this kernel on this
        GPU, each with why it was chosen and its measured evidence; with a task, also
        the next techniques to try. ``run`` (a suite run directory's name) keeps only
        that run's attempts and the experiences about them."""
        info: TaskInfo | str | None = task
        if isinstance(task, str):
            try:
                info = self.task(task)
            except NotFound:
                info = task  # a task only the store has seen (recorded from another machine)
        result = self.retriever.recall(
            text=text, task=info, source=source, report=report, arch=arch, k=k, kinds=kinds, run=run, profile=profile
        )
        if not result.items and not self.memory.holds_knowledge():
            result.notes.append(
                f"the store at {self.settings.home} holds no skills or experiences yet: run "
                "`skillbase init` to load the shipped skills and measured experiences"
            )
        return result

    def suggest(
        self,
        task: str | TaskInfo,
        *,
        session: str | None = None,
        arch: str | None = None,
        k: int = 3,
        seed: int | None = None,
    ) -> list[Suggestion]:
        """The next techniques to try on a task, given the attempts made on it
        (in ``session`` only, when given): measured winners first, a little exploration."""
        info = self.task(task)
        attempts = self.memory.list_attempts(task=info.name, session=session, limit=500)
        return self.retriever.suggest(task=info, attempts=attempts, arch=arch, k=k, seed=seed)

    def record_lesson(
        self,
        lesson: str,
        *,
        task: str | None = None,
        before_attempt: str | None = None,
        after_attempt: str | None = None,
        techniques: Iterable[str] = (),
        title: str = "",
        conditions: str = "",
        session: str | None = None,
        agent: str | None = None,
        experience_id: str | None = None,
        created_at: Any = None,
    ) -> Experience:
        """Record what was learned, tied to the attempts that taught it. The gain is
        measured from the attempts (after over before, same hardware), never typed in;
        with only ``after_attempt``, its parent is the before. With ``experience_id`` and
        ``created_at`` given (a seed built again), recording the same lesson again changes nothing."""
        if not lesson or not lesson.strip():
            raise InvalidInput("the lesson is empty", hint="say what worked or failed, and why")
        after = self.memory.get_attempt(after_attempt) if after_attempt else None
        before_id = before_attempt or (after.parent_id if after else None)
        before = self.memory.get_attempt(before_id) if before_id else None
        anchor = after or before
        if anchor is None and not task:
            raise InvalidInput("a lesson needs a task or an attempt", hint="pass after_attempt=<attempt id>")
        techs = list(techniques) or (list(after.techniques) if after else [])
        exp = Experience(
            title=title,
            lesson=lesson.strip(),
            task=anchor.task if anchor else task,
            task_signature=anchor.task_signature if anchor else None,
            family=anchor.family if anchor else None,
            dtype=anchor.dtype if anchor else None,
            before_attempt=before_id,
            after_attempt=after_attempt,
            techniques=[self.memory.canonical_technique(t) for t in techs],
            gain=_gain(before, after),
            bottleneck=before.bottleneck if before else (after.bottleneck if after else None),
            arch=anchor.arch if anchor else None,
            hardware=anchor.hardware if anchor else None,
            conditions=conditions,
            source="agent",
            session=session,
            agent=agent,
            **({"id": experience_id} if experience_id else {}),
            **({"created_at": created_at} if created_at else {}),
        )
        return self.memory.record_experience(exp)

    def attempt_history(self, task: str, *, session: str | None = None, limit: int = 100) -> list[AttemptSummary]:
        """Attempts on a task, oldest first, each with its parent: the lineage as a list."""
        name = task.name if isinstance(task, TaskInfo) else self._task_name(task)
        attempts = self.memory.list_attempts(task=name, session=session, limit=limit)
        return [AttemptSummary.of(a) for a in reversed(attempts)]

    def get_attempt(self, attempt_id: str) -> Attempt:
        """One attempt in full: source, compile and benchmark reports."""
        return self.memory.get_attempt(attempt_id)

    def list_techniques(self) -> list[Technique]:
        """The technique vocabulary that benchmarks and lessons name techniques from."""
        return self.memory.list_techniques()

    def get_experience(self, experience_id: str) -> Experience:
        """One recorded experience."""
        return self.memory.get_experience(experience_id)

    # -- skills -------------------------------------------------------------------

    def get_skill(self, name: str, version: int | None = None) -> Skill:
        """A skill (its latest version unless ``version``)."""
        return self.memory.get_skill(name, version)

    def skill_markdown(self, name: str, version: int | None = None) -> str:
        """A skill as the text of its SKILL.md (frontmatter and body)."""
        return skill_ops.render_skill_md(self.get_skill(name, version))

    def list_skills(self, status: str | None = None) -> list[Skill]:
        """Skills, optionally only those with ``status`` (draft, approved, deprecated)."""
        return skill_ops.list_skills(self.memory, status)

    def skill_history(self, name: str) -> list[SkillVersion]:
        """Every version of a skill: who changed it, when and why."""
        return skill_ops.skill_history(self.memory, name)

    def propose_skill(
        self, skill: Skill, *, agent: str, from_experiences: Iterable[str] = (), reason: str = "proposed by an agent"
    ):
        """Land an agent's skill as a draft for curation; it is never approved here."""
        return skill_ops.propose_skill(
            self.memory, skill, agent=agent, from_experiences=from_experiences, reason=reason
        )

    def add_skill(
        self, source: str | Path | Skill, *, author: str, reason: str = "added", approve: bool = False
    ) -> Skill:
        """Add a skill from a SKILL.md file, a skill folder or a Skill (a draft unless ``approve``)."""
        return skill_ops.add_skill(self.memory, source, author=author, reason=reason, approve=approve)

    def edit_skill(self, name: str, changes: dict[str, Any], *, author: str, reason: str) -> Skill:
        """A new version of a skill with ``changes`` applied to its fields."""
        return skill_ops.edit_skill(self.memory, name, changes, author=author, reason=reason)

    def approve_skill(self, name: str, *, curator: str, reason: str) -> Skill:
        """Approve a draft after linting it (examples verified)."""
        return skill_ops.approve_skill(self.memory, name, curator=curator, reason=reason, toolchain=self.toolchain)

    def deprecate_skill(self, name: str, *, author: str, reason: str, superseded_by: str | None = None) -> Skill:
        """Deprecate a skill, optionally pointing at its replacement."""
        return skill_ops.deprecate_skill(self.memory, name, author=author, reason=reason, superseded_by=superseded_by)

    def rollback_skill(self, name: str, version: int, *, author: str, reason: str | None = None) -> Skill:
        """A new version equal to an older one."""
        return skill_ops.rollback_skill(self.memory, name, version, author=author, reason=reason)

    def merge_skills(self, a: str, b: str, *, into: str, author: str, reason: str):
        """Merge two skills into ``into``, keeping both provenances and all evidence."""
        return skill_ops.merge_skills(self.memory, a, b, into=into, author=author, reason=reason)

    def dedupe_skills(self, limit: int = 50):
        """Near-duplicate pairs, with scores and reasons, for a curator to merge or dismiss."""
        return skill_ops.find_duplicates(self.memory, limit=limit)

    def similar_skills(self, skills: "Sequence[Skill | str]", limit: int = 5) -> dict:
        """For each of ``skills`` (Skills, stored or not, or stored names): the stored skills (not
        deprecated) it would duplicate, best first, with scores and reasons. Each text is embedded once."""
        resolved = [self.get_skill(s) if isinstance(s, str) else s for s in skills]
        return skill_ops.find_similar_many(self.memory, resolved, limit=limit)

    def lint_skills(self, targets: Sequence[str | Path] | None = None, *, verify_examples: bool = True):
        """Lint skill files or folders (default: every skill in the store)."""
        kw = dict(
            settings=self.settings,
            store=self.memory,
            verify_examples=verify_examples,
            toolchain=self.toolchain if verify_examples else None,
        )
        if targets:
            return skill_ops.lint_many(list(targets), **kw)
        return skill_ops.lint_many(self.list_skills(), **kw)

    def export_skills(self, out_dir: str | Path, *, overwrite: bool = False):
        """Write every approved skill as an Agent Skills folder (SKILL.md + examples)."""
        return skill_ops.export_agent_skills(
            self.list_skills("approved"), Path(out_dir), overwrite=overwrite, max_bytes=self.settings.max_source_bytes
        )

    def import_skills(self, path: str | Path, *, author: str, approve: bool = False, replace: bool = False):
        """Import Agent Skills folders or markdown files (drafts unless ``approve``); all or nothing."""
        return skill_ops.import_skills(self.memory, Path(path), author=author, approve=approve, replace=replace)

    # -- memory ---------------------------------------------------------------------

    def stats(self):
        """Counts per record kind, index lag and disk use of the store."""
        return self.memory.stats()

    def export_memory(self, path: str | Path) -> int:
        """Every record to one JSONL file; returns how many."""
        return self.memory.export_jsonl(path)

    def import_memory(self, path: str | Path) -> int:
        """Import a JSONL export, all or nothing; returns how many records were new."""
        return self.memory.import_jsonl(path)

    def reindex(self) -> int:
        """Re-derive stored tasks from their files (``rederive_tasks``), then rebuild the vector index
        and the graph from the ledger; returns records indexed."""
        self.rederive_tasks()
        return self.memory.reindex()

    def check_index(self):
        """Look for every record of the vector index by its own vector; those chroma's search no longer
        reaches are answered from the index's mirror from then on (an IndexCheck)."""
        return self.memory.check_index()

    def rederive_tasks(self) -> list[dict[str, Any]]:
        """Describe every stored task again from its file, where the file is still there, and give its
        attempts and lessons the family and class the trace now finds (a task recorded as 'other' before
        it was understood becomes 'softmax'). Returns one row per task that changed."""
        changed = []
        for rec in self.memory.list_tasks():
            path = rec.info.path if rec.info is not None else ""
            if not path or not Path(path).is_file():
                continue
            try:
                info = self.toolchain.load_task(path)
            except SkillbaseError:
                continue  # the file no longer describes a task; its records keep their class
            old = rec.info
            if info.name != rec.name or (
                info.signature == rec.signature
                and old.families == info.families
                and old.understanding == info.understanding
            ):
                continue
            n = self.memory.rederive_task(info)
            changed.append({"task": rec.name, "from": rec.signature, "to": info.signature, "records": n})
        return changed

    # -- helpers ----------------------------------------------------------------------

    def task_name(self, task: str | TaskInfo) -> str:
        """The name a task's records are stored under; NotFound for neither a built-in name nor a task file.
        A built-in task's name is its folder's: it is not read, hashed and described for it (a deep copy
        of its description per call was half of attempt_history's time under load)."""
        if isinstance(task, TaskInfo):
            return task.name
        path, builtin = tasks.resolve_task_path(task)
        return tasks.task_name(path, builtin) if builtin else self.task(task).name

    def reads_task_file(self, task: str | TaskInfo) -> bool:
        """Whether naming ``task`` loads a task file (a path); a built-in name, a TaskInfo or a name
        only the store knows is answered without one (what ``task_name`` does)."""
        if isinstance(task, TaskInfo):
            return False
        try:
            _, builtin = tasks.resolve_task_path(task)
        except NotFound:
            return False
        return not builtin

    def _task_name(self, task: str) -> str:
        try:
            return self.task_name(task)
        except NotFound:
            return task  # a task only the store knows


def _gain(before: Attempt | None, after: Attempt | None) -> float | None:
    """before.median / after.median when both are correct and timed on the same hardware."""
    if not (before and after and before.median_ms and after.median_ms):
        return None
    if before.verdict != "correct" or after.verdict != "correct" or before.hardware != after.hardware:
        return None
    return before.median_ms / after.median_ms


def _item_kind(item_id: str) -> str:
    """The record kind of a recalled item's id: experiences and attempts carry a prefix."""
    if item_id.startswith("exp_"):
        return "experience"
    if item_id.startswith("att_"):
        return "attempt"
    return "skill"
