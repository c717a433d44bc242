"""fast_p and the geometric means, recomputed from the rows by a second, independent route."""

from __future__ import annotations

import math
import random

import pytest

from skillbase.suite import metrics


def rows(seed: int, n: int = 40) -> list[dict]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        verdict = rnd.choice(["correct"] * 5 + ["rejected", "incorrect", "runtime_error"])
        timed = verdict == "correct" and rnd.random() > 0.1
        out.append({
            "name": f"c{i}", "level": rnd.choice([1, 2]), "verdict": verdict,
            "failed_checks": rnd.sample(["no_pytorch_fallback", "own_kernel_launched", "matches_reference"],
                                        rnd.randint(1, 2)) if verdict in ("rejected", "incorrect") else [],
            "median_ms": 1.0 if timed else None,
            "speedup_vs_eager": rnd.choice([0.4, 0.5, 0.99, 1.0, 1.01, 1.5, 2.0, 2.5, 3.7]) if timed else None,
            "speedup_vs_compile": rnd.choice([0.3, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0]) if timed else None,
        })
    return out


def recompute(rs: list[dict], key: str, p: float) -> float:
    """KernelBench's definition spelled out: correct and speedup > p, over all rows."""
    return len([r for r in rs if r["verdict"] == "correct" and (r[key] or 0) > p]) / len(rs)


@pytest.mark.parametrize("seed", range(5))
def test_summary_matches_a_recomputation_from_the_rows(seed):
    rs = rows(seed)
    summary = metrics.by_level(rs)
    for level, subset in (("level1", [r for r in rs if r["level"] == 1]),
                          ("level2", [r for r in rs if r["level"] == 2]), ("all", rs)):
        s = summary[level]
        assert s["candidates"] == len(subset)
        assert s["correct"] == sum(r["verdict"] == "correct" for r in subset)
        for base, key in (("eager", "speedup_vs_eager"), ("torch_compile", "speedup_vs_compile")):
            for p in (0, 0.5, 1, 1.5, 2):
                assert s["fast_p"][base][f"{p:g}"] == pytest.approx(recompute(subset, key, p))
            logs = [math.log(r[key]) for r in subset if r["verdict"] == "correct" and r[key]]
            assert s["geomean_speedup"][base] == pytest.approx(math.exp(sum(logs) / len(logs)))
        failing = [r for r in subset if r["verdict"] in ("rejected", "incorrect")]
        for check, count in s["rejections_by_check"].items():
            assert count == sum(check in r["failed_checks"] for r in failing)


def test_fast_p_counts_slow_and_failing_candidates_in_the_denominator():
    rs = [{"verdict": "correct", "median_ms": 1, "speedup_vs_eager": 2.0, "speedup_vs_compile": 1.0},
          {"verdict": "correct", "median_ms": 1, "speedup_vs_eager": 0.5, "speedup_vs_compile": 0.5},
          {"verdict": "rejected", "median_ms": None, "speedup_vs_eager": None, "speedup_vs_compile": None},
          {"verdict": "incorrect", "median_ms": None, "speedup_vs_eager": None, "speedup_vs_compile": None}]
    assert metrics.fast_p(rs, "eager", 1.0) == 0.25
    assert metrics.fast_p(rs, "eager", 0.0) == 0.5
    assert metrics.fast_p(rs, "torch_compile", 1.0) == 0.0  # equal is not faster
    assert metrics.geomean_speedup(rs, "eager") == pytest.approx(1.0)


def test_an_untimed_run_has_no_fast_p():
    rs = [{"verdict": "correct", "median_ms": None, "speedup_vs_eager": None, "speedup_vs_compile": None}]
    s = metrics.summarize(rs)
    assert s["correctness_rate"] == 1.0
    assert s["fast_p"]["eager"]["1"] is None and s["geomean_speedup"]["eager"] is None


@pytest.mark.parametrize("seed", range(3))
def test_per_problem_figures_score_each_problem_once_by_its_best_candidate(seed):
    rnd = random.Random(seed)
    rs = rows(seed, 60)
    for r in rs:
        r["problem"] = rnd.randint(1, 12)
    s = metrics.summarize(rs)
    problems: dict[tuple, list[dict]] = {}
    for r in rs:
        problems.setdefault((r["level"], r["problem"]), []).append(r)
    assert s["problems"] == len(problems)
    best = []
    for cands in problems.values():
        correct = [r for r in cands if r["verdict"] == "correct"]
        timed = [r for r in correct if r["speedup_vs_eager"] is not None]
        best.append(max(timed, key=lambda r: r["speedup_vs_eager"]) if timed else (correct or cands)[0])
    pp = s["per_problem"]
    assert pp["n"] == len(problems) and pp["correct"] == sum(any(r["verdict"] == "correct" for r in c)
                                                             for c in problems.values())
    for p in (0, 0.5, 1, 1.5, 2):
        assert pp["fast_p"]["eager"][f"{p:g}"] == pytest.approx(recompute(best, "speedup_vs_eager", p))
    logs = [math.log(r["speedup_vs_eager"]) for r in best if r["verdict"] == "correct" and r["speedup_vs_eager"]]
    assert pp["geomean_speedup"]["eager"] == pytest.approx(math.exp(sum(logs) / len(logs)))


def test_one_candidate_per_problem_scores_the_same_both_ways():
    rs = rows(7, 30)
    for i, r in enumerate(rs):
        r["problem"] = i
    s = metrics.summarize(rs)
    assert s["per_problem"]["fast_p"] == s["fast_p"] and s["per_problem"]["correct"] == s["correct"]
