"""Tanh (kb:1/22), step 1: one program per 1024-value block, exp of -2|x| only.

x is 4096 x 393216 fp32 (1.61 G values, 6.44 GB); y = tanh(x) elementwise.
Triton has no tanh of its own off libdevice (and the interpreter has no
libdevice), so it is written from exp with nothing that can overflow:
t = exp(-2|x|) is in (0, 1], tanh(|x|) = (1 - t) / (1 + t), and the sign of x
is put back. 1 - t cancels for small |x|, so below |x| = 1/16 the odd Taylor
series x - x^3/3 + 2x^5/15 - 17x^7/315 is used instead (its first dropped term
is below 1e-11 relative there); above, 1 - t >= 0.117 loses at most a few ulps.
Large |x| gives t = 0 and exactly +-1.
Each program loads one contiguous block of 1024 values (4 warps, 8 a thread);
offsets are 64-bit (1.61 G values are within 25% of 2^31).

Floor: one read and one write, 2 x 6.44 GB = 12.9 GB; at the ~3.0 TB/s the H100
measures for a copy that is 4.3 ms. One exp, one division and a short
polynomial a value cost far less than the bytes: pure streaming.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def tanh_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    a = tl.abs(x)
    t = tl.exp(-2.0 * a)
    big = (1.0 - t) / (1.0 + t)
    a2 = a * a
    small = a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0))))
    r = tl.where(a < 0.0625, small, big)
    tl.store(y_ptr + offs, tl.where(x < 0.0, -r, r), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n > 0:
            tanh_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=4)
        return y
