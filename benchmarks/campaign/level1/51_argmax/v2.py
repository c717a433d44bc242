"""Argmax over one dimension (kb:1/51), step 2: a [BLOCK_R, BLOCK_I] tile of rows per iteration, autotuned.

Same mapping as step 1: x viewed as (outer, R, inner) = (128, 4096, 4095),
one program per (outer index, BLOCK_I contiguous columns), every load a set
of coalesced row segments, int64 result. Step 1 loads one row segment per
iteration: one 1 KiB request per program in flight, too little to cover
DRAM latency. Here each iteration loads BLOCK_R rows at once, and every
slot of a [BLOCK_R, BLOCK_I] tile keeps its own (best value, row): slot j
sees rows j, j + BLOCK_R, j + 2 BLOCK_R, ... in increasing order. BLOCK_R
independent loads per thread are in flight together, and the loop holds
only element-wise compares and selects.

Torch's rules hold slot by slot and across slots. In a slot a row replaces
the held one only when strictly larger, or when it is NaN and the held value
is not, so each slot holds the first index of its largest value (NaN
counting as largest). After the loop, the column's winner is the smallest
held row among the slots holding the column's largest value (or, if any
slot holds NaN, among the NaN slots): the first index overall.

Floor: one read of x, 8.59 GB, and a 4 MB write: 2.9 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    return configs if named_args["x_ptr"].is_cuda else configs[:1]


def _configs():
    # Each tile element carries a value and a row: tiles of half the sum kernel's size.
    shapes = [(16, 256, 8), (8, 256, 4), (8, 512, 8), (32, 128, 8), (16, 128, 4)]
    return [triton.Config({"BLOCK_R": r, "BLOCK_I": i}, num_warps=w) for r, i, w in shapes]


@triton.autotune(configs=_configs(), key=["R", "inner"], prune_configs_by={"early_config_prune": _keep_one_config_off_gpu})
@triton.jit
def argmax_middle_tile_kernel(x_ptr, idx_ptr, R, inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    outer = tl.program_id(axis=0).to(tl.int64)
    cols = tl.program_id(axis=1) * BLOCK_I + tl.arange(0, BLOCK_I)
    rows = tl.arange(0, BLOCK_R)
    col_ok = cols < inner
    # 64-bit offsets and steps: R * inner alone can pass 2^31 elements.
    tile = x_ptr + outer * R * inner + rows[:, None].to(tl.int64) * inner + cols[None, :]
    step = tl.full([], BLOCK_R, tl.int64) * inner
    best = tl.full([BLOCK_R, BLOCK_I], float("-inf"), tl.float32)
    # Row 0 is right for a slot that never beats -inf: it only wins when every value is -inf.
    best_row = tl.zeros([BLOCK_R, BLOCK_I], tl.int32)
    for r0 in range(0, R, BLOCK_R):
        row = r0 + rows[:, None]
        v = tl.load(tile, mask=(row < R) & col_ok[None, :], other=float("-inf")).to(tl.float32)
        take = (v > best) | ((v != v) & (best == best))
        best = tl.where(take, v, best)
        best_row = tl.where(take, row, best_row)
        tile += step
    is_nan = best != best
    has_nan = tl.max(is_nan.to(tl.int32), axis=0) > 0
    top = tl.max(tl.where(is_nan, float("-inf"), best), axis=0)
    winner = tl.where(has_nan[None, :], is_nan, best == top[None, :])
    first = tl.min(tl.where(winner, best_row, R), axis=0)
    tl.store(idx_ptr + outer * inner + cols, first.to(tl.int64), mask=col_ok)


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
        grid = lambda meta: (outer, triton.cdiv(inner, meta["BLOCK_I"]))
        argmax_middle_tile_kernel[grid](x, idx, r, inner)
        return idx
