"""ConvTranspose2d -> Mish -> + v -> Hardtanh -> * s, step 1: cuDNN transposed convolution
without its bias, one fused Triton epilogue.

Eager PyTorch runs five passes over the 2.1 GB (N, C, 2H, 2W) output after the
transposed convolution (its bias, Mish, the add, Hardtanh, the scale); here one
kernel reads it once and writes once. A program owns a block of one (n, c) row, so
the convolution's bias is a scalar.

Mish(x) = x * tanh(softplus(x)); with n = e^x, tanh(log(1 + n)) = n(n + 2) / (n(n + 2) + 2),
and above x = 20 it is 1 in fp32 (n(n + 2) would overflow past x = 44).
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
def mish_add_hardtanh_scale_rows_kernel(y_ptr, conv_bias_ptr, out_ptr, n_channels, row_len, add_value, scale,
                                        BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    channel = row % n_channels
    cols = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < row_len  # the last block of a row is partial
    offsets = row.to(tl.int64) * row_len + cols
    y = tl.load(y_ptr + offsets, mask=mask, eviction_policy="evict_first")
    z = _mish(y + tl.load(conv_bias_ptr + channel)) + add_value
    z = tl.minimum(tl.maximum(z, -1.0), 1.0)
    tl.store(out_ptr + offsets, z * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, add_value, scale):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding,
                                                 output_padding)
        self.add_value = add_value
        self.scale = scale

    def forward(self, x):
        ct = self.conv_transpose
        y = F.conv_transpose2d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding, ct.groups,
                               ct.dilation).contiguous()
        n, c, h, w = y.shape
        out = torch.empty_like(y)
        block = 1024
        mish_add_hardtanh_scale_rows_kernel[(n * c, triton.cdiv(h * w, block))](
            y, ct.bias, out, c, h * w, float(self.add_value), float(self.scale), BLOCK=block, num_warps=4)
        return out
