"""Verification cost on the GPU: ``verify.compare`` and ``verify.fingerprint`` on large tensors, by the
one-pass Triton kernels and by the chunked PyTorch forms, in one process (same tensors, same GPU).

    PYTHONPATH=. python3 benchmarks/verify_bench.py [--gib 6.4 1.6 0.25] [--json OUT.json]

Per size: the seconds of one comparison and one fingerprint (median of 5, synchronised), each path,
and their ratio. An evaluation compares every trial's outputs and fingerprints its inputs and outputs
(five trials, then the in-place rewrite and the widened inputs), so these figures are what a
candidate with multi-gigabyte tensors pays for being checked.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


from skillbase.toolchain import verify  # noqa: E402


def seconds(torch, fn, reps: int = 5) -> float:
    fn()  # compile / warm
    xs = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs)


def main() -> int:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, nargs="+", default=[6.4, 1.6, 0.25], help="output size, GB (fp32)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    for gb in args.gib:
        n = int(gb * 1e9 / 4)
        r = torch.randn(n, device="cuda")
        o = r + 1e-4 * torch.randn(n, device="cuda")
        row = {"gb": gb, "numel": n}
        for path in ("kernels", "pytorch"):
            saved = verify._fast
            if path == "pytorch":
                verify._fast = lambda torch, t: None
            try:
                row[f"compare_s_{path}"] = round(seconds(torch, lambda: verify.compare(torch, o, r, 1e-3, 1e-3, 0xFF)), 4)
                row[f"fingerprint_s_{path}"] = round(seconds(torch, lambda: verify.fingerprint(torch, o)), 4)
            finally:
                verify._fast = saved
        row["compare_ratio"] = round(row["compare_s_pytorch"] / row["compare_s_kernels"], 1)
        row["fingerprint_ratio"] = round(row["fingerprint_s_pytorch"] / row["fingerprint_s_kernels"], 1)
        row["compare_gbps_kernels"] = round(2 * gb / row["compare_s_kernels"], 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del r, o
        torch.cuda.empty_cache()
    out = {"gpu": torch.cuda.get_device_name(0), "fallback": verify.fast_path_status(), "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0 if not out["fallback"] else 1


if __name__ == "__main__":
    sys.exit(main())
