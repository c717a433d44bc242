"""Conv2d -> ReLU -> + bias, step 2: the convolution in channels-last layout, the epilogue
reading NHWC and writing NCHW.

Step 1 ran cuDNN on NCHW tensors. cuDNN's fp32/TF32 tensor-core kernels work on
NHWC: for NCHW operands it either runs slower NCHW variants or transposes input
and output around an NHWC kernel, the output transpose being one more read and
write of the 1 GB result. Here the input is converted once (0.5 GB, half the
output's size), cuDNN writes NHWC directly, and the fused epilogue does the
NHWC -> NCHW transpose itself while applying relu(y + conv_bias) + bias, so the
output is still read once and written once. torch.compile makes the same layout
choice for convolutions.

The epilogue's tile is [BLOCK_S positions, BLOCK_C channels] of one sample: loaded
with the channels contiguous, stored with the positions contiguous (Triton moves
the tile between the two register layouts through shared memory).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def relu_bias_nhwc_to_nchw_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, C, S,
                                  BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr):
    s = tl.program_id(axis=0) * BLOCK_S + tl.arange(0, BLOCK_S)
    c = tl.program_id(axis=1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n = tl.program_id(axis=2).to(tl.int64)
    c_ok = c < C
    mask = (s[:, None] < S) & c_ok[None, :]
    y = tl.load(y_ptr + n * S * C + s[:, None] * C + c[None, :], mask=mask, eviction_policy="evict_first")
    conv_bias = tl.load(conv_bias_ptr + c, mask=c_ok, other=0.0)
    bias = tl.load(bias_ptr + c, mask=c_ok, other=0.0)
    z = tl.maximum(y + conv_bias[None, :], 0.0) + bias[None, :]
    tl.store(out_ptr + n * C * S + c[None, :] * S + s[:, None], z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last)
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous(memory_format=torch.channels_last)
        n, c, h, w = y.shape
        out = torch.empty((n, c, h, w), device=y.device, dtype=y.dtype)
        block_c = min(triton.next_power_of_2(c), 64)
        block_s = 4096 // block_c
        relu_bias_nhwc_to_nchw_kernel[(triton.cdiv(h * w, block_s), triton.cdiv(c, block_c), n)](
            y, self.conv.bias, self.bias, out, c, h * w, BLOCK_S=block_s, BLOCK_C=block_c, num_warps=8)
        return out
