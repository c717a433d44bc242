"""Max over one dimension, values only (kb:1/49), step 2: a [BLOCK_R, BLOCK_I] tile of rows per iteration, autotuned.

Same mapping as step 1: x viewed as (outer, R, inner) = (128, 4096, 4095),
one program per (outer index, BLOCK_I contiguous columns), so every load is
a set of coalesced row segments. Step 1 loads one row segment per
iteration: one 1 KiB request per program in flight, too little to cover
DRAM latency. Here each iteration loads BLOCK_R rows at once and folds them
element-wise into a [BLOCK_R, BLOCK_I] tile of running maxima: BLOCK_R
independent loads per thread are in flight together, and the cross-row
reduction happens once, after the loop.

The element-wise fold uses the NaN-propagating maximum (one instruction on
Hopper), so a NaN stays in its slot; the final reduction over the tile's
rows ignores NaN, so a per-column check of the tile puts it back: torch.max
returns NaN for a column holding one.

Rows of 4095 floats start at addresses that are not 16-byte aligned, so
vector loads are not available; more loads in flight is what makes up for
it. Tile shape and warps are autotuned on (R, inner).

Floor: one read of x, 8.59 GB, and a 2 MB write: 2.9 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    return configs if named_args["x_ptr"].is_cuda else configs[:1]


def _configs():
    # BLOCK_R x BLOCK_I floats per iteration: 16-64 loads in flight per thread.
    shapes = [(32, 256, 8), (16, 256, 4), (16, 512, 8), (64, 128, 8), (8, 512, 4)]
    return [triton.Config({"BLOCK_R": r, "BLOCK_I": i}, num_warps=w) for r, i, w in shapes]


@triton.autotune(configs=_configs(), key=["R", "inner"], prune_configs_by={"early_config_prune": _keep_one_config_off_gpu})
@triton.jit
def max_middle_tile_kernel(x_ptr, y_ptr, R, inner, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    outer = tl.program_id(axis=0).to(tl.int64)
    cols = tl.program_id(axis=1) * BLOCK_I + tl.arange(0, BLOCK_I)
    rows = tl.arange(0, BLOCK_R)
    col_ok = cols < inner
    # 64-bit offsets and steps: R * inner alone can pass 2^31 elements.
    tile = x_ptr + outer * R * inner + rows[:, None].to(tl.int64) * inner + cols[None, :]
    step = tl.full([], BLOCK_R, tl.int64) * inner
    acc = tl.full([BLOCK_R, BLOCK_I], float("-inf"), tl.float32)
    for r0 in range(0, R, BLOCK_R):
        mask = ((r0 + rows)[:, None] < R) & col_ok[None, :]
        v = tl.load(tile, mask=mask, other=float("-inf")).to(tl.float32)
        acc = tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL)
        tile += step
    has_nan = tl.max((acc != acc).to(tl.int32), axis=0) > 0
    best = tl.where(has_nan, float("nan"), tl.max(acc, axis=0))
    tl.store(y_ptr + outer * inner + cols, best, mask=col_ok)


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
            raise IndexError("max(): cannot reduce over a dimension of size 0")
        out_shape = list(x.shape)
        del out_shape[dim]
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        if y.numel() == 0:
            return y
        grid = lambda meta: (outer, triton.cdiv(inner, meta["BLOCK_I"]))
        max_middle_tile_kernel[grid](x, y, r, inner)
        return y
