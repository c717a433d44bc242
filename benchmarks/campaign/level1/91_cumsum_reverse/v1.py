"""Reverse cumsum along one dimension (kb:1/91), step 1: one program per row, chunks walked from the end.

y[i] = x[i] + x[i+1] + ... + x[n-1]. The reference flips, scans and flips back
(three passes over memory); here each program walks its row from the last
chunk to the first, loads each chunk in descending column order so a forward
tl.cumsum yields the suffix sums, adds the carry (the sum of every later
chunk) and stores back in the same descending order. The flips cost only
address arithmetic. The scanned dimension is made the last, contiguous one (a
no-op for the problem's dim=1 of a 2-D input).

Bytes: one read and one write of the tensor (2 x 4.3 GB at 32768 x 32768).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def reverse_cumsum_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    lanes = tl.arange(0, BLOCK)
    carry = tl.zeros([], tl.float32)
    for start in range(0, n_cols, BLOCK):
        # Lane j holds column n_cols - 1 - (start + j): lane order is reversed
        # column order. Lanes before column 0 (the row's first chunk is the
        # last one visited) load 0 and are not stored.
        cols = n_cols - 1 - start - lanes
        mask = cols >= 0
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        tl.store(y_row + cols, tl.cumsum(x, axis=0) + carry, mask=mask)
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
            reverse_cumsum_rows_kernel[(n_rows,)](xt, y, n_cols, BLOCK=1024, num_warps=4)
        return y.movedim(-1, self.dim)
