"""What the sandbox costs a warm evaluation: the same candidates, jailed and unconfined, alternated.

    python -m benchmarks.sandbox_overhead [--device cpu|cuda] [--rounds 3] [--json OUT]

Two toolchains over two fresh stores, one with ``sandbox=bwrap`` and one with ``sandbox=off``; each
starts its worker and evaluates every candidate once (cold: workers started, kernels compiled).
Then, ``--rounds`` times, every candidate is evaluated again in each (the result cache off, the
compile caches warm: what a warm evaluation is), the two modes alternating candidate by candidate
so that the machine's drift falls on both. Prints the median wall time per candidate of each mode
and their difference; the bar is 50 ms on the CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from skillbase.config import Settings
from skillbase.toolchain import Toolchain, sandbox

CANDIDATES = [("relu", "optimized"), ("relu", "naive"), ("row_softmax", "optimized"), ("layernorm", "optimized"),
              ("rmsnorm", "optimized"), ("sum_reduction", "optimized"), ("relu_kb", "optimized")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not sandbox.choose("auto").confined:
        print(f"no jail here: {sandbox.choose('auto').reason}")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        tcs = {mode: Toolchain(Settings.from_env(env={}, home=Path(tmp) / mode, sandbox=mode, eval_timeout_s=300))
               for mode in ("bwrap", "off")}
        try:
            jobs = {}
            cold = {}
            for mode, tc in tcs.items():
                start = time.perf_counter()
                for task_name, sol in CANDIDATES:
                    task = tc.load_task(task_name)
                    cand = tc.resolve_solution(task, sol)
                    jobs.setdefault(mode, []).append((task, cand))
                    r = tc.benchmark(task, cand, args.device, use_cache=False)
                    assert r.verdict == "correct", (mode, task_name, sol, r.message)
                cold[mode] = time.perf_counter() - start
            walls: dict[str, list[float]] = {"bwrap": [], "off": []}
            for _ in range(args.rounds):
                for i in range(len(CANDIDATES)):
                    for mode in ("bwrap", "off") if i % 2 == 0 else ("off", "bwrap"):
                        task, cand = jobs[mode][i]
                        start = time.perf_counter()
                        r = tcs[mode].benchmark(task, cand, args.device, use_cache=False)
                        walls[mode].append(time.perf_counter() - start)
                        assert r.verdict == "correct", (mode, r.message)
        finally:
            for tc in tcs.values():
                tc.close()
    med = {m: statistics.median(w) for m, w in walls.items()}
    out = {"device": args.device, "candidates": len(CANDIDATES), "rounds": args.rounds,
           "warm_median_s": med, "overhead_ms": (med["bwrap"] - med["off"]) * 1e3,
           "overhead_ratio": med["bwrap"] / med["off"], "cold_s": cold,
           "paired_overhead_ms_median": statistics.median(
               (b - o) * 1e3 for b, o in zip(walls["bwrap"], walls["off"]))}
    print(f"warm evaluation, median of {len(walls['off'])}: jailed {med['bwrap'] * 1e3:.0f} ms, unconfined "
          f"{med['off'] * 1e3:.0f} ms: {out['overhead_ms']:+.0f} ms ({out['overhead_ratio']:.3f}x); paired median "
          f"{out['paired_overhead_ms_median']:+.0f} ms; cold (start + compile) {cold['bwrap']:.1f} s against "
          f"{cold['off']:.1f} s ({args.device})")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
