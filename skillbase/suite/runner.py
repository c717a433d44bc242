"""Evaluate a run's candidates: resumable, longest expected first, over every GPU.

Each finished candidate's report is written at once to
``RUN_DIR/.skillbase/results/<key>.json``, the key addressing the task's and the
candidate's content, the device kind and the toolchain's versions. A run killed
at any point continues on the next call with what is missing; a re-run with
unchanged files finds every result from the files' hashes alone (no task is
described, no worker started) and costs seconds.

The workers start (and measure their GPU's peaks) in the background while the
tasks are described, all at once; the candidates left to evaluate are then
ordered longest expected first (``Toolchain.expected_eval_s``: measured
durations, else baselines or the floor) so that the GPUs finish together.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from skillbase.errors import SkillbaseError
from skillbase.models import BenchReport, Candidate, ErrorInfo, Hardware, TaskInfo, content_hash
from skillbase.suite.discover import Item
from skillbase.toolchain.cache import make_key, toolchain_versions
from skillbase.toolchain.source import detect_language, read_source

STATE_DIR = ".skillbase"


@dataclass
class Outcome:
    """One candidate's evaluation as the run keeps it."""

    item: Item
    key: str
    report: BenchReport
    source_hash: str
    finished_at: str
    resumed: bool = False


@dataclass
class RunState:
    """What a run knows: the outcomes so far, and the candidates a time limit left for later."""

    run_dir: Path
    device_kind: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    left: list[str] = field(default_factory=list)
    # Seconds after the run began: candidates prepared (tasks described), workers ready (started,
    # GPUs described), every evaluation done. What is not evaluation in a run's wall clock.
    marks: dict[str, float] = field(default_factory=dict)


Event = Callable[[str, Outcome], None]


def results_dir(run_dir: Path) -> Path:
    """Where a run directory keeps one JSON file per finished candidate."""
    return Path(run_dir) / STATE_DIR / "results"


def _atomic_write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def failed_report(task: TaskInfo | None, item: Item, source: str, device: str, err: BaseException) -> BenchReport:
    """A row for a candidate the toolchain refused before running it (bad task, no GPU for CUDA...)."""
    message = getattr(err, "message", None) or str(err)
    hint = getattr(err, "hint", None)
    return BenchReport(
        task=task.name if task else item.task.stem,
        task_signature=task.signature if task else "other:fp32:medium",
        solution_hash=content_hash(source),
        language=detect_language(source),
        device=device,
        hardware=Hardware(kind="cpu" if device == "cpu" else "cuda", name="unknown", arch="unknown"),
        verdict="invalid",
        message=f"not evaluated: {message}" + (f" ({hint})" if hint else ""),
        error=ErrorInfo(type=type(err).__name__, message=message),
        timing_unavailable=f"not evaluated: {message}",
    )


