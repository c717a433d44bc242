"""Swish / SiLU (kb:1/25), step 1: one program per 1024-value block, x times a stable sigmoid.

x is 4096 x 393216 fp32 (1.61 G values, 6.44 GB); y = x * sigmoid(x). The
reference materializes sigmoid(x) and multiplies in a second kernel (four
passes of DRAM traffic); here both happen in registers, one read and one write.
The sigmoid uses e = exp(-|x|), which never overflows: 1 / (1 + e) for x >= 0,
e / (1 + e) for x < 0, so large negative inputs give a tiny negative product
(about x * e^x), never inf * 0 = NaN.
Each program loads one contiguous block of 1024 values (4 warps, 8 a thread);
offsets are 64-bit (1.61 G values are within 25% of 2^31).

Floor: one read and one write, 2 x 6.44 GB = 12.9 GB; at the ~3.0 TB/s the H100
measures for a copy that is 4.3 ms (eager's two kernels move twice that).
One exp and one division a value: pure streaming.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def swish_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    e = tl.exp(-tl.abs(x))
    r = 1.0 / (1.0 + e)
    s = tl.where(x >= 0.0, r, e * r)
    tl.store(y_ptr + offs, x * s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n > 0:
            swish_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=4)
        return y
