"""ConvTranspose3d -> mean over D -> + bias -> softmax over C -> tanh -> * s, step 2: the
transposed convolution in channels-last (NDHWC) layout, the fused epilogue reading each
position's channels contiguously.

Step 1 ran cuDNN on NCDHW tensors. cuDNN's fp32/TF32 tensor-core kernels work on
channels-last data: for NCDHW operands it runs slower native variants or transposes
around an NDHWC kernel, the output transpose being one more read and write of the
2.1 GB result. Here the 0.54 GB input is converted once (a quarter of the
output's size, ~0.36 ms of copying), cuDNN writes NDHWC directly, and the epilogue does step 1's work (mean over
D, both biases, softmax over channels, tanh, scale; one read of the convolution
output, one write of the D-times smaller result) with a different walk: one
program takes one (n, h) and BLOCK_W consecutive w, and each step of its walk
over d loads one contiguous [BLOCK_W, C] block (8 KB here). The softmax runs over
axis 1; the [BLOCK_W, C] result is stored into the (N, C, 1, H, W) output with w
contiguous.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def depth_mean_softmax_tanh_ndhwc_kernel(y_ptr, conv_bias_ptr, bias_ptr, out_ptr, C, D, H, W, scale,
                                         C_P2: tl.constexpr, BLOCK_W: tl.constexpr):
    pid = tl.program_id(axis=0)          # (n, h)
    h = pid % H
    n = pid // H
    w = tl.program_id(axis=1) * BLOCK_W + tl.arange(0, BLOCK_W)
    c = tl.arange(0, C_P2)
    c_ok = c < C
    mask = (w[:, None] < W) & c_ok[None, :]
    # Position (n, d, h, w) starts at (((n*D + d)*H + h)*W + w)*C and steps H*W*C per d.
    ptrs = y_ptr + ((n.to(tl.int64) * D * H + h) * W + w[:, None]) * C + c[None, :]
    acc = tl.zeros([BLOCK_W, C_P2], dtype=tl.float32)
    for d in range(D):
        acc += tl.load(ptrs + d * H * W * C, mask=mask, other=0.0, eviction_policy="evict_first")
    shift = tl.load(conv_bias_ptr + c, mask=c_ok, other=0.0) + tl.load(bias_ptr + c, mask=c_ok, other=0.0)
    x = acc / D + shift[None, :]
    # Softmax over channels; padded channels get -inf so they add 0 to the sum.
    x = tl.where(c_ok[None, :], x, float("-inf"))
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    p = e / tl.sum(e, axis=1)[:, None]
    t = tl.exp(-2.0 * p)                  # p >= 0, so tanh(p) = (1 - e^-2p) / (1 + e^-2p)
    z = (1.0 - t) / (1.0 + t) * scale
    out_row = (n.to(tl.int64) * C + c) * H * W + h * W            # output is (N, C, 1, H, W)
    tl.store(out_ptr + out_row[None, :] + w[:, None], z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.bias = nn.Parameter(torch.randn(1, out_channels, 1, 1, 1))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        ct = self.conv_transpose
        x = x.contiguous(memory_format=torch.channels_last_3d)
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding, ct.groups,
                               ct.dilation).contiguous(memory_format=torch.channels_last_3d)
        n, c, d, h, w = y.shape
        out = torch.empty((n, c, 1, h, w), device=y.device, dtype=y.dtype)
        block_w = min(triton.next_power_of_2(w), 32)
        depth_mean_softmax_tanh_ndhwc_kernel[(n * h, triton.cdiv(w, block_w))](
            y, ct.bias, self.bias, out, c, d, h, w, float(self.scaling_factor),
            C_P2=triton.next_power_of_2(c), BLOCK_W=block_w, num_warps=4)
        return out
