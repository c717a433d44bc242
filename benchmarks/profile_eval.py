"""Does a profile make suggest better? The built-in lineages replayed leave-one-task-out
(benchmarks/retrieval_eval.py's replay), suggest with profile states against the roofline alone.

    .venv/bin/python benchmarks/profile_eval.py --profiles $OUT/profiles.json --out /tmp/profile_eval.json

For each built-in task whose measured lineage has a step faster than its parent: the store holds
every other task's H100 lineage and the seed skills (without the evidence measured on the left-out
task); the profiles of the other tasks' attempts (from the GPU suite's `profile` part) are stored
with them, so the graph's profile-state contexts hold what each technique was worth in each state.
From the task's naive attempt, suggest ranks 3 techniques, once from the roofline alone
(``use_profiles=False``) and once with the naive solution's profile. Reported per arm: top-1 and
top-3 hit (a technique of the step with the largest measured gain), and regret: ln(best step's gain)
minus ln(the measured gain of the step that applied the top-1 technique; 1.0 when no step did).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

ARMS = ("roofline", "profile")


def load_profiles(path: Path) -> dict[tuple[str, str], dict]:
    """(task, solution) -> ProfileReport JSON of the built-in solutions profiled with counters."""
    out = {}
    for r in json.loads(path.read_text())["rows"]:
        if r.get("kind") == "builtin" and r.get("report", {}).get("available"):
            task, sol = r["name"].split("/", 1)
            out[task, sol] = r["report"]
    return out


def score(top: list[str], truth: set[str], step_gains: dict[str, float], best_gain: float) -> dict[str, float]:
    """Top-1 / top-3 hit and regret of one ranking against the task's measured steps."""
    got = step_gains.get(top[0], 1.0) if top else 1.0
    return {"top1": float(bool(set(top[:1]) & truth)), "top3": float(bool(set(top[:3]) & truth)),
            "regret": math.log(best_gain) - math.log(max(got, 1e-9))}


def replay(tasks, attempts, lessons, profiles: dict[tuple[str, str], dict], workdir: Path) -> dict:
    """The leave-one-task-out replay, both arms; ``attempts``/``lessons`` as measured_lineages returns them."""
    from retrieval_eval import ledger_retriever

    from skillbase.models import ProfileReport

    by_task = defaultdict(list)
    for a in attempts:
        by_task[a.task].append(a)
    cases, per_arm = [], {arm: defaultdict(list) for arm in ARMS}
    for name, atts in sorted(by_task.items()):
        steps = [e for e in lessons if e.task == name and e.gain]
        if not steps or max(e.gain for e in steps) <= 1.02:
            continue
        best = max(steps, key=lambda e: e.gain)
        step_gains: dict[str, float] = {}
        for e in steps:
            for t in e.techniques:
                step_gains[t] = max(step_gains.get(t, 0.0), e.gain)
        store, retriever = ledger_retriever(workdir / f"replay-{name}", evidence_except={name})
        try:
            store.ledger.record_attempts([a for a in attempts if a.task != name])
            for info in tasks.values():
                store.ledger.put_task(info)
            for a in attempts:
                sol = a.id.removeprefix(f"att_h100_{a.task}_")
                if a.task != name and (a.task, sol) in profiles:
                    store.ledger.record_profile(a.id, ProfileReport.model_validate(profiles[a.task, sol]))
            root = next(a for a in atts if a.parent_id is None)
            sol = root.id.removeprefix(f"att_h100_{name}_")
            prof = ProfileReport.model_validate(profiles[name, sol]) if (name, sol) in profiles else None
            row = {"task": name, "truth": sorted(best.techniques), "best_gain": best.gain,
                   "state": prof.state if prof else None}
            for arm in ARMS:
                top = [s.technique for s in retriever.suggest(
                    task=tasks[name], attempts=[root], k=3, rule="ei", profile=prof if arm == "profile" else None,
                    use_profiles=arm == "profile")]
                m = score(top, set(best.techniques), step_gains, best.gain)
                row[arm] = {"top": top, **m}
                for key, v in m.items():
                    per_arm[arm][key].append(v)
            cases.append(row)
        finally:
            retriever.close()
            store.close()
    return {"cases": cases, "arms": {arm: {k: round(statistics.mean(v), 4) for k, v in r.items()}
                                     for arm, r in per_arm.items()},
            "with_profile": sum(1 for c in cases if c["state"])}


def markdown(result: dict) -> str:
    """The table for docs/benchmarks.md."""
    lines = ["| arm | top-1 | top-3 | regret (ln gain) |", "|---|---|---|---|"]
    for arm, m in result["arms"].items():
        lines.append(f"| {arm} | {m['top1']:.2f} | {m['top3']:.2f} | {m['regret']:.3f} |")
    lines.append(f"\n{len(result['cases'])} tasks replayed, {result['with_profile']} with a profile of their naive "
                 "solution.")
    return "\n".join(lines)


def main() -> int:
    from retrieval_eval import load_tasks, measured_lineages

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", type=Path, required=True, help="profiles.json from the GPU suite's profile part")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tasks = load_tasks()
    attempts, lessons = measured_lineages(tasks)
    with tempfile.TemporaryDirectory(prefix="sb-profile-eval-") as work:
        result = replay(tasks, attempts, lessons, load_profiles(args.profiles), Path(work))
    print(markdown(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
        args.out.with_suffix(".md").write_text(markdown(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
