"""SELU (kb:1/27), step 1: one program per 1024-value block.

x is 4096 x 393216 fp32 (1.61 G values, 6.44 GB); y = scale * x for x > 0 and
scale * alpha * (exp(x) - 1) otherwise, with alpha = 1.6732632423543772 and
scale = 1.0507009873554805 (the self-normalizing constants torch uses). The
exp argument is clamped at 0, so the branch that is not taken cannot overflow
for large positive x; for large negative x, exp underflows to 0 and y is
exactly -scale * alpha. exp(x) - 1 alone cancels near 0 (x = -1e-8 would give
0), so it is corrected with Kahan's trick: with u = exp(x),
expm1(x) = (u - 1) * x / log(u), x itself where u rounds to 1, and -1 where
u - 1 rounds to -1 (x below about -17); a few ulps everywhere.
Each program loads one contiguous block of 1024 values (4 warps, 8 a thread);
offsets are 64-bit (1.61 G values are within 25% of 2^31).

Floor: one read and one write, 2 x 6.44 GB = 12.9 GB; at the ~3.0 TB/s the H100
measures for a copy that is 4.3 ms. One exp a value: pure streaming.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
ALPHA = 1.6732632423543772
SCALE = 1.0507009873554805


@triton.jit
def selu_kernel(x_ptr, y_ptr, n_elements, alpha, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    xn = tl.minimum(x, 0.0)
    u = tl.exp(xn)
    um1 = u - 1.0
    expm1 = tl.where(u == 1.0, xn, tl.where(um1 == -1.0, -1.0, um1 * xn / tl.log(u)))
    neg = alpha * expm1
    tl.store(y_ptr + offs, scale * tl.where(x > 0.0, x, neg), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n > 0:
            selu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, ALPHA, SCALE, BLOCK=BLOCK, num_warps=4)
        return y
