"""Conv2d -> ReLU -> + bias, step 1: cuDNN convolution without its bias, one fused Triton epilogue.

PyTorch's cuDNN path adds the convolution's bias in a pass of its own, and ReLU
and the second bias add are two more: three reads and three writes of the
(N, C, H, W) output after the convolution wrote it. Here the convolution runs
without its bias and one kernel reads its output once and writes the result
once: relu(y + conv_bias[c]) + bias[c].

The output is viewed as N*C rows of H*W values. A program owns one block of one
row, so its channel is a single scalar and both biases are two scalar loads.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def relu_bias_rows_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, n_channels, row_len,
                          BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    channel = row % n_channels
    cols = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < row_len  # the last block of a row is partial
    offsets = row.to(tl.int64) * row_len + cols
    y = tl.load(y_ptr + offsets, mask=mask, eviction_policy="evict_first")
    z = tl.maximum(y + tl.load(conv_bias_ptr + channel), 0.0) + tl.load(bias_ptr + channel)
    tl.store(out_ptr + offsets, z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous()
        n, c, h, w = y.shape
        out = torch.empty_like(y)
        block = 1024
        relu_bias_rows_kernel[(n * c, triton.cdiv(h * w, block))](
            y, self.conv.bias, self.bias, out, c, h * w, BLOCK=block, num_warps=4)
        return out
