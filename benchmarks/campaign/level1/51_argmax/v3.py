"""Argmax over one dimension (kb:1/51), step 3: item-major launch order, evict-first loads.

Step 2's kernel, launched differently. Its grid was (outer, column blocks)
with the outer index varying fastest, so the programs running at one time
were spread over up to 128 different (4096 x 4095) items, each reading a
1 KiB piece of a row 16 KiB away from its neighbour's. Here the grid is
one-dimensional with the column block varying fastest: the 16 programs of
one item run side by side and together read whole 16 KiB rows, and
consecutive rows, so the DRAM pages and L2 lines opened are used in full
by neighbours in time. The input is read exactly once, so its loads are
marked evict-first to keep it from displacing anything in L2. The program
index is split into (item, column block) in the kernel, which also lifts
the 65,535 limit a second grid axis would put on the number of items.
Tiles, the element-wise accumulation and the final merge are step 2's.

Floor: one read of x, 8.59 GB: 2.9 ms at 3.0 TB/s.
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
    # Column blocks of one item are consecutive programs, so they run together.
    n_col_blocks = tl.cdiv(inner, BLOCK_I)
    pid = tl.program_id(axis=0)
    outer = (pid // n_col_blocks).to(tl.int64)
    cols = (pid % n_col_blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
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
        v = tl.load(tile, mask=(row < R) & col_ok[None, :], eviction_policy="evict_first",
                    other=float("-inf")).to(tl.float32)
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
        grid = lambda meta: (outer * triton.cdiv(inner, meta["BLOCK_I"]),)
        argmax_middle_tile_kernel[grid](x, idx, r, inner)
        return idx
