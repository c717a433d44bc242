"""ConvTranspose2d -> - bias -> tanh, step 1: cuDNN transposed convolution without its bias,
one fused Triton epilogue.

Eager PyTorch adds the convolution's bias, subtracts the second bias and applies
tanh in three passes over the 2.2 GB (N, C, 513, 513) output; here one kernel reads
it once and writes once.

tanh(z) = sign(z) (1 - e^(-2|z|)) / (1 + e^(-2|z|)): the exponential never
overflows, and for small |z| the absolute error stays at fp32 rounding.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _tanh(z):
    t = tl.exp(-2.0 * tl.abs(z))
    r = (1.0 - t) / (1.0 + t)
    return tl.where(z < 0.0, -r, r)


@triton.jit
def bias_sub_tanh_rows_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, n_channels, row_len,
                              BLOCK: tl.constexpr):
    # One program: one block of one (n, c) row, so both biases are scalars.
    row = tl.program_id(axis=0)
    channel = row % n_channels
    cols = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < row_len  # the last block of a row is partial
    offsets = row.to(tl.int64) * row_len + cols
    y = tl.load(y_ptr + offsets, mask=mask, eviction_policy="evict_first")
    z = (y + tl.load(conv_bias_ptr + channel)) - tl.load(bias_ptr + channel)
    tl.store(out_ptr + offsets, _tanh(z), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape, stride=2, padding=1, output_padding=1):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        ct = self.conv_transpose
        y = F.conv_transpose2d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding, ct.groups,
                               ct.dilation).contiguous()
        n, c, h, w = y.shape
        out = torch.empty_like(y)
        block = 1024
        bias_sub_tanh_rows_kernel[(n * c, triton.cdiv(h * w, block))](
            y, ct.bias, self.bias, out, c, h * w, BLOCK=block, num_warps=4)
        return out
