"""Conv3d -> / d -> MaxPool3d -> global average pool -> + bias -> sum over channels, step 1:
cuDNN convolution without its bias, two Triton kernels for the rest.

The result is one number per sample: out[n] = sum_c (mean over the pooled volume of
maxpool((y + b_c) / d) + bias_c). Nothing full-size needs to be written:
1. one program per (n, c, od) pooled depth slice walks the pool window over the
   input rows it covers, loading [OH, OW, PW] tiles (w = ow * PW + k, the W window
   as the last axis), adds the convolution's bias, divides, keeps the running max,
   and writes the slice's sum of pooled maxima;
2. one program per sample adds up its C * OD slice sums, divides by the pooled
   volume and adds the channels' biases.
The convolution's 0.44 GB output is read once; eager PyTorch writes and re-reads it
for the bias and the division, and reads it again for the pool.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.modules.utils import _triple


@triton.jit
def divide_maxpool_slice_sum_kernel(y_ptr, conv_bias_ptr, part_ptr, C, D, H, W, OD, OH, OW, divisor,
                                    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                                    BLOCK_OH: tl.constexpr, OW_P2: tl.constexpr, PW_P2: tl.constexpr):
    pid = tl.program_id(axis=0)          # (n, c, od)
    od = pid % OD
    nc = pid // OD
    bias = tl.load(conv_bias_ptr + nc % C)
    plane = nc.to(tl.int64) * D * H * W
    ohs = tl.arange(0, BLOCK_OH)
    wo = tl.arange(0, OW_P2)
    k = tl.arange(0, PW_P2)
    w = wo[None, :, None] * PW + k[None, None, :]
    w_ok = (wo[None, :, None] < OW) & (k[None, None, :] < PW)

    total = tl.zeros([BLOCK_OH, OW_P2], dtype=tl.float32)
    for oh0 in range(0, OH, BLOCK_OH):
        oh = oh0 + ohs
        mask = (oh[:, None, None] < OH) & w_ok
        best = tl.full([BLOCK_OH, OW_P2], float("-inf"), dtype=tl.float32)
        for kd in tl.static_range(PD):
            for kh in tl.static_range(PH):
                row = ((od * PD + kd) * H + oh * PH + kh) * W                       # [BLOCK_OH]
                x = tl.load(y_ptr + plane + row[:, None, None] + w, mask=mask, other=0.0)
                x = tl.where(mask, (x + bias) / divisor, float("-inf"))
                best = tl.maximum(best, tl.max(x, axis=2))
        total += tl.where((oh[:, None] < OH) & (wo[None, :] < OW), best, 0.0)
    tl.store(part_ptr + pid, tl.sum(tl.sum(total, axis=1), axis=0))


@triton.jit
def mean_bias_channel_sum_kernel(part_ptr, bias_ptr, out_ptr, C, OD, inv_volume,
                                 C_P2: tl.constexpr, OD_P2: tl.constexpr):
    n = tl.program_id(axis=0)
    c = tl.arange(0, C_P2)
    od = tl.arange(0, OD_P2)
    mask = (c[:, None] < C) & (od[None, :] < OD)
    parts = tl.load(part_ptr + (n * C + c[:, None]) * OD + od[None, :], mask=mask, other=0.0)
    means = tl.sum(parts, axis=1) * inv_volume
    bias = tl.load(bias_ptr + c, mask=c < C, other=0.0)
    tl.store(out_ptr + n, tl.sum(tl.where(c < C, means + bias, 0.0), axis=0))


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor, pool_size, bias_shape, sum_dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self.max_pool = nn.MaxPool3d(pool_size)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.sum_dim = sum_dim

    def forward(self, x):
        pool = self.max_pool
        pd, ph, pw = _triple(pool.kernel_size)
        if _triple(pool.stride) != (pd, ph, pw) or any(_triple(pool.padding)) \
                or any(d != 1 for d in _triple(pool.dilation)) or pool.ceil_mode or self.sum_dim != 1:
            raise NotImplementedError("this kernel implements MaxPool3d with stride = kernel and a channel sum")
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous()
        n, c, d, h, w = y.shape
        od, oh, ow = d // pd, h // ph, w // pw
        parts = torch.empty((n, c, od), device=y.device, dtype=torch.float32)
        ow_p2, pw_p2 = triton.next_power_of_2(ow), triton.next_power_of_2(pw)
        block_oh = min(triton.next_power_of_2(oh), max(1, 2048 // (ow_p2 * pw_p2)))
        divide_maxpool_slice_sum_kernel[(n * c * od,)](
            y, self.conv.bias, parts, c, d, h, w, od, oh, ow, float(self.divisor), PD=pd, PH=ph, PW=pw,
            BLOCK_OH=block_oh, OW_P2=ow_p2, PW_P2=pw_p2, num_warps=4)
        out = torch.empty((n, 1, 1, 1), device=y.device, dtype=y.dtype)
        mean_bias_channel_sum_kernel[(n,)](parts, self.bias, out, c, od, 1.0 / (od * oh * ow),
                                           C_P2=triton.next_power_of_2(c), OD_P2=triton.next_power_of_2(od))
        return out
