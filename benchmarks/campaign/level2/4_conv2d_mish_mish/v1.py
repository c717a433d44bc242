"""Conv2d -> Mish -> Mish, step 1: cuDNN convolution without its bias, one fused Triton epilogue.

Eager PyTorch adds the convolution's bias in a pass of its own and runs each Mish
as another: three reads and three writes of the 2.1 GB (N, C, H, W) output. Here
one kernel reads it once, applies bias, Mish and Mish in registers, and writes once.

Mish(x) = x * tanh(softplus(x)). With n = e^x, tanh(log(1 + n)) = n(n + 2) / (n(n + 2) + 2):
one exponential and one division, accurate for very negative x (no cancellation).
Above x = 20, tanh(softplus(x)) is 1 in fp32 and n(n + 2) would overflow past x = 44.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _mish(x):
    n = tl.exp(tl.minimum(x, 20.0))
    t = n * (n + 2.0)
    return tl.where(x > 20.0, x, x * (t / (t + 2.0)))


@triton.jit
def bias_mish_mish_rows_kernel(y_ptr, conv_bias_ptr, out_ptr, n_channels, row_len, BLOCK: tl.constexpr):
    # One program: one block of one (n, c) row, so the bias is a scalar.
    row = tl.program_id(axis=0)
    channel = row % n_channels
    cols = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < row_len  # the last block of a row is partial
    offsets = row.to(tl.int64) * row_len + cols
    y = tl.load(y_ptr + offsets, mask=mask, eviction_policy="evict_first")
    z = _mish(_mish(y + tl.load(conv_bias_ptr + channel)))
    tl.store(out_ptr + offsets, z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous()
        n, c, h, w = y.shape
        out = torch.empty_like(y)
        block = 1024
        bias_mish_mish_rows_kernel[(n * c, triton.cdiv(h * w, block))](
            y, self.conv.bias, out, c, h * w, BLOCK=block, num_warps=4)
        return out
