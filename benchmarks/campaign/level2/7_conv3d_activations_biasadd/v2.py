"""Conv3d -> ReLU -> LeakyReLU -> GELU -> Sigmoid -> + bias, step 2: the convolution in
channels-last (NDHWC) layout, the epilogue reading NDHWC and writing NCDHW.

Step 1 ran cuDNN on NCDHW tensors. cuDNN's fp32/TF32 tensor-core kernels work on
channels-last data: for NCDHW operands it either runs slower variants or transposes
around a channels-last kernel, the output transpose being one more read and write of
the 0.94 GB result. Here the 0.27 GB input is converted once, cuDNN writes NDHWC
directly, and the fused epilogue transposes while it computes, so the output is still
read once and written once. torch.compile makes the same layout choice for convolutions.

Epilogue tile: [BLOCK_S positions, BLOCK_C channels] of one sample, loaded with the
channels contiguous and stored with the positions contiguous.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def activations_bias_ndhwc_to_ncdhw_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, C, S,
                                           BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr):
    s = tl.program_id(axis=0) * BLOCK_S + tl.arange(0, BLOCK_S)
    c = tl.program_id(axis=1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n = tl.program_id(axis=2).to(tl.int64)
    c_ok = c < C
    mask = (s[:, None] < S) & c_ok[None, :]
    y = tl.load(y_ptr + n * S * C + s[:, None] * C + c[None, :], mask=mask, eviction_policy="evict_first")
    conv_bias = tl.load(conv_bias_ptr + c, mask=c_ok, other=0.0)
    bias = tl.load(bias_ptr + c, mask=c_ok, other=0.0)
    z = tl.maximum(y + conv_bias[None, :], 0.0)
    z = tl.where(z >= 0.0, z, 0.01 * z)
    z = 0.5 * z * (1.0 + tl.math.erf(z * 0.7071067811865476))
    z = 1.0 / (1.0 + tl.exp(-z)) + bias[None, :]
    tl.store(out_ptr + n * C * S + c[None, :] * S + s[:, None], z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last_3d)
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous(memory_format=torch.channels_last_3d)
        n, c = y.shape[:2]
        s = y[0, 0].numel()
        out = torch.empty(y.shape, device=y.device, dtype=y.dtype)
        block_c = min(triton.next_power_of_2(c), 64)
        block_s = 4096 // block_c
        activations_bias_ndhwc_to_ncdhw_kernel[(triton.cdiv(s, block_s), triton.cdiv(c, block_c), n)](
            y, self.conv.bias, self.bias, out, c, s, BLOCK_S=block_s, BLOCK_C=block_c, num_warps=8)
        return out
