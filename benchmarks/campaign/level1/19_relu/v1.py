"""ReLU (kb:1/19), step 1: one program per 1024-value block, 64-bit offsets.

x is 4096 x 393216 fp32 (1.61 G values, 6.44 GB); y = max(x, 0) elementwise.
Each program loads one contiguous block of 1024 values (4 warps, 8 values a
thread), keeps the non-negative ones and stores the block. Offsets are 64-bit:
1.61 G values are within 25% of 2^31, and a larger batch would wrap 32-bit
offsets without an error. NaN is kept (it is not below 0), as torch.relu does.

Floor: one read and one write, 2 x 6.44 GB = 12.9 GB; at the ~3.0 TB/s the H100
measures for a copy that is 4.3 ms. One compare a value: pure streaming.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    # Only the last block can run past the end.
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n > 0:
            relu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=4)
        return y
