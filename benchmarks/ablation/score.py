"""Every figure of the memory ablation, recomputed from its records.

    python -m benchmarks.ablation.score --records benchmarks/ablation/records/A [--json OUT] [--rounds K]

Reads ``problems.json`` (the set, its baselines, the problems dropped), ``attempts.jsonl`` (one row per
GPU-timed candidate) and ``calls.jsonl`` (every ``./sb`` call) and prints per arm, per level and overall:
correct rate, rounds to first correct, geomean speedup of the best kernel over torch.compile and over
eager, fast_1 vs torch.compile; then the paired on/off comparison (wins, ties, losses, Wilcoxon
signed-rank p), the agents' effort, and the issue's bar. Definitions: README.md beside this file.
``--rounds K`` scores only rounds 1..K (the figures as they stood after round K).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROUNDS = 4
TIE = 1.02  # a paired ratio within this of 1 is a tie: the suite's run-to-run spread is under 2 %
ARMS = ("on", "off")


@dataclass
class Problem:
    """One problem's outcome in one arm."""

    level: int
    problem: int
    eager_ms: float
    compile_ms: float
    best_ms: float | None = None  # fastest correct GPU-timed candidate
    first_correct: int | None = None  # its round, the first correct one
    submitted: int = 0
    correct_candidates: int = 0
    best_round: int | None = None

    @property
    def time_ms(self) -> float:
        """What the user runs: the best kernel, or the reference in eager mode when there is none."""
        return self.best_ms if self.best_ms is not None else self.eager_ms

    def vs(self, baseline: str) -> float:
        return (self.eager_ms if baseline == "eager" else self.compile_ms) / self.time_ms


@dataclass
class Records:
    problems: list[dict]
    dropped: list[dict]
    attempts: list[dict]
    calls: list[dict] = field(default_factory=list)


def load(folder: Path) -> Records:
    """The records of one set."""
    folder = Path(folder)
    meta = json.loads((folder / "problems.json").read_text())

    def jsonl(name: str) -> list[dict]:
        path = folder / name
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []

    return Records(meta["problems"], meta.get("dropped", []), jsonl("attempts.jsonl"), jsonl("calls.jsonl"))


def outcomes(rec: Records, arm: str, rounds: int = ROUNDS) -> dict[tuple[int, int], Problem]:
    """Each scored problem's outcome in ``arm`` over rounds 1..``rounds``."""
    dropped = {(d["level"], d["problem"]) for d in rec.dropped}
    out: dict[tuple[int, int], Problem] = {}
    for p in rec.problems:
        key = (p["level"], p["problem"])
        if key in dropped or p.get("eager_ms") is None or p.get("compile_ms") is None:
            continue
        out[key] = Problem(p["level"], p["problem"], float(p["eager_ms"]), float(p["compile_ms"]))
    for row in sorted(rec.attempts, key=lambda r: r["round"]):
        got = out.get((row["level"], row["problem"]))
        if got is None or row["arm"] != arm or not 1 <= row["round"] <= rounds:
            continue
        got.submitted += 1
        if row["verdict"] != "correct" or row.get("median_ms") is None:
            continue
        got.correct_candidates += 1
        if got.first_correct is None:
            got.first_correct = row["round"]
        if got.best_ms is None or row["median_ms"] < got.best_ms:
            got.best_ms, got.best_round = float(row["median_ms"]), row["round"]
    return out


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(probs: list[Problem], rounds: int = ROUNDS) -> dict:
    """The per-arm figures over a list of problems."""
    n = len(probs)
    correct = [p for p in probs if p.best_ms is not None]
    firsts = [p.first_correct if p.first_correct is not None else rounds + 1 for p in probs]
    return {
        "problems": n,
        "correct": len(correct),
        "correct_rate": len(correct) / n if n else None,
        "median_rounds_to_first_correct": statistics.median(firsts) if firsts else None,
        "geomean_vs_compile": geomean([p.vs("compile") for p in probs]),
        "geomean_vs_eager": geomean([p.vs("eager") for p in probs]),
        "geomean_vs_compile_correct_only": geomean([p.vs("compile") for p in correct]),
        "fast1_vs_compile": sum(1 for p in correct if p.best_ms < p.compile_ms) / n if n else None,
        "fast1_vs_eager": sum(1 for p in correct if p.best_ms < p.eager_ms) / n if n else None,
        "candidates": sum(p.submitted for p in probs),
        "correct_candidates": sum(p.correct_candidates for p in probs),
    }


