"""Launch-bound timing on a GPU: is the device time of a kernel of a few µs stable and right?

For tiny shapes of built-in tasks (a few µs per call) this measures, with the real toolchain:
- the device time over 10 evaluations in one warm worker, the first right after the worker
  started cold (baselines compiled just before), as max/min (bar: <= 1.10);
- the same while another GPU's worker evaluates something large (``--busy``, needs 2 GPUs);
- Nsight Compute's gpu__time_duration for the same kernels (same cache state as our timer), and
  our device time against it (bar: within max(1 µs, 15%));
- the host-inclusive time per call (what a caller pays) beside it, and the event overhead: the
  device time of an empty call (two events around nothing).

    PYTHONPATH=. python3 benchmarks/launch_bound.py --out /tmp/lb [--busy] [--reps 10]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from skillbase.config import Settings  # noqa: E402
from skillbase.toolchain import Toolchain  # noqa: E402

# (built-in task, solution, size globals) of calls that take a few µs on an H100.
TINY = [("relu", "optimized", {"M": 8, "N": 1024}), ("relu", "naive", {"M": 64, "N": 4096}),
        ("row_softmax", "optimized", {"M": 32, "N": 1024}), ("layernorm", "optimized", {"M": 64, "N": 1024}),
        ("sum_reduction", "optimized", {"B": 4, "N": 256, "D": 64})]


def tiny_task(workdir: Path, task: str, sizes: dict) -> Path:
    """A copy of a built-in task with its size globals set small (appended, so they win)."""
    src = (REPO / "seeds" / "tasks" / task / "task.py").read_text()
    path = workdir / f"tiny_{task}_{'_'.join(str(v) for v in sizes.values())}.py"
    path.write_text(src + "\n# tiny shape: launch-bound timing\n" + "".join(f"{k} = {v}\n" for k, v in sizes.items()))
    return path


def event_overhead_us(held: bool = True) -> float:
    """Median of two CUDA events around nothing, µs: behind a 50 µs spin kernel (``held``, as the timer
    records them for short calls: the GPU's own cost of the pair) or on an idle GPU (the host's gap)."""
    import torch

    xs = []
    for _ in range(200):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if held:
            torch.cuda._sleep(100_000)
        s.record()
        e.record()
        torch.cuda.synchronize()
        xs.append(s.elapsed_time(e) * 1e3)
    return statistics.median(xs)


def busy_loop(stop: threading.Event, home: Path) -> None:
    """Keep cuda:1's worker evaluating a large kernel until told to stop."""
    with Toolchain(Settings.from_env(home=home)) as tc:
        task = tc.load_task("softmax_kb")
        cand = tc.resolve_solution(task, "optimized")
        while not stop.is_set():
            tc.benchmark(task, cand, "cuda:1", use_cache=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--busy", action="store_true", help="evaluate on cuda:0 while cuda:1 is busy")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="lb-"))
    home = work / "home"
    stop = threading.Event()
    busy = None
    if args.busy:
        busy = threading.Thread(target=busy_loop, args=(stop, work / "busy-home"), daemon=True)
        busy.start()
    from toolchain_bench import ncu_compare_paths

    name = "launch_bound_busy.json" if args.busy else "launch_bound.json"
    rows = []
    for task_name, sol, sizes in TINY:
        path = tiny_task(work, task_name, sizes)
        settings = Settings.from_env(home=home / task_name)
        with Toolchain(settings) as tc:  # a cold worker for each task
            task = tc.load_task(str(path))
            cand = tc.resolve_solution(task, str(REPO / "seeds" / "tasks" / task_name / f"{sol}.py"))
            reports = [tc.benchmark(task, cand, "cuda:0", use_cache=False) for _ in range(args.reps)]
            dev = [r.timing.median_ms * 1e3 for r in reports if r.timing]
            # Each evaluation's own measure of the empty held event pair it took off (from its method).
            empty = [float(m.group(1)) for r in reports if r.timing
                     for m in [re.search(r"less the ([0-9.]+) µs", r.timing.method)] if m]
            host = [r.host_ms_per_call.get("candidate", 0) * 1e3 for r in reports]
            # Busy mode measures the spread only: ncu's figure does not depend on the other GPU.
            ncu = {} if args.busy else ncu_compare_paths(task, cand, triton_cache=settings.cache_dir / "triton")
        row = {"task": path.stem, "solution": sol, "verdicts": sorted({r.verdict for r in reports}),
               "device_us": dev, "empty_pair_us": empty,
               "raw_us": [d + e for d, e in zip(dev, empty)] if len(empty) == len(dev) else None, "host_us": host, "max_over_min": max(dev) / min(dev) if dev else None,
               "first_after_cold_us": dev[0] if dev else None, "ncu_us": ncu.get("ncu_us"),
               "ncu_command": ncu.get("command"), "ncu_kernels_per_call": ncu.get("kernels_per_call"),
               "ncu_kernel_names": ncu.get("kernel_names"), "method": reports[-1].timing.method if reports[-1].timing else None,
               "methods": [r.timing.method if r.timing else None for r in reports]}
        if row["ncu_us"] and dev:
            med = statistics.median(dev)
            row["vs_ncu_us"] = med - row["ncu_us"]
            row["within_bar"] = abs(med - row["ncu_us"]) <= max(1.0, 0.15 * row["ncu_us"])
        rows.append(row)
        print(f"{path.stem:38s} device {statistics.median(dev) if dev else float('nan'):7.2f} µs "
              f"max/min {row['max_over_min'] or float('nan'):.3f} first {row['first_after_cold_us'] or 0:7.2f} "
              f"ncu {row['ncu_us'] or float('nan'):7.2f} µs host/call {statistics.median(host) if host else 0:7.2f} µs",
              flush=True)
        if args.busy:
            print("    per evaluation (µs): " + " ".join(f"{d:.2f}" for d in dev), flush=True)
        # Partial results as they come: a call that hits its time limit keeps what it measured.
        (args.out / name).write_text(
            json.dumps({"busy_other_gpu": args.busy, "partial": True, "rows": rows}, indent=1))
    stop.set()
    result = {"busy_other_gpu": args.busy, "event_overhead_us": event_overhead_us(),
              "event_overhead_idle_us": event_overhead_us(held=False), "rows": rows}
    (args.out / name).write_text(json.dumps(result, indent=1))
    print(f"event pair overhead: {result['event_overhead_us']:.2f} µs; "
          f"max/min <= 1.10 on {sum(1 for r in rows if (r['max_over_min'] or 9) <= 1.10)}/{len(rows)}; "
          f"within max(1 µs, 15%) of ncu on {sum(1 for r in rows if r.get('within_bar'))}/{len(rows)}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
