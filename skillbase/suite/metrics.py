"""The run's figures, each defined once here and computed only from the per-candidate rows.

A row is the plain dict ``report.row_of`` writes for one candidate (verdict,
failed checks, median, speedups). Definitions, as KernelBench's score uses them:

- correctness rate: correct candidates / candidates;
- fast_p against a baseline: candidates that are correct AND faster than the
  baseline by more than p (speedup > p), over ALL candidates;
- geometric-mean speedup: over the correct candidates that were timed;
- per problem (``best_per_problem``): the same figures over problems instead of
  candidates, each problem standing for its best candidate (correct and fastest,
  else any), so a run with several candidates per problem (samples, or steps of a
  lineage) is scored once per problem, as KernelBench scores a run. With one
  candidate per problem the two are equal.

Speedups are the baseline's median device time over the candidate's (CUDA events,
L2 flushed). Without timing (CPU runs) fast_p and the geometric means are None.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable

P_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0)
BASELINES = {
    "eager": "speedup_vs_eager",
    "torch_compile": "speedup_vs_compile",
    "torch_compile_max_autotune": "speedup_vs_max_autotune",
}
FAILING = ("rejected", "incorrect")


def _correct(row: dict) -> bool:
    return row.get("verdict") == "correct"


def timed(rows: list[dict]) -> bool:
    """Whether any row carries a timing (a CPU run has none)."""
    return any(r.get("median_ms") is not None for r in rows)


def fast_p(rows: list[dict], baseline: str, p: float) -> float | None:
    """Share of ALL rows that are correct and faster than ``baseline`` by more than ``p``."""
    if not rows or not timed(rows):
        return None
    key = BASELINES[baseline]
    hits = sum(1 for r in rows if _correct(r) and r.get(key) is not None and r[key] > p)
    return hits / len(rows)


def geomean_speedup(rows: list[dict], baseline: str) -> float | None:
    """Geometric mean of the speedup over ``baseline`` across correct, timed rows."""
    key = BASELINES[baseline]
    values = [r[key] for r in rows if _correct(r) and r.get(key)]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def rejections(rows: Iterable[dict]) -> dict[str, int]:
    """How many failing candidates each check failed (a candidate counts once per check)."""
    counts: Counter[str] = Counter()
    for r in rows:
        if r.get("verdict") in FAILING:
            counts.update(set(r.get("failed_checks") or []))
    return dict(counts.most_common())


def problem_of(row: dict) -> str:
    """The problem a row answers: its KernelBench level and number, else its task."""
    if row.get("problem") is not None:
        return f"{row.get('level')}/{row['problem']}"
    return str(row.get("task") or row.get("name"))


def _rank(row: dict) -> tuple:
    """Better first: correct, then timed, then the largest speedup over eager."""
    speedup = row.get("speedup_vs_eager")
    return (not _correct(row), speedup is None, -(speedup or 0.0))


def best_per_problem(rows: list[dict]) -> list[dict]:
    """One row per problem: its correct, fastest candidate, else its first."""
    best: dict[str, dict] = {}
    for r in rows:
        key = problem_of(r)
        if key not in best or _rank(r) < _rank(best[key]):
            best[key] = r
    return list(best.values())


def figures(rows: list[dict]) -> dict:
    """Correctness, fast_p and geometric means of a set of rows."""
    n = len(rows)
    correct = sum(1 for r in rows if _correct(r))
    return {
        "n": n,
        "correct": correct,
        "correctness_rate": correct / n if n else None,
        "fast_p": {b: {f"{p:g}": fast_p(rows, b, p) for p in P_VALUES} for b in BASELINES},
        "geomean_speedup": {b: geomean_speedup(rows, b) for b in BASELINES},
    }


def summarize(rows: list[dict]) -> dict:
    """Every figure of a set of rows (one level, or the whole run): over candidates, and over
    problems (``per_problem``)."""
    f = figures(rows)
    return {
        "candidates": f.pop("n"),
        **f,
        "verdicts": dict(Counter(r.get("verdict") for r in rows).most_common()),
        "rejections_by_check": rejections(rows),
        "problems": len({problem_of(r) for r in rows}),
        "per_problem": figures(best_per_problem(rows)),
    }


def by_level(rows: list[dict]) -> dict[str, dict]:
    """``summarize`` per level (key ``level1``..., ``other`` for tasks without one) and for ``all``."""
    levels: dict[str, list[dict]] = {}
    for r in rows:
        levels.setdefault(f"level{r['level']}" if r.get("level") else "other", []).append(r)
    out = {k: summarize(v) for k, v in sorted(levels.items())}
    out["all"] = summarize(rows)
    return out
