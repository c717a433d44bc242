"""Conv3d -> ReLU -> LeakyReLU -> GELU -> Sigmoid -> + bias, step 1: cuDNN convolution without
its bias, one fused Triton epilogue.

Eager PyTorch runs six passes over the 0.94 GB (N, C, D, H, W) output after the
convolution (its bias add, four activations, the second bias); here one kernel reads
it once and writes once. The output is viewed as N*C rows of D*H*W values; a
program owns a block of one row, so its channel and both biases are scalars.

GELU is the exact (erf) form, as nn.functional.gelu's default. LeakyReLU after ReLU
changes nothing for finite values, but it is kept: it costs one select.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def activations_bias_rows_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, n_channels, row_len,
                                 BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    channel = row % n_channels
    cols = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < row_len  # the last block of a row is partial
    offsets = row.to(tl.int64) * row_len + cols
    y = tl.load(y_ptr + offsets, mask=mask, eviction_policy="evict_first")
    z = tl.maximum(y + tl.load(conv_bias_ptr + channel), 0.0)
    z = tl.where(z >= 0.0, z, 0.01 * z)
    z = 0.5 * z * (1.0 + tl.math.erf(z * 0.7071067811865476))
    z = 1.0 / (1.0 + tl.exp(-z))
    tl.store(out_ptr + offsets, z + tl.load(bias_ptr + channel), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous()
        n, c = y.shape[:2]
        row_len = y[0, 0].numel()
        out = torch.empty_like(y)
        block = 1024
        activations_bias_rows_kernel[(n * c, triton.cdiv(row_len, block))](
            y, self.conv.bias, self.bias, out, c, row_len, BLOCK=block, num_warps=4)
        return out
