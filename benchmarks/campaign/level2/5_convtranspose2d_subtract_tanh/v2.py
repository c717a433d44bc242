"""ConvTranspose2d -> - bias -> tanh, step 2: the transposed convolution in channels-last
layout, the epilogue reading NHWC and writing NCHW.

Step 1 ran cuDNN on NCHW tensors. cuDNN's fp32/TF32 tensor-core kernels work on
NHWC: for NCHW operands it either runs slower NCHW variants or transposes around an
NHWC kernel, the output transpose being one more read and write of the 2.2 GB
result. Here the 0.5 GB input is converted once, cuDNN writes NHWC directly, and
the fused epilogue transposes while it computes, so the output is still read once
and written once. torch.compile makes the same layout choice for convolutions.

Epilogue tile: [BLOCK_S positions, BLOCK_C channels] of one sample, loaded with the
channels contiguous and stored with the positions contiguous.
tanh(z) = sign(z) (1 - e^(-2|z|)) / (1 + e^(-2|z|)), as in step 1.
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
def bias_sub_tanh_nhwc_to_nchw_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, C, S,
                                      BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr):
    s = tl.program_id(axis=0) * BLOCK_S + tl.arange(0, BLOCK_S)
    c = tl.program_id(axis=1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n = tl.program_id(axis=2).to(tl.int64)
    c_ok = c < C
    mask = (s[:, None] < S) & c_ok[None, :]
    y = tl.load(y_ptr + n * S * C + s[:, None] * C + c[None, :], mask=mask, eviction_policy="evict_first")
    conv_bias = tl.load(conv_bias_ptr + c, mask=c_ok, other=0.0)
    bias = tl.load(bias_ptr + c, mask=c_ok, other=0.0)
    z = (y + conv_bias[None, :]) - bias[None, :]
    tl.store(out_ptr + n * C * S + c[None, :] * S + s[:, None], _tanh(z), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape, stride=2, padding=1, output_padding=1):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        ct = self.conv_transpose
        x = x.contiguous(memory_format=torch.channels_last)
        y = F.conv_transpose2d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding, ct.groups,
                               ct.dilation).contiguous(memory_format=torch.channels_last)
        n, c, h, w = y.shape
        out = torch.empty((n, c, h, w), device=y.device, dtype=y.dtype)
        block_c = min(triton.next_power_of_2(c), 64)
        block_s = 4096 // block_c
        bias_sub_tanh_nhwc_to_nchw_kernel[(triton.cdiv(h * w, block_s), triton.cdiv(c, block_c), n)](
            y, ct.bias, self.bias, out, c, h * w, BLOCK_S=block_s, BLOCK_C=block_c, num_warps=8)
        return out
