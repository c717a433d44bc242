"""L1 normalization of rows (kb:1/38), step 1: one program per row, a sum loop and a divide loop.

y = x / mean(|x|, dim=1). Each program owns one row: the first loop adds
|x| over BLOCK-wide chunks, the second re-reads the row and writes x / mean.
A row is 65535 floats (256 KiB), too big for one program's registers, so it
is read twice; the second read finds part of the row in L2 when few enough
rows are in flight.

Bytes: one write plus one or two reads of 8.6 GB (32768 x 65535): 5.7 ms at
3.0 TB/s if the re-read hits L2, 8.6 ms if it does not.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l1norm_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0)
        acc += tl.abs(x)
    mean = tl.sum(acc, axis=0) / n_cols
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask)
        tl.store(y_row + start + cols, x / mean, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The reduction is over dim 1; rows are everything else.
        xt = x.movedim(1, -1).contiguous()
        y = torch.empty_like(xt)
        n_cols = xt.shape[-1]
        n_rows = xt.numel() // max(n_cols, 1)
        if xt.numel() > 0:
            l1norm_rows_kernel[(n_rows,)](xt, y, n_cols, BLOCK=2048, num_warps=8)
        return y.movedim(-1, 1)
