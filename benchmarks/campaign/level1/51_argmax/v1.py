"""Argmax over one dimension (kb:1/51), step 1: one program per (outer index, column block), a row per iteration.

x is viewed as (outer, R, inner) around the reduced dimension: at the
problem's (128, 4096, 4095) with dim=1 that is outer=128, R=4096,
inner=4095. A block of BLOCK_I neighbouring columns is contiguous in every
one of the R rows, so a program owns (one outer index, BLOCK_I columns),
walks the rows in order and keeps, per column, the best value seen and its
row. The result is int64, as torch's.

Ties follow torch: the first index of the largest value. Rows arrive in
increasing order and a row replaces the held one only when strictly larger,
so the first of equal values stays. NaN counts as larger than everything
(torch returns the first NaN's index): a NaN replaces a non-NaN, and once a
NaN is held nothing replaces it.

Floor: one read of x, 8.59 GB, and a 4 MB write: 2.9 ms at 3.0 TB/s. This
step keeps one BLOCK_I-wide load per program in flight at a time; that is
what bounds it.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmax_middle_kernel(x_ptr, idx_ptr, R, inner, BLOCK_I: tl.constexpr):
    outer = tl.program_id(axis=0).to(tl.int64)
    cols = tl.program_id(axis=1) * BLOCK_I + tl.arange(0, BLOCK_I)
    mask = cols < inner
    # Pointer steps are 64-bit: R * inner alone can pass 2^31 elements.
    row = x_ptr + outer * R * inner + cols
    best = tl.full([BLOCK_I], float("-inf"), tl.float32)
    # Index 0 is right when nothing beats the initial -inf: then every value is -inf.
    best_row = tl.zeros([BLOCK_I], tl.int32)
    for r in range(R):
        v = tl.load(row, mask=mask, other=float("-inf")).to(tl.float32)
        take = (v > best) | ((v != v) & (best == best))
        best = tl.where(take, v, best)
        best_row = tl.where(take, r, best_row)
        row += inner
    tl.store(idx_ptr + outer * inner + cols, best_row.to(tl.int64), mask=mask)


def _split(shape, dim):
    outer = 1
    for s in shape[:dim]:
        outer *= s
    inner = 1
    for s in shape[dim + 1:]:
        inner *= s
    return outer, shape[dim], inner


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        outer, r, inner = _split(x.shape, dim)
        if r == 0:
            raise IndexError("argmax(): cannot reduce over a dimension of size 0")
        out_shape = list(x.shape)
        del out_shape[dim]
        idx = torch.empty(out_shape, device=x.device, dtype=torch.int64)
        if idx.numel() == 0:
            return idx
        BLOCK_I = min(256, triton.next_power_of_2(inner))
        argmax_middle_kernel[(outer, triton.cdiv(inner, BLOCK_I))](x, idx, r, inner, BLOCK_I=BLOCK_I, num_warps=4)
        return idx
