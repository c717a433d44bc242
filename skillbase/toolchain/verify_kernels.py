"""One-pass Triton kernels for the verification of large GPU tensors (``verify.compare`` and
``verify.fingerprint``), with exactly the definitions of their PyTorch forms.

The PyTorch forms check multi-gigabyte outputs chunk by chunk, each chunk through some twenty
elementwise operators in float64 and a dozen host synchronisations: on a 6.4 GB output that is a
quarter of a second per comparison, and an evaluation compares and fingerprints each trial's
tensors several times. Here each tensor is read once; every program reduces its slice to a few
partial figures, which PyTorch folds with one synchronisation.

Same definitions, so the two paths are interchangeable (tests run both, the kernels under Triton's
interpreter): comparisons in float64, a non-finite output where the reference is finite counts as
non-finite, a reference that is non-finite must be matched exactly (NaN matches NaN), the worst
element is the first index of the largest absolute difference, and the fingerprint is the
position-weighted sum of the elements' bits modulo 2**64.
"""

from __future__ import annotations

import triton
import triton.language as tl

BLOCK = 1024
ITERS = 16  # each program covers BLOCK * ITERS elements
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64")
NO_INDEX = 1 << 62
_NO_INDEX = tl.constexpr(NO_INDEX)  # the kernels' copy (a jitted function reads constexpr globals only)


@triton.jit
def _compare_kernel(
    o_ptr,
    r_ptr,
    oi_ptr,
    ri_ptr,
    n,
    tol_ptr,
    pv,
    stats_f,
    stats_i,
    BLOCK: tl.constexpr,
    ITERS: tl.constexpr,
    EXACT: tl.constexpr,
    POISON: tl.constexpr,
):
    # The tolerances in float64 (a Python float argument would arrive rounded to float32).
    atol = tl.load(tol_ptr)
    rtol = tl.load(tol_ptr + 1)
    pid = tl.program_id(0).to(tl.int64)
    base = pid * (BLOCK * ITERS)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    unwritten = tl.zeros([BLOCK], dtype=tl.int64)
    nonfinite = tl.zeros([BLOCK], dtype=tl.int64)
    mismatched = tl.zeros([BLOCK], dtype=tl.int64)
    first_bad = tl.full([BLOCK], _NO_INDEX, dtype=tl.int64)
    worst = tl.full([BLOCK], -1.0, dtype=tl.float64)
    worst_at = tl.full([BLOCK], _NO_INDEX, dtype=tl.int64)
    sq_diff = tl.zeros([BLOCK], dtype=tl.float64)
    sq_ref = tl.zeros([BLOCK], dtype=tl.float64)
    for it in range(ITERS):
        offs = base + it * BLOCK + lanes
        m = offs < n
        if POISON:
            oi = tl.load(oi_ptr + offs, mask=m, other=0)
            ri = tl.load(ri_ptr + offs, mask=m, other=0)
            unwritten += ((oi == pv) & (ri != pv) & m).to(tl.int64)
        if EXACT:
            a = tl.load(oi_ptr + offs, mask=m, other=0)
            b = tl.load(ri_ptr + offs, mask=m, other=0)
            bad = (a != b) & m
            mismatched += bad.to(tl.int64)
            first_bad = tl.minimum(first_bad, tl.where(bad, offs, _NO_INDEX))
        else:
            o = tl.load(o_ptr + offs, mask=m, other=0).to(tl.float64)
            r = tl.load(r_ptr + offs, mask=m, other=0).to(tl.float64)
            r_fin = (r - r) == 0.0  # false for NaN and +-Inf
            o_fin = (o - o) == 0.0
            r_nonfin = (r - r) != (r - r)
            o_nonfin = (o - o) != (o - o)
            nonfinite += (o_nonfin & r_fin & m).to(tl.int64)
            both_nan = (o != o) & (r != r)
            # where the reference is not finite, the candidate must hold the same value (or NaN for NaN)
            mismatched += (r_nonfin & (both_nan == 0) & (o != r) & m).to(tl.int64)
            diff = tl.where(r_fin & o_fin, tl.abs(o - r), 0.0)
            tol = tl.where(r_fin, atol + rtol * tl.abs(r), 0.0)
            bad = ((diff > tol) | (o_nonfin & r_fin)) & m
            mismatched += bad.to(tl.int64)
            diff = tl.where(m, diff, -1.0)
            take = diff > worst  # strict: each lane keeps the first index of its largest difference
            worst_at = tl.where(take, offs, worst_at)
            worst = tl.where(take, diff, worst)
            sq_diff += tl.where(m, diff * diff, 0.0)
            sq_ref += tl.where(r_fin & m, r * r, 0.0)
    top = tl.max(worst, axis=0)
    tl.store(stats_f + pid * 3 + 0, top)
    tl.store(stats_f + pid * 3 + 1, tl.sum(sq_diff, axis=0))
    tl.store(stats_f + pid * 3 + 2, tl.sum(sq_ref, axis=0))
    tl.store(stats_i + pid * 5 + 0, tl.sum(unwritten, axis=0))
    tl.store(stats_i + pid * 5 + 1, tl.sum(nonfinite, axis=0))
    tl.store(stats_i + pid * 5 + 2, tl.sum(mismatched, axis=0))
    tl.store(stats_i + pid * 5 + 3, tl.min(tl.where(worst == top, worst_at, _NO_INDEX), axis=0))
    tl.store(stats_i + pid * 5 + 4, tl.min(first_bad, axis=0))


