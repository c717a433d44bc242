"""``suite run`` and ``suite record`` end to end: discover, evaluate, record, report."""

from __future__ import annotations

import time
from pathlib import Path

from skillbase.suite import report as reports
from skillbase.suite.discover import Item, discover
from skillbase.suite.record import record_run
from skillbase.suite.runner import Event, SuiteRunner, saved_outcomes


def run_suite(
    sb,
    run_dir: Path,
    *,
    kernelbench: Path | None = None,
    levels: set[int] | None = None,
    problems: set[int] | None = None,
    device: str = "auto",
    workers: int | None = None,
    record: bool = True,
    manifest: Path | None = None,
    session: str | None = None,
    time_limit_s: float | None = None,
    use_cache: bool = True,
    on_start=None,
    on_order=None,
    on_event: Event | None = None,
) -> dict:
    """Evaluate every candidate of ``run_dir`` (resuming what an earlier call finished), record
    each as an attempt unless ``record`` is False, write the reports; returns the report dict.

    ``on_start(items)`` is called once the candidates are known, ``on_order(items)`` with those left
    to evaluate in the order the workers take them, ``on_event(kind, outcome)`` as each is resumed or
    finished. With ``record=False`` the store is never opened (no chromadb, no embedding model).
    With ``time_limit_s``, no candidate starts after that many seconds; the report then says how many
    are left (``complete`` false) and the next call goes on from there. ``use_cache=False`` evaluates
    again what the toolchain's result cache holds (the run directory's own results are still resumed).
    """
    start = time.perf_counter()
    items = discover(Path(run_dir), kernelbench, levels, problems, manifest)
    if on_start is not None:
        on_start(items)
    runner = SuiteRunner(sb.toolchain, Path(run_dir), device, workers, use_cache)
    state = runner.run(items, on_event, time_limit_s=time_limit_s, on_order=on_order)
    outcomes = {name: (o.report, o.finished_at) for name, o in state.outcomes.items()}
    recorded = record_run(sb, items, outcomes, Path(run_dir).resolve().name, session=session) if record else None
    rows = [
        reports.row_of(o.item, o.report, run_dir, recorded.attempts.get(o.item.name) if recorded else None, o.resumed)
        for o in (state.outcomes[i.name] for i in items if i.name in state.outcomes)
    ]
    report = reports.build(
        run_dir,
        rows,
        device=state.device_kind,
        wall_s=time.perf_counter() - start,
        recorded=len(recorded.attempts) if recorded else None,
        skipped=recorded.skipped if recorded else None,
        left=state.left,
        workers=len(sb.toolchain.worker_names(device, workers)),
        marks=state.marks,
    )
    reports.write(run_dir, report)
    return report


def record_suite(
    sb, run_dir: Path, *, kernelbench: Path | None = None, manifest: Path | None = None, session: str | None = None
) -> dict:
    """Record a run evaluated elsewhere (``suite run --no-record`` on a GPU box) into this store and
    rewrite its reports with the attempt ids. Recording twice adds nothing."""
    start = time.perf_counter()
    items: list[Item] = discover(Path(run_dir), kernelbench, None, None, manifest)
    outcomes = saved_outcomes(Path(run_dir))
    recorded = record_run(sb, items, outcomes, Path(run_dir).resolve().name, session=session)
    rows = [
        reports.row_of(i, outcomes[i.name][0], run_dir, recorded.attempts.get(i.name), True)
        for i in items
        if i.name in outcomes
    ]
    device = "cuda" if any(r["device"].startswith("cuda") for r in rows) else "cpu"
    report = reports.build(
        run_dir,
        rows,
        device=device,
        wall_s=time.perf_counter() - start,
        recorded=len(recorded.attempts),
        skipped=recorded.skipped,
        left=[i.name for i in items if i.name not in outcomes],
    )
    reports.write(run_dir, report)
    return report
