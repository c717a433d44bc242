"""HardSigmoid (kb:1/28), step 1: one program per 1024-value block.

x is 4096 x 393216 fp32 (1.61 G values, 6.44 GB); y = clamp(x + 3, 0, 6) / 6,
elementwise, computed in the same order as torch (shift, clamp, divide), so the
result is within an ulp of the reference, including at the kinks x = -3 and
x = 3. Each program loads one contiguous block of 1024 values (4 warps, 8 a
thread); offsets are 64-bit (1.61 G values are within 25% of 2^31).

Floor: one read and one write, 2 x 6.44 GB = 12.9 GB; at the ~3.0 TB/s the H100
measures for a copy that is 4.3 ms. Four arithmetic ops a value: pure
streaming.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def hardsigmoid_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n > 0:
            hardsigmoid_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=4)
        return y
