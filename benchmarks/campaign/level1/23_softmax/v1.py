"""Softmax over dim 1 (kb:1/23), step 1: one program per row, online statistics, then a normalizing sweep.

x is 4096 x 393216 fp32; every row (1.5 MiB) is normalized:
y = exp(x - max) / sum(exp(x - max)). A row is far wider than one program's
registers, so the program walks it in BLOCK-wide chunks, twice:
- sweep 1 keeps a running max m and a running sum s of exp(x - m): a chunk
  with a larger max rescales the old sum by exp(m_old - m_new) first, so max
  and sum come out of a single read (the online softmax);
- sweep 2 re-reads each chunk and writes exp(x - m) * (1 / s).
Every exponent is <= 0, so nothing overflows whatever the inputs' magnitude;
lanes past the row's end load -inf and add exp(-inf) = 0. The first chunk
always holds real values, so m is finite from then on and exp(m_old - m_new)
never sees -inf - -inf. Row offsets are 64-bit (4096 x 393216 > 2^31).

DRAM: 4096 rows in flight over ~1000 resident programs are 1.5 GB of rows,
30x the 50 MB L2, so sweep 2 re-reads from DRAM: three passes of 6.44 GB
(read, read, write) = 19.3 GB, 6.5 ms at ~3.0 TB/s, against the two-pass
floor of 4.3 ms.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
# The Triton interpreter (CPU tensors) checks rows of a few hundred values: a small chunk there
# still takes the loop over several chunks.
BLOCK_OFF_GPU = 128


@triton.jit
def softmax_looped_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)

    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new

    inv_s = 1.0 / s
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
        tl.store(y_row + start + cols, tl.exp(x - m) * inv_s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # torch.softmax(x, dim=1): the softmax dimension is made the last, contiguous one.
        xt = x.movedim(1, -1).contiguous()
        x2 = xt.view(-1, xt.shape[-1])
        y = torch.empty_like(x2)
        n_rows, n_cols = x2.shape
        if x2.numel() > 0:
            softmax_looped_kernel[(n_rows,)](x2, y, n_cols, num_warps=8,
                BLOCK=BLOCK_OFF_GPU if x2.device.type == "cpu" else BLOCK)
        return y.view(xt.shape).movedim(-1, 1)
