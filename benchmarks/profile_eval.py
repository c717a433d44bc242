"""Does a profile make suggest better? The built-in lineages replayed leave-one-task-out
(benchmarks/retrieval_eval.py's replay), suggest with profile states against the roofline alone.

    .venv/bin/python -m benchmarks.profile_eval --profiles $OUT/profiles.json --out /tmp/profile_eval.json

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
import random
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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
    from benchmarks.retrieval_eval import ledger_retriever

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


# -- a synthetic world where the bottleneck state decides what pays ------------------------------------

STATE_CLASSES = [("elementwise", "fp32", "large"), ("reduction", "fp32", "large"), ("softmax", "fp32", "large"),
                 ("layout", "fp32", "medium"), ("norm", "fp32", "medium"), ("matmul", "fp16", "large")]
STATE_METRICS = {
    "uncoalesced": {"ld_efficiency_pct": 12.5, "ld_sectors_per_request": 32.0, "dram_pct": 38.0},
    "low-occupancy": {"achieved_occupancy_pct": 17.0, "occupancy_limiter": "registers"},
    "tail-effect": {"waves": 1.14, "tail_idle_pct": 43.0},
    "dram-bound": {"dram_pct": 91.0},
    "register-spills": {"spill_bytes": 4096.0, "local_bytes": 4e9},
    "latency-bound": {"dram_pct": 20.0, "sm_pct": 15.0, "top_stall_pct": 70.0},
}


class _Zero(dict):
    """A technique outside the family's candidates (a suggestion may name one) pays nothing here."""

    def __missing__(self, key):
        return 0.0


class _Fail(dict):
    def __missing__(self, key):
        return 0.2


class StateWorld:
    """Ground truth per (family, state): in each state two techniques pay a lot (one the diagnosis names
    for that state, chosen at random among them, and one drawn from the family's others), the rest a little
    or nothing; a task class mixes states, so the roofline alone sees an average. Invented numbers."""

    def __init__(self, retriever, seed: int):
        from benchmarks.retrieval_eval import _synthetic_task, candidate_techniques

        from skillbase.toolchain.diagnose import TECHNIQUES

        self.rng = random.Random(seed)
        self.cands: dict[str, list[str]] = {}
        self.mu: dict[tuple[str, str, str], float] = {}
        self.states: dict[str, list[str]] = {}
        for fam, dtype, regime in STATE_CLASSES:
            cand = candidate_techniques(retriever, _synthetic_task(f"probe_{fam}", fam, dtype, regime))
            self.cands[fam] = cand
            self.states[fam] = self.rng.sample(sorted(STATE_METRICS), 3)
            base = {t: self.rng.gauss(0.0, 0.06) for t in cand}
            for st in self.states[fam]:
                named = [t for t in TECHNIQUES[st] if t in cand] or cand
                keys = {self.rng.choice(named), self.rng.choice(cand)}
                for t in cand:
                    self.mu[fam, st, t] = base[t] + (self.rng.gauss(0.4, 0.1) if t in keys else 0.0)
        self.fail = _Fail({t: self.rng.uniform(0.05, 0.35) for t in sorted({t for c in self.cands.values() for t in c})})

    def task_mu(self, fam: str, state: str, task: str) -> dict[str, float]:
        r = random.Random(task)
        return _Zero({t: self.mu[fam, state, t] + r.gauss(0.0, 0.05) for t in self.cands[fam]})


def state_profile(task: str, state: str):
    """A ProfileReport carrying only a state, its metrics and the diagnosis's techniques."""
    from skillbase.models import ProfileReport
    from skillbase.toolchain.diagnose import TECHNIQUES

    return ProfileReport(task=task, solution_hash="synthetic", device="synthetic", available=True, state=state,
                         metrics=dict(STATE_METRICS[state]), techniques=list(TECHNIQUES[state]),
                         diagnosis=f"synthetic profile: {state}")


class ArmPolicy:
    """suggest (expected improvement), from the roofline alone or with the task's profile."""

    def __init__(self, arm: str, profile=None):
        self.name, self.profile = arm, profile

    def ranked(self, ctx, k):
        return [s.technique for s in ctx.retriever.suggest(
            task=ctx.task, attempts=ctx.attempts, k=k, rule="ei", profile=self.profile,
            use_profiles=self.name == "profile")]


