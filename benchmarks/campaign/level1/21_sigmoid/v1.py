"""Sigmoid (kb:1/21), step 1: one program per 1024-value block, exp of -|x| only.

x is 4096 x 393216 fp32 (1.61 G values, 6.44 GB); y = 1 / (1 + exp(-x)).
Written with e = exp(-|x|), which never overflows and is in (0, 1]:
sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0. The negative
branch keeps full relative precision far into the tail (sigmoid(-80) is about
1.8e-35, not 0 and not 1 - 1), and no input gives inf / inf.
Each program loads one contiguous block of 1024 values (4 warps, 8 a thread);
offsets are 64-bit (1.61 G values are within 25% of 2^31).

Floor: one read and one write, 2 x 6.44 GB = 12.9 GB; at the ~3.0 TB/s the H100
measures for a copy that is 4.3 ms. One exp and one division a value cost far
less than the bytes: pure streaming.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def sigmoid_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    e = tl.exp(-tl.abs(x))
    r = 1.0 / (1.0 + e)
    tl.store(y_ptr + offs, tl.where(x >= 0.0, r, e * r), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n > 0:
            sigmoid_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=4)
        return y
