"""The run's report: one row per candidate, the figures of ``metrics`` per level,
written as ``skillbase_report.json`` and ``skillbase_report.md`` in the run
directory; and two reports side by side (``suite compare``)."""

from __future__ import annotations

import json
from pathlib import Path

from skillbase.errors import InvalidInput, NotFound
from skillbase.models import BenchReport
from skillbase.suite import metrics
from skillbase.suite.discover import Item

REPORT_JSON = "skillbase_report.json"
REPORT_MD = "skillbase_report.md"
CPU_NOTE = (
    "CPU run: every candidate was verified under the Triton interpreter at a shrunk shape "
    "(each row's message gives the shape); nothing was timed, so there is no fast_p or speedup."
)


def row_of(
    item: Item, report: BenchReport, run_dir: Path, attempt_id: str | None = None, resumed: bool = False
) -> dict:
    """The plain row a report and ``metrics`` work from."""
    c = report.correctness
    base = {k: v.median_ms for k, v in report.baselines.items()}
    try:
        file = str(item.file.relative_to(Path(run_dir).resolve()))
    except ValueError:
        file = str(item.file)
    return {
        "name": item.name,
        "level": item.level,
        "problem": item.problem,
        "sample": item.sample,
        "task": report.task,
        "file": file,
        "parent": item.parent,
        "techniques": item.techniques,
        "language": report.language,
        "verdict": report.verdict,
        "message": report.message,
        "failed_checks": [x.name for x in c.failed_checks] if c else [],
        "median_ms": report.timing.median_ms if report.timing else None,
        "host_ms_per_call": report.host_ms_per_call.get("candidate"),
        "eager_ms": base.get("eager"),
        "compile_ms": base.get("torch_compile"),
        "speedup_vs_eager": report.speedup_vs_eager,
        "speedup_vs_compile": report.speedup_vs_compile,
        "max_autotune_ms": base.get("torch_compile_max_autotune"),
        "speedup_vs_max_autotune": report.speedup_vs_max_autotune,
        "pct_sol": report.roofline.pct_sol if report.roofline else None,
        "hardware": report.hardware.name,
        "device": report.device,
        "wall_s": round(report.wall_s, 3),
        "eval_s": (report.phases_s or {}).get("total"),
        # what a re-evaluation of the same source finds cached: CUDA C++ builds, the first call's compiling
        "build_s": round(sum((report.phases_s or {}).get(k, 0.0) for k in ("build", "first_call")), 3),
        "phases_s": report.phases_s or {},
        "resumed": resumed,
        "attempt_id": attempt_id,
        "notes": report.notes,
    }


def build(
    run_dir: Path,
    rows: list[dict],
    *,
    device: str,
    wall_s: float,
    recorded: int | None,
    skipped: dict[str, str] | None = None,
    left: list[str] | None = None,
    workers: int | None = None,
    marks: dict[str, float] | None = None,
) -> dict:
    """The whole report as one JSON-ready dict. ``left``: candidates not evaluated yet (a time limit
    stopped the run); the report is then marked incomplete. ``marks``: seconds after the run began at
    which its candidates were prepared, its workers ready and its evaluations done."""
    hardware = sorted({r["hardware"] for r in rows if r["hardware"] != "unknown"})
    return {
        "run": Path(run_dir).resolve().name,
        "run_dir": str(Path(run_dir).resolve()),
        "device": device,
        "hardware": hardware,
        "workers": workers,
        "wall_s": round(wall_s, 2),
        "marks_s": dict(marks or {}),
        "complete": not left,
        "left": list(left or []),
        "evaluated_now": sum(1 for r in rows if not r["resumed"]),
        "recorded": recorded,
        "not_recorded": skipped or {},
        "timed": metrics.timed(rows),
        "note": None if device == "cuda" else CPU_NOTE,
        "definitions": metrics.__doc__.strip(),
        "summary": metrics.by_level(rows),
        "rows": rows,
    }


def write(run_dir: Path, report: dict) -> tuple[Path, Path]:
    """Write the JSON and markdown reports into the run directory; returns their paths."""
    run_dir = Path(run_dir)
    js, md = run_dir / REPORT_JSON, run_dir / REPORT_MD
    js.write_text(json.dumps(report, indent=1, default=str))
    md.write_text(markdown(report))
    return js, md


def load(path: Path) -> dict:
    """A report from its JSON file or the run directory holding it."""
    path = Path(path)
    if path.is_dir():
        path = path / REPORT_JSON
    try:
        data = json.loads(path.read_text())
    except OSError:
        raise NotFound(f"no suite report at {str(path)!r}", hint="run `skillbase suite run RUN_DIR` first") from None
    except ValueError as e:
        raise InvalidInput(f"{str(path)!r} is not a suite report: {e}") from None
    if "rows" not in data or "summary" not in data:
        raise InvalidInput(f"{str(path)!r} is not a suite report (no rows or summary)")
    return data


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _ms(v: float | None) -> str:
    return "-" if v is None else (f"{v * 1e3:.1f} µs" if v < 1 else f"{v:.3f} ms")


