"""Profiles of every built-in solution and every deliberately flawed kernel.

Two steps, because the GPU machines lack chromadb:

    # on the GPU (gpu_suite.sh part `profile`): Nsight Compute on each candidate, raw CSVs and reports to OUT
    PYTHONPATH=. python3 benchmarks/profile_bench.py run --out $OUT [--time-limit 390]
    # afterwards, here (CPU): diagnosis and recall checks on the saved profiles
    .venv/bin/python benchmarks/profile_bench.py check --profiles $OUT/profiles.json --out /tmp/profile_check.json
    # after the diagnosis rules change: the same counters diagnosed again (no GPU)
    .venv/bin/python benchmarks/profile_bench.py rediagnose --profiles $OUT/profiles.json --out $OUT/profiles_rediagnosed.json
    # before any GPU run: the same check on invented profiles of the flaws (SYNTHETIC below)
    .venv/bin/python benchmarks/profile_bench.py synthetic --out /tmp/synthetic_profiles.json

`run` profiles the flawed kernels (benchmarks/profile_flawed) first, then every solution of every
built-in task (naive and optimized first), starting none after ``--time-limit`` seconds. Per
candidate it records the ProfileReport (without verifying: the built-ins are verified by the
`bench` part), the wall time of the whole profile and ncu's own run, and whether that stayed
within 30 s. Raw CSVs go to OUT/profile_csv/ (parser fixtures).

`check` answers, per flawed kernel: does the diagnosis name its flaw (a finding or the state is
the expected PROFILE_STATES key), and is one of its matching skills in recall's top 3 when the
profile is passed (a fresh store seeded with the skills)?
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FLAWED = ROOT / "benchmarks" / "profile_flawed"
BUDGET_S = 30.0  # bar: one profile within 30 s at level-1 sizes on an H100


def jobs() -> list[dict]:
    """(kind, task path or name, solution path or name, expected state and skills), flawed first."""
    from skillbase.toolchain.tasks import builtin_names

    rel = FLAWED.relative_to(ROOT)  # paths relative to the checkout: the GPU box's differs from this one
    out = [{"kind": "flawed", "name": f"flawed/{n}", "task": str(rel / n / "task.py"),
            "solution": str(rel / n / "flawed.py"), "state": s["state"], "skills": s["skills"]}
           for n, s in json.loads((FLAWED / "flaws.json").read_text()).items() if not n.startswith("_")]
    rest = []
    for task in builtin_names():
        sols = sorted(p.stem for p in (ROOT / "seeds" / "tasks" / task).glob("*.py") if p.stem != "task")
        for sol in sols:
            rank = {"naive": 0, "optimized": 1}.get(sol, 2)
            rest.append((rank, {"kind": "builtin", "name": f"{task}/{sol}", "task": task, "solution": sol}))
    return out + [j for _, j in sorted(rest, key=lambda x: (x[0], x[1]["name"]))]


def run(out: Path, home: Path, time_limit: float, previous: Path | None = None) -> int:
    """Profile every job on the GPU; write profiles.json, profile_csv/ and a summary table.

    ``previous``: an earlier call's profiles.json; its profiled jobs are kept as they are and not run
    again, so a run cut by the time limit is finished by the next call."""
    from skillbase.config import Settings
    from skillbase.toolchain.facade import Toolchain

    out.mkdir(parents=True, exist_ok=True)
    (out / "profile_csv").mkdir(exist_ok=True)
    rows, start = [], time.perf_counter()
    kept = {}
    if previous is not None and previous.is_file():
        kept = {r["name"]: {**r, "from_previous_call": True}
                for r in json.loads(previous.read_text())["rows"] if "report" in r}
        print(f"{len(kept)} profiles kept from {previous}", flush=True)
    with Toolchain(Settings.from_env(home=home)) as tc:
        for job in jobs():
            if job["name"] in kept:
                rows.append(kept[job["name"]])
                continue
            if time.perf_counter() - start > time_limit:
                rows.append({**job, "skipped": f"time limit {time_limit:g} s reached"})
                continue
            try:
                task = tc.load_task(_here(job["task"]))
                report = tc.profile(task, tc.resolve_solution(task, _here(job["solution"])), "cuda")
            except Exception as e:  # noqa: BLE001  (one broken job must not end the run)
                rows.append({**job, "error": f"{type(e).__name__}: {e}"})
                print(f"{job['name']:45s} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            if report.raw_csv:
                (out / "profile_csv" / (job["name"].replace("/", "__") + ".csv")).write_text(report.raw_csv)
            ncu_s = report.ncu.wall_s if report.ncu else None
            row = {**job, "report": report.model_dump(mode="json"), "wall_s": report.wall_s, "ncu_s": ncu_s,
                   "within_budget": ncu_s is not None and ncu_s <= BUDGET_S,
                   "named": named(report, job.get("state")) if job.get("state") else None}
            rows.append(row)
            print(f"{job['name']:45s} {'ncu' if report.available else report.unavailable:18s} "
                  f"state={report.state or '-':16s} ncu {ncu_s if ncu_s is not None else float('nan'):6.1f} s, "
                  f"total {report.wall_s:6.1f} s" + (f"  named={row['named']}" if row["named"] is not None else ""),
                  flush=True)
    payload = {"rows": rows, "wall_s": round(time.perf_counter() - start, 1), "budget_s": BUDGET_S}
    (out / "profiles.json").write_text(json.dumps(payload, indent=1))
    done = [r for r in rows if "report" in r]
    ok = [r for r in done if r["report"]["available"]]
    print(f"\n{len(ok)}/{len(rows)} profiled with Nsight Compute in {payload['wall_s']} s; "
          f"{sum(r['within_budget'] for r in done)}/{len(done)} within {BUDGET_S:g} s (ncu wall time); "
          f"flaws named: {sum(bool(r['named']) for r in done if r['kind'] == 'flawed')}/"
          f"{sum(r['kind'] == 'flawed' for r in rows)}")
    return 0 if ok else 1


def _here(ref: str) -> str:
    """A job's task or solution: a built-in name as it is, a relative path under this checkout."""
    return str(ROOT / ref) if ref.endswith(".py") else ref


