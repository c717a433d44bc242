"""Inclusive cumprod along one dimension (kb:1/90), step 3: step 2 with zero-aware products.

Step 2 was incorrect on sign-symmetric wide inputs with exact zeros: the
running product of a row is exactly 0 from the first zero on, but a chunk's
float64 product past that point can still overflow (|x| ~ 4 gives ~0.75 nats
per element, float64 overflows at 709), and 0 * inf is NaN. Every product
here treats a zero factor as absorbing before it multiplies: in the scan tree,
in the chunk reduction and where the carry meets a chunk. Where the true
running product is finite and non-zero nothing changes.

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
def _mul_zero_absorbs(a, b):
    # A product with a zero factor is zero, even when the other side has overflowed.
    return tl.where((a == 0) | (b == 0), tl.zeros_like(a), a * b)


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
        triton.Config({"BLOCK": 4096}, num_warps=8),
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
    carry = tl.full([BLOCK], 1.0, tl.float64)  # the row's product so far, the same in every lane
    # Columns past the row's end load 1, the identity of the product.
    x = tl.load(x_row + cols, mask=cols < n_cols, other=1.0, eviction_policy="evict_first")
    for start in range(0, n_cols, BLOCK):
        nxt = start + BLOCK + cols
        x_next = tl.load(x_row + nxt, mask=nxt < n_cols, other=1.0, eviction_policy="evict_first")
        xd = x.to(tl.float64)
        local = tl.associative_scan(xd, 0, _mul_zero_absorbs)
        tl.store(y_row + start + cols, _mul_zero_absorbs(carry, local).to(tl.float32), mask=start + cols < n_cols)
        total = tl.reduce(xd, 0, _mul_zero_absorbs)
        carry = _mul_zero_absorbs(carry, tl.full([BLOCK], 1.0, tl.float64) * total)
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
