"""Ray as the evaluation back end against the local pool (its GPU bars).

``smoke`` (one GPU): the ``optimized`` solution of a few built-in tasks evaluated by the local pool,
then by one Ray actor on a local Ray cluster, then by the local pool again (the run-to-run spread to
judge the difference by). Same verdicts, and each median within 2% of the local pool's.

    python benchmarks/ray_bench.py smoke --json OUT.json [--tasks relu row_softmax layernorm]

``scale`` (all GPUs of the host): 12 distinct candidates (the ``optimized`` solution of 12 built-in
tasks) through ``Toolchain.benchmark_many``, warm (workers started and devices described before the
clock starts; baselines and peaks cached by a first pass, and the Ray actors' own caches by a first
Ray pass; results not reused): local pool on 1 GPU and
on all, Ray on 1 actor and on all (one per GPU). Wall clock of each batch; Ray on all GPUs over Ray on
one (bar 1.8x on 2 GPUs); verdicts and medians against the local pool on all GPUs (bar: within 2%).

    python benchmarks/ray_bench.py scale --json OUT.json [--gpus 2] [--candidates 12]

``--device cpu`` tries either without a GPU (CPU actors, Triton interpreter: verdicts only).
The Ray cluster is a local one (``ray.cluster_utils.Cluster``, one head node with the host's GPUs),
joined through its address as ``--ray ADDRESS`` would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from skillbase.config import Settings  # noqa: E402
from skillbase.toolchain import Toolchain  # noqa: E402

BAR_MEDIAN = 0.02


def jobs_for(tc: Toolchain, names: list[str] | None, n: int) -> list:
    """The ``optimized`` Triton solution of the named tasks, or of the first ``n`` built-in tasks having one."""
    infos = [tc.load_task(t) for t in names] if names else tc.list_tasks()
    jobs = []
    for info in infos:
        if "optimized" in info.solutions and len(jobs) < n:
            cand = tc.resolve_solution(info, "optimized")
            if cand.language != "cuda":
                jobs.append((info, cand))
    return jobs


def start(tc: Toolchain, device: str, workers: int | None) -> float:
    """Start (and describe) every worker of the batch; seconds it took."""
    t0 = time.perf_counter()
    tc.start_workers(device, workers).join()
    return round(time.perf_counter() - t0, 2)


def batch(tc: Toolchain, jobs: list, device: str, workers: int | None, label: str) -> dict:
    """One timed batch over ready workers; per candidate its verdict, median and where it ran."""
    ready_s = start(tc, device, workers)
    names = tc.worker_names(device, workers)
    order = sorted(range(len(jobs)), key=lambda i: -tc.expected_eval_s(jobs[i][0], device))
    t0 = time.perf_counter()
    reports = tc.benchmark_many([jobs[i] for i in order], device, workers=workers, use_cache=False)
    wall = round(time.perf_counter() - t0, 2)
    rows = {}
    for i, r in zip(order, reports):
        rows[jobs[i][0].name] = {"verdict": r.verdict, "median_ms": r.timing.median_ms if r.timing else None,
                                 "device": r.device, "gpu": r.hardware.name if r.hardware else None,
                                 "where": next((n for n in r.notes if "Ray actor" in n), "local pool"),
                                 "wall_s": round(r.wall_s, 2)}
    out = {"label": label, "workers": len(names), "ready_s": ready_s, "wall_s": wall, "rows": rows,
           "correct": sum(r["verdict"] == "correct" for r in rows.values())}
    print(f"{label}: {len(jobs)} candidates on {len(names)} worker(s) in {wall:.2f} s wall clock "
          f"(workers ready in {ready_s:.1f} s before the clock started); {out['correct']} correct", flush=True)
    return out


def compare(ref: dict, other: dict) -> dict:
    """Verdicts equal? Each median's relative difference from the reference's."""
    same = all(ref["rows"][t]["verdict"] == other["rows"][t]["verdict"] for t in ref["rows"])
    diffs = {t: round(other["rows"][t]["median_ms"] / ref["rows"][t]["median_ms"] - 1, 4)
             for t in ref["rows"] if ref["rows"][t]["median_ms"] and other["rows"][t]["median_ms"]}
    worst = max((abs(d) for d in diffs.values()), default=None)
    return {"same_verdicts": same, "median_rel_diff": diffs, "max_abs_rel_diff": worst,
            "within_2pct": sum(abs(d) <= BAR_MEDIAN for d in diffs.values()), "timed": len(diffs)}


def cluster_for(device: str, gpus: int):
    from ray.cluster_utils import Cluster

    head = {"num_cpus": max(2, os.cpu_count() or 2), "include_dashboard": False}
    if device == "cuda":
        head["num_gpus"] = gpus
    return Cluster(initialize_head=True, head_node_args=head)


def gpu_count(device: str) -> int:
    import torch

    return torch.cuda.device_count() if device == "cuda" else 2


def smoke(args) -> int:
    home = args.home or Path(tempfile.mkdtemp(prefix="ray-smoke-"))
    local = Settings.from_env(home=home)
    out: dict = {"device": args.device}
    with Toolchain(local) as tc:
        jobs = jobs_for(tc, args.tasks, len(args.tasks))
        batch(tc, jobs, args.device, 1, "warm-up (baselines and peaks measured)")
        out["local"] = batch(tc, jobs, args.device, 1, "local pool")
    cluster = cluster_for(args.device, 1)
    try:
        with Toolchain(local.model_copy(update={"ray_address": cluster.address})) as tc:
            out["ray"] = batch(tc, jobs_for(tc, args.tasks, len(args.tasks)), args.device, 1, "Ray, one actor")
    finally:
        cluster.shutdown()
    with Toolchain(local) as tc:
        out["local_again"] = batch(tc, jobs_for(tc, args.tasks, len(args.tasks)), args.device, 1, "local pool again")
    out["ray_vs_local"] = compare(out["local"], out["ray"])
    out["local_vs_local"] = compare(out["local"], out["local_again"])
    return report(args, out, f"Ray vs local pool: {out['ray_vs_local']}\nlocal vs local (spread): "
                             f"{out['local_vs_local']}")


def scale(args) -> int:
    gpus = args.gpus or gpu_count(args.device)
    home = args.home or Path(tempfile.mkdtemp(prefix="ray-scale-"))
    local = Settings.from_env(home=home)
    out: dict = {"device": args.device, "gpus": gpus, "runs": {}}
    with Toolchain(local) as tc:
        jobs = jobs_for(tc, None, args.candidates)
        batch(tc, jobs, args.device, gpus, "warm-up (baselines and peaks measured)")
    for workers in (1, gpus):
        with Toolchain(local) as tc:
            out["runs"][f"local_{workers}"] = batch(tc, jobs_for(tc, None, args.candidates), args.device, workers,
                                                    f"local pool, {workers} worker(s)")
    cluster = cluster_for(args.device, gpus)
    try:
        with Toolchain(local.model_copy(update={"ray_address": cluster.address})) as tc:
            # The actors keep their own caches on their node (Triton's, the extensions'): warm them the
            # way the local pool's warm-up did, so both are compared warm.
            batch(tc, jobs_for(tc, None, args.candidates), args.device, gpus, "Ray warm-up (actors' caches filled)")
            for workers in (1, gpus):
                out["runs"][f"ray_{workers}"] = batch(tc, jobs_for(tc, None, args.candidates), args.device, workers,
                                                      f"Ray, {workers} actor(s)")
    finally:
        cluster.shutdown()
    runs = out["runs"]
    out["speedup"] = {"ray_all_over_ray_1": round(runs["ray_1"]["wall_s"] / runs[f"ray_{gpus}"]["wall_s"], 3),
                      "ray_all_over_local_1": round(runs["local_1"]["wall_s"] / runs[f"ray_{gpus}"]["wall_s"], 3),
                      "local_all_over_local_1": round(runs["local_1"]["wall_s"] / runs[f"local_{gpus}"]["wall_s"], 3)}
    out["ray_vs_local"] = compare(runs[f"local_{gpus}"], runs[f"ray_{gpus}"])
    out["local_1_vs_local_all"] = compare(runs[f"local_{gpus}"], runs["local_1"])
    return report(args, out, f"speedups (wall clock, warm): {out['speedup']} (bar: ray_all_over_ray_1 >= 1.8)\n"
                             f"Ray vs local pool on {gpus} GPUs: {out['ray_vs_local']}\n"
                             f"local 1 vs local {gpus} (spread): {out['local_1_vs_local_all']}")


def report(args, out: dict, summary: str) -> int:
    print(summary, flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    ok = out.get("ray_vs_local", {}).get("same_verdicts", False)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    sm = sub.add_parser("smoke")
    sm.add_argument("--tasks", nargs="+", default=["relu", "row_softmax", "layernorm", "rmsnorm"])
    sc = sub.add_parser("scale")
    sc.add_argument("--gpus", type=int)
    sc.add_argument("--candidates", type=int, default=12)
    for p in (sm, sc):
        p.add_argument("--device", default="cuda", help="cuda, or cpu to try the script without a GPU")
        p.add_argument("--json", type=Path)
        p.add_argument("--home", type=Path, help="an existing store to start from (baselines, peaks: a warm warm-up)")
    args = ap.parse_args(argv)
    return {"smoke": smoke, "scale": scale}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
