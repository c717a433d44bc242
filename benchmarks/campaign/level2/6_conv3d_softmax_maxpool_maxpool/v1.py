"""Conv3d -> softmax over channels -> MaxPool3d(p) -> MaxPool3d(p), step 1: cuDNN convolution
without its bias, one Triton kernel for everything after it.

Two non-overlapping p-pools in a row are one p*p pool: the second pool's window j
covers the first's 2j..2j+p-1, which cover the input's p*p*j .. p*p*j + p*p - 1, and
its output size floor(floor(D / p) / p) is floor(D / (p*p)). So one program takes one
(n, od, oh) output row with all channels and ow positions and walks the
(p*p) x (p*p) window in D and H: for each input row it loads [C, OW, p*p] values,
adds the convolution's bias, takes the softmax over channels (axis 0) and keeps
the running max over the W window (axis 2) and over the walk. The 103 MB softmax
tensor and the first pool's output are never written; eager PyTorch writes and
re-reads both, plus the bias pass.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.modules.utils import _triple


@triton.jit
def softmax_double_maxpool_kernel(y_ptr, conv_bias_ptr, out_ptr, C, D, H, W, OD, OH, OW,
                                  K: tl.constexpr, C_P2: tl.constexpr, OW_P2: tl.constexpr,
                                  K_P2: tl.constexpr):
    # K = p * p is the merged window; program = one (n, od, oh) output row.
    pid = tl.program_id(axis=0)
    oh = pid % OH
    od = (pid // OH) % OD
    n = pid // (OH * OD)
    c = tl.arange(0, C_P2)
    wo = tl.arange(0, OW_P2)
    k = tl.arange(0, K_P2)
    w = wo[None, :, None] * K + k[None, None, :]                    # [1, OW_P2, K_P2]
    c_ok = c < C
    mask = c_ok[:, None, None] & (wo[None, :, None] < OW) & (k[None, None, :] < K)
    bias = tl.load(conv_bias_ptr + c, mask=c_ok, other=0.0)[:, None, None]
    plane = (D * H * W).to(tl.int64)
    chan_base = (n.to(tl.int64) * C + c) * plane                    # [C_P2]

    best = tl.full([C_P2, OW_P2], float("-inf"), dtype=tl.float32)
    for kd in range(K):
        for kh in range(K):
            row = ((od * K + kd) * H + oh * K + kh) * W
            x = tl.load(y_ptr + chan_base[:, None, None] + row + w, mask=mask, other=0.0) + bias
            # Softmax over channels; padded channels get -inf so they add 0 to the sum.
            x = tl.where(c_ok[:, None, None], x, float("-inf"))
            e = tl.exp(x - tl.max(x, axis=0)[None, :, :])
            p = e / tl.sum(e, axis=0)[None, :, :]
            p = tl.where(mask, p, float("-inf"))
            best = tl.maximum(best, tl.max(p, axis=2))
    out_base = (n.to(tl.int64) * C + c) * (OD * OH * OW) + (od * OH + oh) * OW
    out_mask = c_ok[:, None] & (wo[None, :] < OW)
    tl.store(out_ptr + out_base[:, None] + wo[None, :], best, mask=out_mask)


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
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous()
        n, c, d, h, w = y.shape
        od, oh, ow = d // k, h // k, w // k
        out = torch.empty((n, c, od, oh, ow), device=y.device, dtype=y.dtype)
        if out.numel() == 0:
            return out
        softmax_double_maxpool_kernel[(n * od * oh,)](
            y, self.conv.bias, out, c, d, h, w, od, oh, ow, K=k, C_P2=triton.next_power_of_2(c),
            OW_P2=triton.next_power_of_2(ow), K_P2=triton.next_power_of_2(k), num_warps=4)
        return out
