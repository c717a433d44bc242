"""GELU, exact erf form (kb:1/26), step 1: one program per 1024-value block.

x is 4096 x 393216 fp32 (1.61 G values, 6.44 GB); y = x * Phi(x) =
0.5 * x * (1 + erf(x / sqrt(2))), torch's default (approximate='none'), not the
tanh approximation, whose error (up to about 5e-4) exceeds the 1e-4 tolerance.
erf saturates to -1 for large negative x, so the product is a clean 0 there
(the true value is below 1e-30 past x = -12); nothing overflows.
Each program loads one contiguous block of 1024 values (4 warps, 8 a thread);
offsets are 64-bit (1.61 G values are within 25% of 2^31).

Floor: one read and one write, 2 x 6.44 GB = 12.9 GB; at the ~3.0 TB/s the H100
measures for a copy that is 4.3 ms. erf is a polynomial of some 20 FMAs: about
0.03 TFLOP in all, under 1 ms at fp32 peak and hidden under the loads.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n > 0:
            gelu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=4)
        return y
