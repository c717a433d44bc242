"""Softplus (kb:1/29), step 1: one program per 1024-value block, max(x, 0) + log1p(exp(-|x|)).

x is 4096 x 393216 fp32 (1.61 G values, 6.44 GB); y = log(1 + exp(x)) (beta 1;
torch returns x itself above the threshold 20, where the two agree in fp32).
Written as max(x, 0) + log1p(e) with e = exp(-|x|) in (0, 1]: exp never
overflows, and for large positive x the correction vanishes below x's ulp.
log1p has no Triton form off libdevice, so it is computed with Goldberg's
trick: u = 1 + e, log1p(e) = log(u) * e / (u - 1) (and e itself when u rounds
to 1), accurate to a few ulps even where e is far below 1e-7; for large negative
x that keeps y ~ exp(x) with full relative precision instead of rounding to 0.
Each program loads one contiguous block of 1024 values (4 warps, 8 a thread);
offsets are 64-bit (1.61 G values are within 25% of 2^31).

Floor: one read and one write, 2 x 6.44 GB = 12.9 GB; at the ~3.0 TB/s the H100
measures for a copy that is 4.3 ms. One exp, one log and one division a value:
pure streaming.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def softplus_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    e = tl.exp(-tl.abs(x))
    u = 1.0 + e
    # u - 1 is exact (u in [1, 2]); where it is 0, e is below half an ulp of 1.
    log1p_e = tl.where(u == 1.0, e, tl.log(u) * (e / (u - 1.0)))
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) + log1p_e, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n > 0:
            softplus_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=4)
        return y
