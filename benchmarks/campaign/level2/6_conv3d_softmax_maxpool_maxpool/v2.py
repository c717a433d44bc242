"""Conv3d -> softmax over channels -> MaxPool3d(p) -> MaxPool3d(p), step 2: the convolution in
channels-last (NDHWC) layout, the fused epilogue reading every position's channels contiguously.

Step 1 ran cuDNN on NCDHW tensors and its epilogue gathered each position's 16
channels from 16 planes 14 x 30 x 30 apart. Here the 25 MB input is converted once
(4x smaller than the convolution's output), cuDNN writes NDHWC (its tensor-core
kernels' own layout: no transposes around them), and the softmax's channels are
the innermost, contiguous axis: each input row (n, d, h) the program needs is one
contiguous [W, C] block. The work is step 1's: two equal non-overlapping p-pools
merged into one (p*p)-pool, one program per (n, od, oh) output row walking the
(p*p) x (p*p) window in D and H, softmax over channels (now axis 2) and a running
max over the W window (axis 1) and the walk; the 103 MB softmax tensor is never
written, and the pooled [OW, C] tile is stored into the NCDHW output.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.modules.utils import _triple


@triton.jit
def softmax_double_maxpool_ndhwc_kernel(y_ptr, conv_bias_ptr, out_ptr, C, D, H, W, OD, OH, OW,
                                        K: tl.constexpr, C_P2: tl.constexpr, OW_P2: tl.constexpr,
                                        K_P2: tl.constexpr):
    # K = p * p is the merged window; program = one (n, od, oh) output row.
    pid = tl.program_id(axis=0)
    oh = pid % OH
    od = (pid // OH) % OD
    n = pid // (OH * OD)
    wo = tl.arange(0, OW_P2)
    k = tl.arange(0, K_P2)
    c = tl.arange(0, C_P2)
    w = wo[:, None, None] * K + k[None, :, None]                    # [OW_P2, K_P2, 1]
    c_ok = c < C
    w_ok = (wo[:, None, None] < OW) & (k[None, :, None] < K)
    mask = w_ok & c_ok[None, None, :]
    bias = tl.load(conv_bias_ptr + c, mask=c_ok, other=0.0)[None, None, :]

    best = tl.full([OW_P2, C_P2], float("-inf"), dtype=tl.float32)
    for kd in range(K):
        for kh in range(K):
            row = ((n.to(tl.int64) * D + od * K + kd) * H + oh * K + kh) * W      # position (n, d, h, w = 0)
            x = tl.load(y_ptr + (row + w) * C + c[None, None, :], mask=mask, other=0.0) + bias
            # Softmax over channels; padded channels get -inf so they add 0 to the sum.
            x = tl.where(c_ok[None, None, :], x, float("-inf"))
            e = tl.exp(x - tl.max(x, axis=2)[:, :, None])
            p = e / tl.sum(e, axis=2)[:, :, None]
            p = tl.where(mask, p, float("-inf"))
            best = tl.maximum(best, tl.max(p, axis=1))
    out_row = ((n.to(tl.int64) * C + c) * OD + od) * OH + oh                # [C_P2], then * OW + wo
    out_mask = (wo[:, None] < OW) & c_ok[None, :]
    tl.store(out_ptr + out_row[None, :] * OW + wo[:, None], best, mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, pool_kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.pool1 = nn.MaxPool3d(pool_kernel_size)
        self.pool2 = nn.MaxPool3d(pool_kernel_size)

    def forward(self, x):
        for pool in (self.pool1, self.pool2):
            p = _triple(pool.kernel_size)
            if _triple(pool.stride) != p or any(_triple(pool.padding)) or any(d != 1 for d in _triple(pool.dilation)) \
                    or pool.ceil_mode or len(set(p)) != 1 or p != _triple(self.pool1.kernel_size):
                raise NotImplementedError("this kernel implements two equal cubic MaxPool3d with stride = kernel")
        k = _triple(self.pool1.kernel_size)[0] ** 2
        x = x.contiguous(memory_format=torch.channels_last_3d)
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous(memory_format=torch.channels_last_3d)
        n, c, d, h, w = y.shape
        od, oh, ow = d // k, h // k, w // k
        out = torch.empty((n, c, od, oh, ow), device=y.device, dtype=y.dtype)
        if out.numel() == 0:
            return out
        softmax_double_maxpool_ndhwc_kernel[(n * od * oh,)](
            y, self.conv.bias, out, c, d, h, w, od, oh, ow, K=k, C_P2=triton.next_power_of_2(c),
            OW_P2=triton.next_power_of_2(ow), K_P2=triton.next_power_of_2(k), num_warps=4)
        return out
