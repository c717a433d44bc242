"""Inclusive cumsum along one dimension (kb:1/89), step 1: one program per row, chunked scan with a carry.

The scanned dimension is made the last, contiguous one (a no-op for the
problem's dim=1 of a 2-D input). Each program walks its row in BLOCK-wide
chunks: tl.cumsum scans a chunk inside the program, and a scalar carry (the
sum of every earlier chunk) is added before the store. Rows are independent and
there are tens of thousands of them, so one row per program already fills the
GPU; no cross-program look-back is needed.

Bytes: one read and one write of the tensor (2 x 4.3 GB at the problem's
32768 x 32768), the whole floor.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    carry = tl.zeros([], tl.float32)
    for start in range(0, n_cols, BLOCK):
        # Columns past the row's end load 0: they add nothing to the sums.
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        tl.store(y_row + start + cols, tl.cumsum(x, axis=0) + carry, mask=mask)
        carry += tl.sum(x, axis=0)


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
            cumsum_rows_kernel[(n_rows,)](xt, y, n_cols, BLOCK=1024, num_warps=4)
        return y.movedim(-1, self.dim)
