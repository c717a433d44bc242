"""Conv3d -> / d -> MaxPool3d -> global average pool -> + bias -> sum over channels, step 2: the
convolution in channels-last (NDHWC) layout, the pooling kernel reading every channel at once.

Step 1 ran cuDNN on NCDHW tensors. cuDNN's fp32/TF32 tensor-core kernels work on
channels-last data: for NCDHW operands it runs slower native variants or
transposes around an NDHWC kernel. Here the 268 MB input is converted once
(~0.18 ms of copying; the output is 0.44 GB), cuDNN writes NDHWC, and the work after it is
step 1's with the channels as the innermost axis:
1. one program per (n, od, block of BLOCK_OH pooled rows) takes all C channels:
   for each of the PD*PH input rows under the window it loads
   [BLOCK_OH * OW_P2 positions, PW_P2, C] (each input row (n, d, h) a contiguous
   [W, C] block), adds the convolution's bias, divides, keeps the running max, and
   writes per channel the sum of its pooled maxima;
2. one program per sample adds up its C x parts sums, divides by the pooled
   volume and adds the channels' biases.
The convolution's output is read once and nothing full-size is written.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.modules.utils import _triple


@triton.jit
def divide_maxpool_part_sum_ndhwc_kernel(y_ptr, conv_bias_ptr, part_ptr, C, D, H, W, OD, OH, OW, n_parts,
                                         divisor, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                                         BLOCK_OH: tl.constexpr, OW_P2: tl.constexpr, PW_P2: tl.constexpr,
                                         C_P2: tl.constexpr):
    pid = tl.program_id(axis=0)          # (n, od, oh block) = (n, part)
    oh_blocks = tl.cdiv(OH, BLOCK_OH)
    part = pid % n_parts
    n = pid // n_parts
    od = part // oh_blocks
    p = tl.arange(0, BLOCK_OH * OW_P2)
    oh = (part % oh_blocks) * BLOCK_OH + p // OW_P2
    ow = p % OW_P2
    k = tl.arange(0, PW_P2)
    c = tl.arange(0, C_P2)
    c_ok = c < C
    p_ok = (oh < OH) & (ow < OW)
    mask = p_ok[:, None, None] & (k[None, :, None] < PW) & c_ok[None, None, :]
    bias = tl.load(conv_bias_ptr + c, mask=c_ok, other=0.0)[None, None, :]
    w = ow[:, None, None] * PW + k[None, :, None]                    # [P, PW_P2, 1]

    best = tl.full([BLOCK_OH * OW_P2, C_P2], float("-inf"), dtype=tl.float32)
    for kd in tl.static_range(PD):
        for kh in tl.static_range(PH):
            row = ((n.to(tl.int64) * D + od * PD + kd) * H + oh * PH + kh) * W        # [P]
            x = tl.load(y_ptr + (row[:, None, None] + w) * C + c[None, None, :], mask=mask, other=0.0)
            x = tl.where(mask, (x + bias) / divisor, float("-inf"))
            best = tl.maximum(best, tl.max(x, axis=1))
    sums = tl.sum(tl.where(p_ok[:, None] & c_ok[None, :], best, 0.0), axis=0)    # [C_P2]
    tl.store(part_ptr + (n * C + c) * n_parts + part, sums, mask=c_ok)


@triton.jit
def mean_bias_channel_sum_kernel(part_ptr, bias_ptr, out_ptr, C, n_parts, inv_volume,
                                 C_P2: tl.constexpr, PARTS_BLOCK: tl.constexpr):
    n = tl.program_id(axis=0)
    c = tl.arange(0, C_P2)
    parts = tl.arange(0, PARTS_BLOCK)
    acc = tl.zeros([C_P2, PARTS_BLOCK], dtype=tl.float32)
    for p0 in range(0, n_parts, PARTS_BLOCK):
        mask = (c[:, None] < C) & (p0 + parts[None, :] < n_parts)
        acc += tl.load(part_ptr + (n * C + c[:, None]) * n_parts + p0 + parts[None, :], mask=mask, other=0.0)
    means = tl.sum(acc, axis=1) * inv_volume
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
        x = x.contiguous(memory_format=torch.channels_last_3d)
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous(memory_format=torch.channels_last_3d)
        n, c, d, h, w = y.shape
        od, oh, ow = d // pd, h // ph, w // pw
        ow_p2, pw_p2, c_p2 = triton.next_power_of_2(ow), triton.next_power_of_2(pw), triton.next_power_of_2(c)
        # About 2048 loaded values per program: BLOCK_OH pooled rows of OW_P2 x PW_P2 x C_P2.
        block_oh = min(triton.next_power_of_2(oh), max(1, 2048 // (ow_p2 * pw_p2 * c_p2)))
        n_parts = od * triton.cdiv(oh, block_oh)
        parts = torch.empty((n, c, n_parts), device=y.device, dtype=torch.float32)
        divide_maxpool_part_sum_ndhwc_kernel[(n * n_parts,)](
            y, self.conv.bias, parts, c, d, h, w, od, oh, ow, n_parts, float(self.divisor), PD=pd, PH=ph, PW=pw,
            BLOCK_OH=block_oh, OW_P2=ow_p2, PW_P2=pw_p2, C_P2=c_p2, num_warps=4)
        out = torch.empty((n, 1, 1, 1), device=y.device, dtype=y.dtype)
        mean_bias_channel_sum_kernel[(n,)](parts, self.bias, out, c, n_parts, 1.0 / (od * oh * ow),
                                           C_P2=c_p2, PARTS_BLOCK=64)
        return out
