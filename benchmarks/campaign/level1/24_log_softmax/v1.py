"""Log-softmax over a dimension (kb:1/24), step 1: one program per row, online log-sum-exp, then a subtracting sweep.

x is 4096 x 393216 fp32 and the problem's dim is 1 (other dims are moved last
first); y = x - logsumexp(x) over each row (1.5 MiB). The output is computed as
x - (m + log(s)), never as log(softmax), which would be -inf wherever the
softmax underflows (any value 104 below its row's max). The program walks the
row in BLOCK-wide chunks, twice:
- sweep 1 keeps a running max m and a running sum s of exp(x - m), the old sum
  rescaled by exp(m_old - m_new) when a chunk raises the max: one read;
- sweep 2 re-reads each chunk and writes x - (m + log(s)).
Every exponent is <= 0, so no magnitude overflows, and s >= 1 (the max term)
keeps log(s) finite. Lanes past the row's end load -inf and add 0. Row offsets
are 64-bit (4096 x 393216 > 2^31).

DRAM: the rows in flight overflow the 50 MB L2 thirty times over, so sweep 2
re-reads from DRAM: three passes of 6.44 GB = 19.3 GB, 6.5 ms at ~3.0 TB/s,
against the two-pass floor of 4.3 ms.
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
def log_softmax_looped_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
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

    lse = m + tl.log(s)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        tl.store(y_row + start + cols, x - lse, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xt = x.movedim(self.dim, -1).contiguous()
        x2 = xt.view(-1, xt.shape[-1])
        y = torch.empty_like(x2)
        n_rows, n_cols = x2.shape
        if x2.numel() > 0:
            log_softmax_looped_kernel[(n_rows,)](x2, y, n_cols, num_warps=8,
                BLOCK=BLOCK_OFF_GPU if x2.device.type == "cpu" else BLOCK)
        return y.view(xt.shape).movedim(-1, self.dim)
