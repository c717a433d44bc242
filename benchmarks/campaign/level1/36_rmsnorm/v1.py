"""RMS norm over channels (kb:1/36), step 1: two loops over channels, one program per spatial block.

x has shape (batch, C, *spatial); every spatial position is normalized by the
root mean square of its C channel values: y = x / sqrt(mean_c(x^2) + eps).
The C values of one position sit S = prod(spatial) elements apart, but a block
of BLOCK_S neighbouring positions is contiguous in every channel, so a
program owns (one batch item, BLOCK_S positions) and walks the channels:
every load is a contiguous, coalesced row of BLOCK_S values.

The first loop accumulates the sum of squares, the second re-reads the same
C x BLOCK_S values (64 KiB at C = 64, still in L1/L2) and writes x / rms.
DRAM sees one read and one write: 2 x 7.5 GB at the problem's size, 5.0 ms at
3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_channels_kernel(x_ptr, y_ptr, C, S, eps, BLOCK_S: tl.constexpr):
    n = tl.program_id(axis=0).to(tl.int64)
    offs = tl.program_id(axis=1) * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = offs < S
    base = n * C * S + offs
    sumsq = tl.zeros([BLOCK_S], tl.float32)
    for c in range(C):
        x = tl.load(x_ptr + base + c * S, mask=mask, other=0.0)
        sumsq += x * x
    rms = tl.sqrt(sumsq / C + eps)
    for c in range(C):
        x = tl.load(x_ptr + base + c * S, mask=mask, other=0.0)
        tl.store(y_ptr + base + c * S, x / rms, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c = x.shape[0], x.shape[1]
        s = x.numel() // max(n * c, 1)
        BLOCK_S = 256
        if x.numel() > 0:
            rmsnorm_channels_kernel[(n, triton.cdiv(s, BLOCK_S))](x, y, c, s, self.eps, BLOCK_S=BLOCK_S, num_warps=4)
        return y
