"""ConvTranspose3d -> + bias -> + x -> * x -> + x, step 1: cuDNN transposed convolution without
its bias, one fused Triton epilogue.

With y the transposed convolution's output (its own bias included), the reference
computes ((y + bias) + y) * y + y, reading y four times and writing four
intermediates, plus the clone. Here one kernel reads the bias-free output once,
adds the convolution's bias in registers and writes the result once. A program
owns a block of one (n, c) row of D*H*W values, so both biases are scalars.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def residual_chain_rows_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, n_channels, row_len,
                               BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    channel = row % n_channels
    cols = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < row_len  # the last block of a row is partial
    offsets = row.to(tl.int64) * row_len + cols
    y = tl.load(y_ptr + offsets, mask=mask, eviction_policy="evict_first") + tl.load(conv_bias_ptr + channel)
    z = ((y + tl.load(bias_ptr + channel)) + y) * y + y
    tl.store(out_ptr + offsets, z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        ct = self.conv_transpose
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding, ct.groups,
                               ct.dilation).contiguous()
        n, c = y.shape[:2]
        row_len = y[0, 0].numel()
        out = torch.empty_like(y)
        block = 1024
        residual_chain_rows_kernel[(n * c, triton.cdiv(row_len, block))](
            y, ct.bias, self.bias, out, c, row_len, BLOCK=block, num_warps=4)
        return out
