"""Inclusive cumprod along one dimension (kb:1/90), step 1: one program per row, chunked scan with a carry.

The scanned dimension is made the last, contiguous one (a no-op for the
problem's dim=1 of a 2-D input). Each program walks its row in BLOCK-wide
chunks: tl.cumprod scans a chunk inside the program and the chunk is scaled by
a scalar carry, the product of every earlier chunk. Rows are independent and
numerous, so one row per program fills the GPU.

Bytes: one read and one write of the tensor (2 x 4.3 GB at 32768 x 32768).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def cumprod_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    carry = tl.full([], 1.0, tl.float32)
    for start in range(0, n_cols, BLOCK):
        # Columns past the row's end load 1, the identity of the product.
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=1.0)
        tl.store(y_row + start + cols, tl.cumprod(x, axis=0) * carry, mask=mask)
        carry *= tl.reduce(x, 0, _mul)


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
            cumprod_rows_kernel[(n_rows,)](xt, y, n_cols, BLOCK=1024, num_warps=4)
        return y.movedim(-1, self.dim)
