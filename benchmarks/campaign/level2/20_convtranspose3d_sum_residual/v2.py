"""ConvTranspose3d -> + bias -> + x -> * x -> + x, step 2: the transposed convolution in
channels-last (NDHWC) layout, the epilogue reading NDHWC and writing NCDHW.

Step 1 ran cuDNN on NCDHW tensors. cuDNN's fp32/TF32 tensor-core kernels work on
channels-last data: for NCDHW operands it either runs slower variants or transposes
around a channels-last kernel, the output transpose being one more read and write of
the 1.07 GB result. The input is 32x smaller (33 MB), so converting it costs almost
nothing; cuDNN writes NDHWC directly, and the fused epilogue transposes while it
computes ((y + bias) + y) * y + y, so the output is still read once and written once.
torch.compile makes the same layout choice for convolutions.

Epilogue tile: [BLOCK_S positions, BLOCK_C channels] of one sample, loaded with the
channels contiguous and stored with the positions contiguous.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def residual_chain_ndhwc_to_ncdhw_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, C, S,
                                         BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr):
    s = tl.program_id(axis=0) * BLOCK_S + tl.arange(0, BLOCK_S)
    c = tl.program_id(axis=1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n = tl.program_id(axis=2).to(tl.int64)
    c_ok = c < C
    mask = (s[:, None] < S) & c_ok[None, :]
    y = tl.load(y_ptr + n * S * C + s[:, None] * C + c[None, :], mask=mask, eviction_policy="evict_first")
    conv_bias = tl.load(conv_bias_ptr + c, mask=c_ok, other=0.0)
    bias = tl.load(bias_ptr + c, mask=c_ok, other=0.0)
    y = y + conv_bias[None, :]
    z = ((y + bias[None, :]) + y) * y + y
    tl.store(out_ptr + n * C * S + c[None, :] * S + s[:, None], z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        ct = self.conv_transpose
        x = x.contiguous(memory_format=torch.channels_last_3d)
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding, ct.groups,
                               ct.dilation).contiguous(memory_format=torch.channels_last_3d)
        n, c = y.shape[:2]
        s = y[0, 0].numel()
        out = torch.empty(y.shape, device=y.device, dtype=y.dtype)
        block_c = min(triton.next_power_of_2(c), 64)
        block_s = 4096 // block_c
        residual_chain_ndhwc_to_ncdhw_kernel[(triton.cdiv(s, block_s), triton.cdiv(c, block_c), n)](
            y, ct.bias, self.bias, out, c, s, BLOCK_S=block_s, BLOCK_C=block_c, num_warps=8)
        return out
