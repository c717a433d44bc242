"""Sum over dim 1, optimized: narrow tiles that fill the GPU without a split, split kept for small outputs.

- Coalesced [BLOCK_N, BLOCK_D] tiles as in step 1, 64 columns wide instead of
  128: the task's 32 x 1024 outputs become 512 programs, about four per SM,
  each summing its whole column range in registers. No partial sums and no
  second kernel at this shape; on the H100 this measured faster than step 2's
  128-wide tiles split three ways (benchmarks/tune_memory_bound.py).
- Outputs too few to give each SM two programs (the 2 x 257 extra shape has 10
  tiles) still split the reduced axis, and a second small kernel adds the
  partials in a fixed order, so the result does not depend on scheduling.
- Tile height and warps are autotuned on the shape; offsets are 64-bit.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_D = 64  # fixed: the split is sized from the number of D tiles
ROWS_ALIGN = 64  # every split range is a multiple of any autotuned BLOCK_N


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in named_args.values())
    return configs if on_gpu else configs[:1]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": 16}, num_warps=8),
        triton.Config({"BLOCK_N": 32}, num_warps=8),
        triton.Config({"BLOCK_N": 16}, num_warps=4),
        triton.Config({"BLOCK_N": 64}, num_warps=4),
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
        # At least two programs per SM, each with at least 4 * ROWS_ALIGN rows.
        split = max(1, min(triton.cdiv(2 * _num_sms(x.device), tiles), N // (4 * ROWS_ALIGN)))
        rows_per_split = triton.cdiv(triton.cdiv(N, split), ROWS_ALIGN) * ROWS_ALIGN
        split = triton.cdiv(N, rows_per_split)
        partial = y if split == 1 else torch.empty((split, B, D), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(D, BLOCK_D), B, split)
        partial_sum_kernel[grid](x, partial, B, N, D, rows_per_split, BLOCK_D=BLOCK_D)
        if split > 1:
            n_out = B * D
            sum_partials_kernel[(triton.cdiv(n_out, 1024),)](partial, y, n_out, split, BLOCK=1024)
        return y