class SuiteRunner:
    """Evaluate items with a Toolchain, writing each result as it lands."""

    def __init__(
        self, toolchain, run_dir: Path, device: str = "auto", workers: int | None = None, use_cache: bool = True
    ):
        self.toolchain = toolchain
        self.use_cache = use_cache  # False: evaluate again what the toolchain's own result cache holds
        self.run_dir = Path(run_dir)
        self.device = device
        self.workers = workers
        self.kind = "cpu" if toolchain.worker_names(device, 1)[0].startswith("cpu") else "cuda"
        self.versions = toolchain_versions()
        self._tasks: dict[Path, TaskInfo | SkillbaseError] = {}
        self._task_hashes: dict[Path, str] = {}

    def task(self, path: Path) -> TaskInfo:
        """The TaskInfo of a task file, described once per run (raises what describing raised)."""
        if path not in self._tasks:
            try:
                self._tasks[path] = self.toolchain.load_task(str(path))
            except SkillbaseError as e:
                self._tasks[path] = e
        got = self._tasks[path]
        if isinstance(got, SkillbaseError):
            raise got
        return got

    def task_hash(self, path: Path) -> str:
        """The content hash of a task file (what TaskInfo.source_hash is), without describing the task."""
        if path not in self._task_hashes:
            self._task_hashes[path] = content_hash(
                read_source(path, self.toolchain.settings.max_source_bytes, what="task")
            )
        return self._task_hashes[path]

    def key(self, task_hash: str, source: str) -> str:
        return make_key("suite", task_hash, content_hash(source), self.kind, self.versions)

    def run(
        self,
        items: list[Item],
        on_event: Event | None = None,
        *,
        time_limit_s: float | None = None,
        on_order: Callable[[list[Item]], None] | None = None,
    ) -> RunState:
        """Evaluate every item not already evaluated; returns every outcome (old and new).

        With ``time_limit_s``, no candidate starts after that many seconds; those left are listed in
        ``RunState.left`` and the next call evaluates them. ``on_order(items)`` gets the candidates left
        to evaluate, in the order they are handed to the workers."""
        began = time.monotonic()
        deadline = None if time_limit_s is None else began + time_limit_s
        state = RunState(self.run_dir, self.kind)

        def mark(name: str) -> None:
            state.marks[name] = round(time.monotonic() - began, 2)

        emit = on_event or (lambda kind, outcome: None)
        todo: list[tuple[Item, str]] = []
        for item in items:
            source = read_source(item.file, self.toolchain.settings.max_source_bytes, what="candidate")
            try:
                key = self.key(self.task_hash(item.task), source)
            except SkillbaseError as e:
                self._finish(
                    state,
                    item,
                    make_key("invalid", str(item.task), content_hash(source)),
                    source,
                    failed_report(None, item, source, self.kind, e),
                    emit,
                )
                continue
            saved = self._load(key)
            if saved is not None:
                outcome = Outcome(item, key, saved[0], content_hash(source), saved[1], resumed=True)
                state.outcomes[item.name] = outcome
                emit("resumed", outcome)
            else:
                todo.append((item, source))
        if deadline is not None and time.monotonic() >= deadline:
            state.left = [item.name for item, _ in todo]
        if not todo or state.left:
            return state
        warming = self.toolchain.start_workers(self.device, self.workers)
        pending: list[tuple[Item, TaskInfo, Candidate, str]] = []
        for item, source in todo:
            try:
                task = self.task(item.task)
            except SkillbaseError as e:
                self._finish(
                    state,
                    item,
                    make_key("invalid", str(item.task), content_hash(source)),
                    source,
                    failed_report(None, item, source, self.kind, e),
                    emit,
                )
                continue
            pending.append(
                (
                    item,
                    task,
                    Candidate(source=source, language=detect_language(source), path=str(item.file)),
                    self.key(task.source_hash, source),
                )
            )
        mark("prepared_s")
        warming.join()  # the GPUs' baselines known so far say which candidates take longest
        mark("workers_ready_s")
        expected = {id(p): self.toolchain.expected_eval_s(p[1], self.device, p[2]) for p in pending}
        pending.sort(key=lambda p: -expected[id(p)])
        if on_order is not None:
            on_order([p[0] for p in pending])

        def done(i: int, report: BenchReport) -> None:
            item, _, cand, key = pending[i]
            self._finish(state, item, key, cand.source, report, emit)

        def failed(i: int, e: BaseException) -> None:
            # Even an unexpected error is one candidate's row: the other candidates go on.
            item, task, cand, key = pending[i]
            self._finish(
                state,
                item,
                key,
                cand.source,
                failed_report(task, item, cand.source, self.kind, e),
                emit,
                persist=isinstance(e, SkillbaseError),
            )  # not the candidate's doing: try again next time

        if pending:
            self.toolchain.benchmark_many(
                [(task, cand) for _, task, cand, _ in pending],
                self.device,
                workers=self.workers,
                on_done=done,
                on_error=failed,
                use_cache=self.use_cache,
                should_stop=None if deadline is None else (lambda: time.monotonic() >= deadline),
            )
            mark("evaluated_s")
        state.left = [item.name for item, *_ in pending if item.name not in state.outcomes]
        return state

    def _finish(
        self,
        state: RunState,
        item: Item,
        key: str,
        source: str,
        report: BenchReport,
        emit: Event,
        *,
        persist: bool = True,
    ) -> None:
        outcome = Outcome(item, key, report, content_hash(source), _now())
        # A timeout or crash may be the machine's fault: it is reported but evaluated again next time.
        if persist and report.verdict not in ("timeout", "crashed"):
            _atomic_write(
                results_dir(self.run_dir) / f"{key}.json",
                {
                    "key": key,
                    "name": item.name,
                    "finished_at": outcome.finished_at,
                    "report": report.model_dump(mode="json"),
                },
            )
        state.outcomes[item.name] = outcome
        emit("done", outcome)

    def _load(self, key: str) -> tuple[BenchReport, str] | None:
        path = results_dir(self.run_dir) / f"{key}.json"
        try:
            data = json.loads(path.read_text())
            return BenchReport(**data["report"]), data["finished_at"]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # absent, or half-written by a killed run: evaluate again


def saved_outcomes(run_dir: Path) -> dict[str, tuple[BenchReport, str]]:
    """The newest saved result of each candidate name in a run directory, whatever machine
    wrote it: what ``suite record`` records where the store lives."""
    found: dict[str, tuple[BenchReport, str]] = {}
    for path in sorted(results_dir(run_dir).glob("*.json"), key=lambda p: p.stat().st_mtime):
        try:
            data = json.loads(path.read_text())
            found[data["name"]] = (BenchReport(**data["report"]), data["finished_at"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found
