"""Inclusive cumprod along one dimension (kb:1/90), step 2: step 1 plus a prefetched next chunk and autotuned chunks.

Step 1 issues a chunk's load only after the previous chunk's scan and store,
so each iteration waits out a full DRAM latency. Here the load of chunk i + 1
is issued before chunk i is scanned (software pipelining by hand), so the
latency overlaps the scan. Chunk width and warps are autotuned on the row
length.

Products are carried in float64 and rounded to float32 once per output: a
float32 partial product (inside the scan tree or in the carry) can overflow or
underflow where the true running product does not, and 0 * inf then turns an
exact 0 into NaN. The float64 arithmetic is free next to the memory traffic (a
few multiplies per element; H100 runs float64 at half the float32 rate).

Bytes: one read and one write of the tensor (2 x 4.3 GB at 32768 x 32768).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    return configs if named_args["x_ptr"].is_cuda else configs[:1]


@triton.jit
def _mul(a, b):
    return a * b


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
        triton.Config({"BLOCK": 4096}, num_warps=8),
        triton.Config({"BLOCK": 8192}, num_warps=16),
    ],
    key=["n_cols"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def cumprod_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    carry = tl.full([], 1.0, tl.float64)
    # Columns past the row's end load 1, the identity of the product.
    x = tl.load(x_row + cols, mask=cols < n_cols, other=1.0, eviction_policy="evict_first")
    for start in range(0, n_cols, BLOCK):
        nxt = start + BLOCK + cols
        x_next = tl.load(x_row + nxt, mask=nxt < n_cols, other=1.0, eviction_policy="evict_first")
        xd = x.to(tl.float64)
        tl.store(y_row + start + cols, (tl.cumprod(xd, axis=0) * carry).to(tl.float32), mask=start + cols < n_cols)
        carry *= tl.reduce(xd, 0, _mul)
        x = x_next


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
            cumprod_rows_kernel[(n_rows,)](xt, y, n_cols)
        return y.movedim(-1, self.dim)
