"""Suite throughput and multi-GPU balance (GPU): the figures of the suite's throughput and balance bars.

``scale``: 12 distinct candidates (the ``optimized`` solution of 12 built-in tasks) evaluated by
``Toolchain.benchmark_many`` on 2 GPUs and on 1, each first cold (a fresh store: no peaks, baselines,
Triton or Inductor caches; workers started by the call) and then warm (same workers, baselines
cached, results not reused). Wall clock from the Toolchain's creation (cold) or the batch's start
(warm) to its end; per worker, the seconds until it was ready (started, device described, peaks
measured or read); per candidate, its worker and start and end (s after the batch began).

    python benchmarks/suite_bench.py scale --json OUT.json [--gpus 2] [--candidates 12]

``kbrun``: one call of ``python -m skillbase.suite run`` over a run directory (benchmarks/suite_kb.py
builds the 100-candidate level-1 one) with ``--workers N``, resumable across calls under a time
limit: ``--fresh`` clears the run's results first (the store's baselines and compiled kernels stay,
so the run is warm when an earlier run filled them). The wall clock of every call of one measurement
is added up in the run directory; the summary says whether the run is complete, that total, and the
per-candidate evaluation seconds (median, 90th percentile, max).

    python benchmarks/suite_bench.py kbrun --run-dir DIR --kernelbench KB --workers 2 [--fresh] \\
        [--time-limit 540] --json OUT.json

``shrink`` (CPU, meta device only): how many KernelBench problems of each level get a CPU shape
automatically, at what size, and how long the search takes.

    python benchmarks/suite_bench.py shrink --kernelbench KB --level 1 2 3 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from skillbase.config import Settings  # noqa: E402
from skillbase.toolchain import Toolchain  # noqa: E402


def distinct_jobs(tc: Toolchain, n: int) -> list:
    """The ``optimized`` solution of the first ``n`` built-in tasks that have one (Triton)."""
    jobs = []
    for info in tc.list_tasks():
        if "optimized" in info.solutions and len(jobs) < n:
            cand = tc.resolve_solution(info, "optimized")
            if cand.language != "cuda":
                jobs.append((info, cand))
    return jobs


def batch(tc: Toolchain, jobs: list, workers: int, *, cold: bool, device: str = "cuda") -> dict:
    """One timed batch; cold includes starting the workers (timed per worker)."""
    t0 = time.perf_counter()
    ready: dict[str, float] = {}
    if cold:
        def start(name: str) -> None:  # what start_workers does, timed per worker
            if name.startswith("cuda"):
                tc._hardware_of(name)  # noqa: SLF001
            else:
                tc.pool.get(name).request({"op": "ping"}, timeout=180)
            ready[name] = round(time.perf_counter() - t0, 2)

        threads = [threading.Thread(target=start, args=(n,)) for n in tc.worker_names(device, workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    order = sorted(range(len(jobs)), key=lambda i: -tc.expected_eval_s(jobs[i][0], device))
    ordered = [jobs[i] for i in order]
    b0 = time.perf_counter()
    timeline: list[dict] = []

    def done(i: int, report) -> None:
        end = time.perf_counter() - b0
        timeline.append({"task": ordered[i][0].name, "worker": report.device, "verdict": report.verdict,
                         "start_s": round(end - report.wall_s, 2), "end_s": round(end, 2),
                         "phases_s": report.phases_s})

    tc.benchmark_many(ordered, device, workers=workers, on_done=done, use_cache=False)
    wall = time.perf_counter() - (t0 if cold else b0)
    busy = {}
    for row in timeline:
        busy[row["worker"]] = round(busy.get(row["worker"], 0.0) + row["end_s"] - row["start_s"], 2)
    return {"workers": workers, "cold": cold, "wall_s": round(wall, 2), "ready_s": ready, "busy_s": busy,
            "correct": sum(r["verdict"] == "correct" for r in timeline), "timeline": sorted(timeline,
                                                                                          key=lambda r: r["start_s"])}


def scale(args) -> int:
    out: dict = {"runs": []}
    for workers in (args.gpus, 1):
        home = Path(tempfile.mkdtemp(prefix=f"suite-bench-{workers}gpu-"))
        t0 = time.perf_counter()
        with Toolchain(Settings.from_env(home=home)) as tc:
            jobs = distinct_jobs(tc, args.candidates)
            describe_s = time.perf_counter() - t0
            cold = batch(tc, jobs, workers, cold=True, device=args.device)
            cold["wall_s"] = round(cold["wall_s"] + describe_s, 2)
            warm = batch(tc, jobs, workers, cold=False, device=args.device)
        if args.keep_home and workers == 1:
            shutil.rmtree(args.keep_home, ignore_errors=True)
            shutil.move(str(home), str(args.keep_home))
        else:
            shutil.rmtree(home, ignore_errors=True)
        for r in (cold, warm):
            out["runs"].append(r)
            print(f"{workers} GPU(s) {'cold' if r['cold'] else 'warm'}: {len(jobs)} candidates in {r['wall_s']:.1f} s "
                  f"wall clock ({r['correct']} correct); ready {r['ready_s'] or '-'}; busy {r['busy_s']}", flush=True)
        if args.json:  # partial results as they come
            args.json.write_text(json.dumps(out, indent=1))
    by = {(r["workers"], r["cold"]): r["wall_s"] for r in out["runs"]}
    out["speedup"] = {"warm": round(by[(1, False)] / by[(args.gpus, False)], 3),
                      "cold": round(by[(1, True)] / by[(args.gpus, True)], 3)}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(f"{args.gpus} GPUs over 1: warm {out['speedup']['warm']:.2f}x (bar 1.8x), "
          f"cold {out['speedup']['cold']:.2f}x (bar 1.6x)")
    return 0


def kbrun(args) -> int:
    state_file = args.run_dir / ".skillbase" / "bench_walls.json"
    if args.fresh:
        shutil.rmtree(args.run_dir / ".skillbase" / "results", ignore_errors=True)
        state_file.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "skillbase.suite", "run", str(args.run_dir), "--no-record", "--json",
           "--device", args.device, "--no-cache"]
    if args.kernelbench:
        cmd += ["--kernelbench", str(args.kernelbench)]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    if args.time_limit:
        cmd += ["--time-limit", str(args.time_limit)]
    start = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.perf_counter() - start
    if p.returncode != 0:
        print(p.stderr[-3000:], file=sys.stderr)
        return p.returncode
    report = json.loads(p.stdout)
    state_file.parent.mkdir(parents=True, exist_ok=True)
    walls = json.loads(state_file.read_text()) if state_file.is_file() else []
    walls.append(round(wall, 2))
    state_file.write_text(json.dumps(walls))
    fresh = [r["eval_s"] for r in report["rows"] if r.get("eval_s") is not None]
    # The same less each candidate's one-time build (CUDA C++ builds, compiling in the first call).
    built = [r["eval_s"] - r.get("build_s", 0.0) for r in report["rows"] if r.get("eval_s") is not None]

    def spread(xs: list[float]) -> dict | None:
        return {"median": round(statistics.median(xs), 2), "p90": round(sorted(xs)[int(0.9 * (len(xs) - 1))], 2),
                "max": round(max(xs), 2), "sum": round(sum(xs), 1)} if xs else None

    s = report["summary"]["all"]
    summary = {
        "workers": report.get("workers"), "hardware": report.get("hardware"), "complete": report["complete"],
        "left": len(report["left"]), "candidates": s["candidates"], "verdicts": s["verdicts"],
        "calls_wall_s": walls, "total_wall_s": round(sum(walls), 1),
        "eval_s": spread(fresh), "eval_s_less_build": spread(built),
        "fast_p_eager": s["fast_p"]["eager"], "geomean_speedup": s["geomean_speedup"],
        "rejections_by_check": s["rejections_by_check"],
    }
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "report": report}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


def shrink_levels(args) -> int:
    from skillbase.suite.discover import kernelbench_levels
    from skillbase.toolchain import shrink

    out: dict = {"limit_mib": args.limit_mib, "levels": {}}
    for level in args.level:
        rows = []
        files = sorted((kernelbench_levels(args.kernelbench) / f"level{level}").glob("*.py"),
                       key=lambda p: int(p.name.split("_")[0]))
        for path in files:
            t = time.perf_counter()
            try:
                found = shrink.shrink_shape(path, args.limit_mib * 2**20, 2 * 10**9)
                rows.append({"problem": path.name.split("_")[0], "ok": True, "shape": found.shape,
                             "mib": round(found.moved_bytes / 2**20, 1), "s": round(time.perf_counter() - t, 2)})
            except Exception as e:  # noqa: BLE001 - a problem that does not shrink is a row too
                rows.append({"problem": path.name.split("_")[0], "ok": False, "why": str(e)[:200],
                             "s": round(time.perf_counter() - t, 2)})
        secs = [r["s"] for r in rows]
        out["levels"][level] = {"problems": len(rows), "shrunk": sum(r["ok"] for r in rows),
                                "total_s": round(sum(secs), 1), "median_s": statistics.median(secs) if secs else None,
                                "max_s": max(secs) if secs else None, "rows": rows}
        print(f"level {level}: {out['levels'][level]['shrunk']}/{len(rows)} shrunk to <= {args.limit_mib} MiB in "
              f"{sum(secs):.1f} s (median {out['levels'][level]['median_s']} s, max {max(secs)} s per problem)",
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    sc = sub.add_parser("scale")
    sc.add_argument("--gpus", type=int, default=2)
    sc.add_argument("--candidates", type=int, default=12)
    sc.add_argument("--device", default="cuda", help="cuda, or cpu to try the script without a GPU")
    sc.add_argument("--json", type=Path)
    sc.add_argument("--keep-home", type=Path, help="keep the one-GPU run's store here (a warm store for later runs)")
    kb = sub.add_parser("kbrun")
    kb.add_argument("--run-dir", type=Path, required=True)
    kb.add_argument("--kernelbench", type=Path)
    kb.add_argument("--workers", type=int)
    kb.add_argument("--fresh", action="store_true")
    kb.add_argument("--time-limit", type=float)
    kb.add_argument("--device", default="cuda", help="cuda, or cpu to try the script without a GPU")
    kb.add_argument("--json", type=Path)
    sh = sub.add_parser("shrink")
    sh.add_argument("--kernelbench", type=Path, required=True)
    sh.add_argument("--level", type=int, nargs="+", default=[1, 2])
    sh.add_argument("--limit-mib", type=int, default=64)
    sh.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    return {"scale": scale, "kbrun": kbrun, "shrink": shrink_levels}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