def named(report, state: str) -> bool:
    """Whether the diagnosis names ``state``: the profile's state or one of its findings."""
    r = report if isinstance(report, dict) else report.model_dump()
    return r.get("state") == state or any(f["problem"] == state for f in r.get("findings", []))


def rediagnose(profiles: Path, out: Path) -> dict:
    """Saved profiles with their diagnosis recomputed by the current rules from the same counters."""
    from skillbase.models import ProfileReport
    from skillbase.toolchain.profile import rediagnose as again

    payload = json.loads(profiles.read_text())
    changed = []
    for r in payload["rows"]:
        if not r.get("report"):
            continue
        before = r["report"].get("state")
        report = again(ProfileReport.model_validate(r["report"]))
        r["report"] = report.model_dump(mode="json")
        if r.get("kind") == "flawed" and r.get("state"):
            r["named"] = named(report, r["state"])
        if report.state != before:
            changed.append(f"{r['name']}: {before} -> {report.state}")
    payload["rediagnosed_from"] = str(profiles.relative_to(ROOT) if profiles.is_relative_to(ROOT) else profiles)
    out.write_text(json.dumps(payload, indent=1))
    print("\n".join(changed) or "no state changed")
    return payload


def check(profiles: Path, out: Path | None, k: int = 3) -> dict:
    """Diagnosis and recall-top-k checks of the flawed kernels' saved profiles (CPU; needs chromadb)."""
    from skillbase import SkillBase
    from skillbase.models import ProfileReport

    rows = json.loads(profiles.read_text())["rows"]
    results = []
    with tempfile.TemporaryDirectory(prefix="sb-profile-check-") as home, SkillBase(home=home) as sb:
        sb.init()
        for r in rows:
            if r.get("kind") != "flawed" or "report" not in r:
                continue
            report = ProfileReport.model_validate(r["report"])
            info = sb.task(_here(r["task"]))
            with_profile = sb.recall(task=info, profile=report, k=5)
            without = sb.recall(task=info, k=5)
            top = [i.id for i in with_profile.items if i.kind == "skill"][:k]
            base = [i.id for i in without.items if i.kind == "skill"][:k]
            results.append({"name": r["name"], "state": report.state, "expected_state": r["state"],
                            "named": named(report, r["state"]), "top_skills": top, "expected_skills": r["skills"],
                            "skill_in_top": bool(set(top) & set(r["skills"])),
                            "without_profile": base, "skill_in_top_without": bool(set(base) & set(r["skills"])),
                            "diagnosis": report.diagnosis})
    summary = {"k": k, "named": sum(x["named"] for x in results), "skill_in_top": sum(x["skill_in_top"] for x in results),
               "skill_in_top_without_profile": sum(x["skill_in_top_without"] for x in results), "cases": len(results),
               "rows": results}
    if out is not None:
        out.write_text(json.dumps(summary, indent=1))
    for x in results:
        print(f"{x['name']:28s} named={x['named']!s:5s} top{k}={x['top_skills']} hit={x['skill_in_top']} "
              f"(without profile: {x['skill_in_top_without']})")
    print(f"named {summary['named']}/{len(results)}; matching skill in top {k}: {summary['skill_in_top']}/{len(results)} "
          f"with the profile, {summary['skill_in_top_without_profile']}/{len(results)} without")
    return summary


