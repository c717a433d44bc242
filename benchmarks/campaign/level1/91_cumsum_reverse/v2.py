"""Reverse cumsum along one dimension (kb:1/91), step 2: ascending vector loads, a reversed scan, a prefetched chunk.

Step 1 loaded each chunk in descending column order: the addresses still
coalesce, but Triton cannot prove contiguity, so every lane issues 4-byte
loads and stores (four times the memory instructions of 16-byte vectors).
Here chunks sit at ascending, BLOCK-aligned columns and are loaded in order
(vectorizable); tl.cumsum(reverse=True) yields the suffix sums in place.
Chunks are still visited from the last to the first, with the carry (the sum
of every later chunk) added before the store, and the next chunk's load is
issued before the current one is scanned so DRAM latency overlaps the scan.
Chunk width and warps are autotuned on the row length.

Sums are carried in float64 and rounded to float32 once per
output: a float32 running sum over 32768 values drifts by many ulps where the
row's partial sums cancel, while the float64 arithmetic is free next to the
memory traffic (a few adds per element; H100 runs float64 at half the float32
rate).

Bytes: one read and one write of the tensor (2 x 4.3 GB at 32768 x 32768).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    return configs if named_args["x_ptr"].is_cuda else configs[:1]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
        triton.Config({"BLOCK": 4096}, num_warps=8),
        triton.Config({"BLOCK": 4096}, num_warps=16),
    ],
    key=["n_cols"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def reverse_cumsum_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    lanes = tl.arange(0, BLOCK)
    carry = tl.zeros([], tl.float64)
    # The last chunk may run past the row's end: those lanes load 0, which
    # adds nothing to any suffix sum, and are not stored.
    start = (tl.cdiv(n_cols, BLOCK) - 1) * BLOCK
    x = tl.load(x_row + start + lanes, mask=start + lanes < n_cols, other=0.0, eviction_policy="evict_first")
    while start >= 0:
        prev = start - BLOCK
        # Before column 0 nothing is loaded: prev is BLOCK-aligned, so a chunk
        # is either wholly before the row or wholly inside it.
        x_prev = tl.load(x_row + prev + lanes, mask=(prev + lanes >= 0) & (prev + lanes < n_cols), other=0.0,
                         eviction_policy="evict_first")
        xd = x.to(tl.float64)
        tl.store(y_row + start + lanes, (tl.cumsum(xd, axis=0, reverse=True) + carry).to(tl.float32),
                 mask=start + lanes < n_cols)
        carry += tl.sum(xd, axis=0)
        x = x_prev
        start = prev


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xt = x.movedim(self.dim, -1).contiguous()
        y = torch.empty_like(xt)
        n_cols = xt.shape[-1]
        n_rows = xt.numel() // max(n_cols, 1)
        if xt.numel() > 0:
            reverse_cumsum_rows_kernel[(n_rows,)](xt, y, n_cols)
        return y.movedim(-1, self.dim)
