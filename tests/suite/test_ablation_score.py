"""The ablation's scorer recomputes each figure from records the way README.md defines it."""

import json
import math

import pytest

from benchmarks.ablation import score


def _row(arm, level, problem, rnd, verdict, ms):
    return {"arm": arm, "level": level, "problem": problem, "round": rnd, "verdict": verdict, "median_ms": ms}


@pytest.fixture
def records(tmp_path):
    # Three scored problems (eager 10 ms, torch.compile 8 ms each) and one dropped.
    problems = [{"level": 2, "problem": p, "eager_ms": 10.0, "compile_ms": 8.0} for p in (21, 25, 29)]
    problems.append({"level": 3, "problem": 1, "eager_ms": None, "compile_ms": None})
    (tmp_path / "problems.json").write_text(json.dumps(
        {"problems": problems, "dropped": [{"level": 3, "problem": 1, "reason": "needs einops"}]}))
    rows = [
        # on: 21 correct in round 1 (5 ms) then faster in round 3 (4 ms); 25 correct in round 2 (8 ms);
        # 29 never correct.
        _row("on", 2, 21, 1, "correct", 5.0), _row("on", 2, 21, 2, "incorrect", None),
        _row("on", 2, 21, 3, "correct", 4.0),
        _row("on", 2, 25, 1, "rejected", None), _row("on", 2, 25, 2, "correct", 8.0),
        _row("on", 2, 29, 1, "incorrect", None),
        # off: 21 correct in round 2 (8 ms); 25 correct in round 1 (8.1 ms); 29 correct in round 4 (20 ms,
        # slower than eager: its best kernel still counts).
        _row("off", 2, 21, 2, "correct", 8.0), _row("off", 2, 25, 1, "correct", 8.1),
        _row("off", 2, 29, 4, "correct", 20.0),
        _row("on", 3, 1, 1, "correct", 1.0),  # a dropped problem is never scored
    ]
    (tmp_path / "attempts.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    calls = [
        {"arm": "on", "level": 2, "problem": 21, "round": 1, "command": "recall", "args": ["recall", "p.py"],
         "at": "2026-12-07T10:00:10+00:00", "seconds": 10.0},
        {"arm": "on", "level": 2, "problem": 21, "round": 1, "command": "bench",
         "args": ["bench", "p.py", "c.py", "--device", "cpu"], "at": "2026-12-07T10:05:00+00:00", "seconds": 30.0},
        {"arm": "on", "level": 2, "problem": 21, "round": 2, "command": "bench",
         "args": ["bench", "p.py", "c.py", "--device", "cpu"], "at": "2026-12-07T11:01:00+00:00", "seconds": 60.0},
    ]
    (tmp_path / "calls.jsonl").write_text("\n".join(json.dumps(c) for c in calls) + "\n")
    return tmp_path


def test_per_arm_figures(records):
    s = score.score(score.load(records))
    on, off = s["arms"]["on"]["all"], s["arms"]["off"]["all"]
    assert on["problems"] == off["problems"] == 3
    assert (on["correct"], off["correct"]) == (2, 3)
    # rounds to first correct: on 1, 2, never (5) -> 2; off 2, 1, 4 -> 2
    assert on["median_rounds_to_first_correct"] == 2 and off["median_rounds_to_first_correct"] == 2
    # vs torch.compile: on 8/4, 8/8, and 8/10 (no correct kernel: the eager reference); off 8/8, 8/8.1, 8/20
    assert on["geomean_vs_compile"] == pytest.approx((2.0 * 1.0 * 0.8) ** (1 / 3))
    assert off["geomean_vs_compile"] == pytest.approx((1.0 * (8 / 8.1) * 0.4) ** (1 / 3))
    assert on["geomean_vs_compile_correct_only"] == pytest.approx(math.sqrt(2.0 * 1.0))
    assert on["geomean_vs_eager"] == pytest.approx((2.5 * 1.25 * 1.0) ** (1 / 3))
    # fast_1 vs torch.compile needs strictly faster than it: on only 21; off none
    assert on["fast1_vs_compile"] == pytest.approx(1 / 3) and off["fast1_vs_compile"] == 0
    assert s["arms"]["on"]["level2"]["problems"] == 3 and "level3" not in s["arms"]["on"]


def test_paired_comparison_and_bar(records):
    s = score.score(score.load(records))
    p = s["paired"]
    # ratios off/on: 8/4 = 2 (win), 8.1/8 = 1.0125 (tie), 20/10 = 2 (win)
    assert (p["wins"], p["ties"], p["losses"]) == (2, 1, 0)
    assert p["geomean_on_over_off"] == pytest.approx((2 * 1.0125 * 2) ** (1 / 3))
    assert p["ahead_or_tied"] == 1.0
    assert 0 < p["wilcoxon_p"] <= 1
    assert s["bar"]["on_over_off_geomean>=1.15"] is True
    assert s["bar"]["correct_rate_not_lower"] is False  # 2 of 3 against 3 of 3


def test_rounds_limit_scores_the_figures_as_they_stood(records):
    s = score.score(score.load(records), rounds=1)
    on, off = s["arms"]["on"]["all"], s["arms"]["off"]["all"]
    assert (on["correct"], off["correct"]) == (1, 1)
    assert on["geomean_vs_compile"] == pytest.approx((8 / 5 * 0.8 * 0.8) ** (1 / 3))


def test_effort_counts_calls_and_wall_time(records):
    e = score.score(score.load(records))["arms"]["on"]["effort"]
    assert e["problems"] == 1 and e["median_calls"] == 3 and e["median_cpu_checks"] == 2
    # round 1: from 10:00:00 (first call's start) to 10:05:00; round 2: 60 s
    assert e["median_wall_min"] == pytest.approx(6.0)
    assert "Wilcoxon" in score.render(score.score(score.load(records)))


def test_wilcoxon_matches_a_hand_computed_case():
    # all positive differences of distinct sizes, n = 5: exact two-sided p = 2 / 2**5
    assert score.wilcoxon_p([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(2 / 32)
    assert score.wilcoxon_p([0.0, 0.0]) == 1.0