def wilcoxon_p(log_ratios: list[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p on the paired log ratios, zero differences dropped."""
    nonzero = [x for x in log_ratios if x != 0.0]
    if not nonzero:
        return 1.0 if log_ratios else None
    from scipy.stats import wilcoxon

    return float(wilcoxon(nonzero, zero_method="wilcox", alternative="two-sided").pvalue)


def paired(on: dict, off: dict) -> dict:
    """Problem by problem: on's speed over off's (off's time / on's time)."""
    keys = sorted(set(on) & set(off))
    ratios = {k: off[k].time_ms / on[k].time_ms for k in keys}
    wins = sum(1 for r in ratios.values() if r > TIE)
    losses = sum(1 for r in ratios.values() if r < 1 / TIE)
    logs = [math.log(r) for r in ratios.values()]
    return {
        "problems": len(keys), "wins": wins, "ties": len(keys) - wins - losses, "losses": losses,
        "ahead_or_tied": (len(keys) - losses) / len(keys) if keys else None,
        "geomean_on_over_off": geomean(list(ratios.values())),
        "wilcoxon_p": wilcoxon_p(logs),
        "per_problem": [{"level": k[0], "problem": k[1], "on_ms": on[k].time_ms, "off_ms": off[k].time_ms,
                         "on_correct": on[k].best_ms is not None, "off_correct": off[k].best_ms is not None,
                         "ratio": ratios[k]} for k in keys],
    }


def effort(rec: Records, arm: str) -> dict:
    """``./sb`` calls per problem and the agents' wall time (first to last call of each round, summed)."""
    calls = [c for c in rec.calls if c["arm"] == arm]
    by_problem: dict[tuple, list[dict]] = {}
    for c in calls:
        by_problem.setdefault((c["level"], c["problem"]), []).append(c)
    if not by_problem:
        return {"problems": 0}

    def count(rows, command, cpu=False):
        return sum(1 for r in rows if r["command"] == command and (not cpu or "cpu" in r["args"]))

    def wall(rows) -> float:
        total = 0.0
        for rnd in {r["round"] for r in rows}:
            these = [r for r in rows if r["round"] == rnd]
            starts = [datetime.fromisoformat(r["at"]).timestamp() - r["seconds"] for r in these]
            ends = [datetime.fromisoformat(r["at"]).timestamp() for r in these]
            total += max(ends) - min(starts)
        return total

    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    rows = list(by_problem.values())
    return {"problems": len(rows),
            "median_calls": med([len(r) for r in rows]),
            "median_cpu_checks": med([count(r, "bench", cpu=True) for r in rows]),
            "median_recalls": med([count(r, "recall") for r in rows]),
            "median_suggests": med([count(r, "suggest") for r in rows]),
            "median_wall_min": med([wall(r) / 60 for r in rows])}


def used_recalled(rec: Records, arm: str, rounds: int) -> dict:
    """How often submissions cite recalled items, and of which kind."""
    rows = [r for r in rec.attempts if r["arm"] == arm and 1 <= r["round"] <= rounds]
    kinds: dict[str, int] = {}
    for r in rows:
        for u in r.get("used") or []:
            kinds[u.split(":", 1)[0]] = kinds.get(u.split(":", 1)[0], 0) + 1
    return {"submissions": len(rows), "citing_any": sum(1 for r in rows if r.get("used")), "by_kind": kinds}


def score(rec: Records, rounds: int = ROUNDS) -> dict:
    """Every figure, per arm, per level and overall, the paired comparison and the bar."""
    arms = {arm: outcomes(rec, arm, rounds) for arm in ARMS}
    levels = sorted({k[0] for k in arms["on"]})
    per_arm = {}
    for arm, got in arms.items():
        per_arm[arm] = {"all": summarize(list(got.values()), rounds),
                        **{f"level{lv}": summarize([p for k, p in got.items() if k[0] == lv], rounds)
                           for lv in levels},
                        "effort": effort(rec, arm), "used": used_recalled(rec, arm, rounds)}
    pair = paired(arms["on"], arms["off"])
    on, off = per_arm["on"]["all"], per_arm["off"]["all"]
    bar = {
        "on_over_off_geomean>=1.15": _at_least(pair["geomean_on_over_off"], 1.15),
        "on_ahead_or_tied>=70%": _at_least(pair["ahead_or_tied"], 0.70),
        "correct_rate_not_lower": None if on["correct_rate"] is None else on["correct_rate"] >= off["correct_rate"],
        "median_rounds_to_first_correct_not_higher":
            None if on["median_rounds_to_first_correct"] is None
            else on["median_rounds_to_first_correct"] <= off["median_rounds_to_first_correct"],
        "on_geomean_vs_compile>=1.25": _at_least(on["geomean_vs_compile"], 1.25),
    }
    return {"rounds": rounds, "dropped": rec.dropped, "arms": per_arm, "paired": pair, "bar": bar}


def _at_least(v: float | None, bar: float) -> bool | None:
    return None if v is None else v >= bar


def render(s: dict) -> str:
    """The figures as Markdown tables."""
    x = lambda v: "-" if v is None else f"{v:.2f}x"  # noqa: E731
    pct = lambda v: "-" if v is None else f"{v:.0%}"  # noqa: E731
    lines = [f"Rounds scored: 1-{s['rounds']}; dropped problems: {len(s['dropped'])}", "",
             "| arm | scope | problems | correct | median rounds to first correct | geomean vs torch.compile "
             "| geomean vs eager | geomean vs compile (correct only) | fast_1 vs compile |",
             "|---|---|---|---|---|---|---|---|---|"]
    for arm, figs in s["arms"].items():
        for scope, f in figs.items():
            if scope in ("effort", "used"):
                continue
            lines.append(f"| {arm} | {scope} | {f['problems']} | {f['correct']} ({pct(f['correct_rate'])}) "
                         f"| {f['median_rounds_to_first_correct']} | {x(f['geomean_vs_compile'])} "
                         f"| {x(f['geomean_vs_eager'])} | {x(f['geomean_vs_compile_correct_only'])} "
                         f"| {pct(f['fast1_vs_compile'])} |")
    p = s["paired"]
    pval = "-" if p["wilcoxon_p"] is None else f"{p['wilcoxon_p']:.3g}"
    lines += ["", f"Paired (on over off, {p['problems']} problems): {p['wins']} wins, {p['ties']} ties, "
                  f"{p['losses']} losses (ties within {TIE:.2f}x); geomean {x(p['geomean_on_over_off'])}; "
                  f"Wilcoxon signed-rank p = {pval}",
              "", "| arm | calls | CPU checks | recalls | suggests | wall min | submissions citing recalled items |",
              "|---|---|---|---|---|---|---|"]
    for arm, figs in s["arms"].items():
        e, u = figs["effort"], figs["used"]
        lines.append(f"| {arm} | {e.get('median_calls', '-')} | {e.get('median_cpu_checks', '-')} "
                     f"| {e.get('median_recalls', '-')} | {e.get('median_suggests', '-')} "
                     f"| {'-' if e.get('median_wall_min') is None else round(e['median_wall_min'], 1)} "
                     f"| {u['citing_any']}/{u['submissions']} |")
    lines += ["", "Bar: " + "; ".join(f"{k} {'-' if v is None else ('met' if v else 'not met')}"
                                      for k, v in s["bar"].items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=Path, required=True, help="records/<set> folder")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="score rounds 1..K only")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args(argv)
    s = score(load(args.records), args.rounds)
    print(render(s))
    if args.json:
        args.json.write_text(json.dumps(s, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