def state_world_eval(workdir: Path, worlds: int = 2, history_tasks: int = 8, tests: int = 3, horizon: int = 12) -> dict:
    """Top-1/top-3 of the truly best technique and session regret, both arms, in StateWorld."""
    from benchmarks.retrieval_eval import POPULAR, SessionContext, _attempt, _synthetic_task, apply_step, ledger_retriever, session

    hit = {arm: {"top1": [], "top3": []} for arm in ARMS}
    regret: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for w in range(worlds):
        store, retriever = ledger_retriever(workdir / f"state-world-{w}", evidence_except=None)
        world, rng = StateWorld(retriever, 3000 + w), random.Random(4000 + w)
        n = 0
        for fam, dtype, regime in STATE_CLASSES:
            for i in range(history_tasks):
                state = world.states[fam][i % 3]
                task = _synthetic_task(f"hist_{fam}_{i}_{w}", fam, dtype, regime)
                mu = world.task_mu(fam, state, task.name)
                root = _attempt(task, None, [], 1.0, "correct", n)
                batch, best = [root], root
                for _ in range(rng.randint(3, 6)):
                    opts = [t for t in world.cands[fam] if t not in best.techniques]
                    tech = rng.choices(opts, weights=[POPULAR.get(t, 1.0) * math.exp(mu[t] / 0.5) for t in opts])[0]
                    n += 1
                    a, _ = apply_step(world, rng, task, mu, best, tech, n)
                    batch.append(a)
                    if a.verdict == "correct" and a.median_ms < best.median_ms:
                        best = a
                store.ledger.record_attempts(batch)
                store.ledger.record_profile(root.id, state_profile(task.name, state))
        for fam, dtype, regime in STATE_CLASSES:
            for i in range(tests):
                state = world.states[fam][i % 3]
                task = _synthetic_task(f"test_{fam}_{i}_{w}", fam, dtype, regime)
                mu = world.task_mu(fam, state, task.name)
                best_t = max(mu, key=mu.get)
                root = _attempt(task, None, [], 1.0, "correct", 0)
                for arm in ARMS:
                    pol = ArmPolicy(arm, state_profile(task.name, state) if arm == "profile" else None)
                    top = pol.ranked(SessionContext(retriever, task, [root], world.cands[fam], random.Random(i)), 3)
                    hit[arm]["top1"].append(best_t in top[:1])
                    hit[arm]["top3"].append(best_t in top[:3])
                    regret[arm].append(session(world, retriever, pol, task, mu, horizon, seed=31 * i + 7 * w)[0])
        retriever.close()
        store.close()
    return {"worlds": worlds, "test_tasks": worlds * len(STATE_CLASSES) * tests, "horizon": horizon,
            "arms": {arm: {"top1": round(statistics.mean(hit[arm]["top1"]), 4),
                           "top3": round(statistics.mean(hit[arm]["top3"]), 4),
                           "regret": round(statistics.mean(regret[arm]), 4)} for arm in ARMS}}


def markdown_arms(arms: dict) -> str:
    lines = ["| arm | top-1 | top-3 | regret (ln gain) |", "|---|---|---|---|"]
    for arm, m in arms.items():
        lines.append(f"| {arm} | {m['top1']:.2f} | {m['top3']:.2f} | {m['regret']:.3f} |")
    return "\n".join(lines)


def markdown(result: dict) -> str:
    """The table for docs/performance.md."""
    lines = [markdown_arms(result["arms"])]
    lines.append(f"\n{len(result['cases'])} tasks replayed, {result['with_profile']} with a profile of their naive "
                 "solution.")
    return "\n".join(lines)


def main() -> int:
    from benchmarks.retrieval_eval import load_tasks, measured_lineages

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", type=Path, help="profiles.json from the GPU suite's profile part")
    ap.add_argument("--state-world", action="store_true", help="also (or, without --profiles, only) the synthetic "
                                                                "world where the state decides what pays")
    ap.add_argument("--worlds", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.state_world:
        with tempfile.TemporaryDirectory(prefix="sb-state-world-") as work:
            world = state_world_eval(Path(work), worlds=args.worlds)
        print("synthetic state world:\n" + markdown_arms(world["arms"]) +
              f"\n{world['test_tasks']} test tasks, sessions of {world['horizon']} steps (regret: summed expected "
              "log-gain lost against the best available technique)")
        if args.out:
            args.out.with_name(args.out.stem + "_state_world.json").write_text(json.dumps(world, indent=1))
    if args.profiles is None:
        return 0
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