@triton.jit
def _fingerprint_kernel(x_ptr, n, out_ptr, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    base = pid * (BLOCK * ITERS)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.int64)
    for it in range(ITERS):
        offs = base + it * BLOCK + lanes
        m = offs < n
        v = tl.load(x_ptr + offs, mask=m, other=0).to(tl.int64)
        acc += v * (offs % 1_000_003 + 1)  # wraps modulo 2**64, as the PyTorch form's int64 sums do
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


def supports(torch, t) -> bool:
    """Whether these kernels can check ``t`` (a dense dtype they read)."""
    name = str(t.dtype).removeprefix("torch.")
    return name in FLOAT_DTYPES or name in INT_DTYPES


def _grid(n: int) -> int:
    return max(1, triton.cdiv(n, BLOCK * ITERS))


def compare_stats(torch, o, r, int_view, atol: float, rtol: float, poison: int | None, exact: bool) -> dict:
    """The figures ``verify.compare`` needs, for flat contiguous same-dtype ``o`` and ``r``."""
    n = o.numel()
    grid = _grid(n)
    stats_f = torch.empty(grid * 3, dtype=torch.float64, device=o.device)
    stats_i = torch.empty(grid * 5, dtype=torch.int64, device=o.device)
    oi = int_view(o) if (exact or poison is not None) else o
    ri = int_view(r) if (exact or poison is not None) else r
    tol = torch.tensor([float(atol), float(rtol)], dtype=torch.float64, device=o.device)
    _compare_kernel[(grid,)](
        o,
        r,
        oi,
        ri,
        n,
        tol,
        int(poison or 0),
        stats_f,
        stats_i,
        BLOCK=BLOCK,
        ITERS=ITERS,
        EXACT=exact,
        POISON=poison is not None,
    )
    sf, si = stats_f.view(grid, 3), stats_i.view(grid, 5)
    top = sf[:, 0].max()
    at = torch.where(sf[:, 0] == top, si[:, 3], torch.full_like(si[:, 3], NO_INDEX)).min()
    folded = torch.stack([si[:, 0].sum(), si[:, 1].sum(), si[:, 2].sum(), at, si[:, 4].min()]).tolist()
    floats = torch.stack([top, sf[:, 1].sum(), sf[:, 2].sum()]).tolist()  # apart: indices exceed float64's 2**53
    unwritten, nonfinite, mismatched, worst_at, first_bad = (int(v) for v in folded)
    return {
        "unwritten": unwritten,
        "nonfinite": nonfinite,
        "mismatched": mismatched,
        "max_abs": max(floats[0], 0.0),
        "worst_index": None if worst_at >= NO_INDEX else worst_at,
        "first_bad": None if first_bad >= NO_INDEX else first_bad,
        "sq_diff": floats[1],
        "sq_ref": floats[2],
    }


def fingerprint_sum(torch, bits) -> int:
    """Position-weighted sum of a flat contiguous integer view's elements, modulo 2**64."""
    n = bits.numel()
    grid = _grid(n)
    partial = torch.empty(grid, dtype=torch.int64, device=bits.device)
    _fingerprint_kernel[(grid,)](bits, n, partial, BLOCK=BLOCK, ITERS=ITERS)
    return int(partial.sum().item()) & ((1 << 64) - 1)