def summary_lines(summary: dict, per_problem: bool = False) -> list[str]:
    """The per-level table, in markdown: over candidates, or over problems (each its best candidate)."""
    ps = [f"{p:g}" for p in metrics.P_VALUES]
    head = (
        ["level", "problems" if per_problem else "candidates", "correct"]
        + [f"fast_{p} eager" for p in ps]
        + [f"fast_{p} compile" for p in ps]
        + ["geomean vs eager", "geomean vs compile"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for level, s in summary.items():
        f = s["per_problem"] if per_problem else s
        n = f["n"] if per_problem else s["candidates"]
        cells = [level, str(n), f"{f['correct']} ({_pct(f['correctness_rate'])})"]
        cells += [_pct(f["fast_p"]["eager"][p]) for p in ps] + [_pct(f["fast_p"]["torch_compile"][p]) for p in ps]
        cells += [_x(f["geomean_speedup"]["eager"]), _x(f["geomean_speedup"]["torch_compile"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(report: dict) -> str:
    """The report for people: what was run, the figures per level, rejections, every candidate."""
    out = [
        f"# Suite run `{report['run']}`",
        "",
        f"Device: {report['device']} ({', '.join(report['hardware']) or 'no device reached'}"
        + (f", {report['workers']} worker(s)" if report.get("workers") else "")
        + "); "
        f"{len(report['rows'])} candidates ({report.get('evaluated_now', 0)} evaluated by this call, the rest "
        f"read back) in {report['wall_s']:.1f} s wall clock"
        + (
            f" (workers ready at {report['marks_s']['workers_ready_s']:.1f} s)"
            if "workers_ready_s" in (report.get("marks_s") or {})
            else ""
        )
        + (f"; {report['recorded']} recorded as attempts" if report.get("recorded") is not None else "; not recorded")
        + ".",
        "",
    ]
    if report.get("left"):
        out += [
            f"**Incomplete**: {len(report['left'])} candidate(s) not evaluated yet (time limit); run the same "
            "command again to go on.",
            "",
        ]
    if report.get("note"):
        out += [report["note"], ""]
    out += [
        "Speedups are the baseline's median device time over the candidate's (CUDA events, L2 flushed); "
        "fast_p counts candidates that are correct and faster than the baseline by more than p, over all "
        "candidates; geometric means are over correct, timed candidates.",
        "",
    ]
    out += summary_lines(report["summary"]) + [""]
    if any(s["problems"] < s["candidates"] for s in report["summary"].values()):
        out += ["Per problem (each problem counted once, by its correct and fastest candidate):", ""]
        out += summary_lines(report["summary"], per_problem=True) + [""]
    rej = report["summary"]["all"]["rejections_by_check"]
    if rej:
        out += ["Failing candidates by check: " + ", ".join(f"`{k}` {v}" for k, v in rej.items()), ""]
    out += [
        "| candidate | task | verdict | failed checks | median | eager | torch.compile | vs eager | vs compile "
        "| % SOL | eval s (of it one-time build) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        sol = "-" if r["pct_sol"] is None else f"{r['pct_sol']:.0f}%"
        ev = "-" if r.get("eval_s") is None else f"{r['eval_s']:.1f}"
        if r.get("eval_s") is not None and r.get("build_s", 0) >= 0.05:
            ev += f" ({r['build_s']:.1f} build)"
        out.append(
            f"| {r['name']} | {r['task']} | {r['verdict']} | {', '.join(r['failed_checks']) or '-'} | "
            f"{_ms(r['median_ms'])} | {_ms(r['eager_ms'])} | {_ms(r['compile_ms'])} | "
            f"{_x(r['speedup_vs_eager'])} | {_x(r['speedup_vs_compile'])} | {sol} | {ev} |"
        )
    if report.get("not_recorded"):
        out += ["", "Not recorded: " + "; ".join(f"{k}: {v}" for k, v in report["not_recorded"].items())]
    return "\n".join(out) + "\n"


def compare(a: dict, b: dict) -> dict:
    """Two reports side by side: the figures per level of each, and per candidate name the
    verdict and speedups of each where either has it."""
    levels = sorted(set(a["summary"]) | set(b["summary"]), key=lambda k: (k == "all", k))
    rows_a = {r["name"]: r for r in a["rows"]}
    rows_b = {r["name"]: r for r in b["rows"]}
    names = list(rows_a) + [n for n in rows_b if n not in rows_a]
    return {
        "a": a["run_dir"],
        "b": b["run_dir"],
        "levels": {lv: {"a": a["summary"].get(lv), "b": b["summary"].get(lv)} for lv in levels},
        "candidates": [{"name": n, "a": _brief(rows_a.get(n)), "b": _brief(rows_b.get(n))} for n in names],
    }


def _brief(row: dict | None) -> dict | None:
    if row is None:
        return None
    return {k: row[k] for k in ("verdict", "median_ms", "speedup_vs_eager", "speedup_vs_compile", "pct_sol")}