# What each flaw should look like to Nsight Compute (invented numbers, not measurements): lets the
# check's recall half run before real profiles exist, and shows what the diagnosis keys on.
SYNTHETIC = {
    "uncoalesced": {"ld_efficiency_pct": 12.5, "ld_sectors_per_request": 32.0, "dram_pct": 38.0},
    "bank_conflicts": {"smem_conflict_pct": 90.0},
    "register_spills": {"spill_bytes": 7080, "registers": 64, "local_bytes": 4e9, "achieved_occupancy_pct": 40.0},
    "low_occupancy": {"achieved_occupancy_pct": 17.0, "theoretical_occupancy_pct": 18.75,
                      "occupancy_limiter": "registers", "registers": 155},
    "tail_effect": {"waves": 1.14, "tail_idle_pct": 43.0, "dram_pct": 45.0},
    "unfused_dram": {"dram_pct": 91.0},
}


def synthetic(out: Path) -> None:
    """profiles.json for the flawed kernels from SYNTHETIC (marked 'synthetic': not measured)."""
    from skillbase.models import KernelProfile, ProfileReport
    from skillbase.toolchain import diagnose

    base = {"duration_us": 500.0, "dram_pct": 50.0, "sm_pct": 30.0, "achieved_occupancy_pct": 70.0,
            "theoretical_occupancy_pct": 100.0, "ld_efficiency_pct": 100.0, "ld_sectors_per_request": 16.0,
            "smem_conflict_pct": 0.0, "waves": 20.0, "tail_idle_pct": 0.0, "local_bytes": 0.0}
    rows = []
    for job in jobs():
        if job["kind"] != "flawed":
            continue
        flaw = job["name"].split("/", 1)[1]
        k = KernelProfile(name=f"{flaw}_kernel", **{**base, **SYNTHETIC[flaw]})
        findings, state = diagnose.diagnose([k])
        report = ProfileReport(task=flaw, solution_hash="synthetic", device="synthetic", available=True, kernels=[k],
                               findings=findings, state=state, metrics=k.metrics(),
                               diagnosis=diagnose.summary(findings, state),
                               techniques=diagnose.techniques_of(findings, state), notes=["synthetic: not measured"])
        rows.append({**job, "report": report.model_dump(mode="json"), "synthetic": True})
    out.write_text(json.dumps({"rows": rows, "synthetic": True}, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--home", type=Path, default=ROOT / ".gpu-home")
    r.add_argument("--time-limit", type=float, default=390.0)
    r.add_argument("--previous", type=Path, help="an earlier profiles.json: its profiled jobs are kept, not run again")
    y = sub.add_parser("synthetic", help="write invented profiles of the flawed kernels (for the check on CPU)")
    y.add_argument("--out", type=Path, required=True)
    d = sub.add_parser("rediagnose", help="recompute the diagnosis of saved profiles with the current rules")
    d.add_argument("--profiles", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("check")
    c.add_argument("--profiles", type=Path, required=True)
    c.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        return run(args.out, args.home, args.time_limit, args.previous)
    if args.cmd == "rediagnose":
        rediagnose(args.profiles, args.out)
        return 0
    if args.cmd == "synthetic":
        synthetic(args.out)
        return 0
    summary = check(args.profiles, args.out)
    return 0 if summary["cases"] and summary["named"] == summary["cases"] else 1


if __name__ == "__main__":
    sys.exit(main())
