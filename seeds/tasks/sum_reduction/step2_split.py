"""Sum over dim 1, step 2: split the reduced axis across programs, then a deterministic second pass.

- Coalesced [BLOCK_N, BLOCK_D] tiles as in step 1.
- With B * D / BLOCK_D tiles alone the grid is too small to fill the GPU
  (256 programs for the task's 32 x 1024 outputs, 6 for the 2 x 257 extra
  shape): the reduced axis is split into SPLIT ranges so there are about
  four programs per SM, each writing a partial sum.
- A second small kernel adds the SPLIT partials of each output in a fixed
  order: the result does not depend on scheduling, unlike atomics. Partials
  are SPLIT * B * D floats, negligible next to the input.
- Tile height and warps are autotuned on the shape; offsets are 64-bit.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_D = 128  # fixed: the split is sized from the number of D tiles
ROWS_ALIGN = 64  # every split range is a multiple of any autotuned BLOCK_N


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in named_args.values())
    return configs if on_gpu else configs[:1]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": 32}, num_warps=8),
        triton.Config({"BLOCK_N": 16}, num_warps=4),
        triton.Config({"BLOCK_N": 64}, num_warps=8),
        triton.Config({"BLOCK_N": 32}, num_warps=4),
    ],
    key=["N", "D", "rows_per_split"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def partial_sum_kernel(x_ptr, partial_ptr, B, N, D, rows_per_split,
                       BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_d = tl.program_id(axis=0)
    b = tl.program_id(axis=1)
    split = tl.program_id(axis=2)
    d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    d_mask = d < D
    n_start = split * rows_per_split
    n_end = tl.minimum(n_start + rows_per_split, N)
    x_batch = x_ptr + b.to(tl.int64) * N * D
    acc = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    for start in range(n_start, n_end, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        # Ragged edges: the end of this split's range and the last d block.
        mask = (n[:, None] < n_end) & d_mask[None, :]
        acc += tl.load(x_batch + n[:, None].to(tl.int64) * D + d[None, :], mask=mask, other=0.0,
                       eviction_policy="evict_first")
    out = partial_ptr + (split.to(tl.int64) * B + b) * D + d
    tl.store(out, tl.sum(acc, axis=0), mask=d_mask)


@triton.jit
def sum_partials_kernel(partial_ptr, y_ptr, n_out, n_split, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(0, n_split):
        acc += tl.load(partial_ptr + s * n_out + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, acc, mask=mask)


def _num_sms(device: torch.device) -> int:
    # Off the GPU a small count still exercises the split path.
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 3 and self.dim == 1, "this kernel sums dim 1 of a 3-D tensor"
        x = x.contiguous()
        B, N, D = x.shape
        y = torch.empty((B, D), device=x.device, dtype=x.dtype)
        tiles = B * triton.cdiv(D, BLOCK_D)
        # About four programs per SM, each with at least 4 * ROWS_ALIGN rows.
        split = max(1, min(triton.cdiv(4 * _num_sms(x.device), tiles), N // (4 * ROWS_ALIGN)))
        rows_per_split = triton.cdiv(triton.cdiv(N, split), ROWS_ALIGN) * ROWS_ALIGN
        split = triton.cdiv(N, rows_per_split)
        partial = y if split == 1 else torch.empty((split, B, D), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(D, BLOCK_D), B, split)
        partial_sum_kernel[grid](x, partial, B, N, D, rows_per_split, BLOCK_D=BLOCK_D)
        if split > 1:
            n_out = B * D
            sum_partials_kernel[(triton.cdiv(n_out, 1024),)](partial, y, n_out, split, BLOCK=1024)
        return y
