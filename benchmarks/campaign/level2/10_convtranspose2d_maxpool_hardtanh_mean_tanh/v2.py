"""ConvTranspose2d -> MaxPool2d -> Hardtanh -> spatial mean -> tanh, step 2: the stride-1 transposed
convolution run as cuDNN's forward convolution, the same fused Triton kernel for the rest.

Step 2 changes only the convolution. A stride-1 transposed convolution is a
forward convolution of the same input with the kernel flipped in H and W, its in
and out channels swapped, and padding k - 1 - p: the same products (rounded to
TF32 the same way), summed in another order. Step 1 ran it as cuDNN's
transposed path (a data-gradient kernel); here it runs as a forward convolution,
the path cuDNN has the most tuned tensor-core kernels for, at the cost of one
flip of the small weight per call (147 KB). Everything after the convolution is
step 1's, unchanged.

The result is one number per (n, c) plane. One program per plane walks it in
[BLOCK_OH, OW, KW] tiles (w = ow * stride + kw, the pool's W window as the last
axis), takes the max over the window, clamps, and adds up; at the end it divides
by the pooled size and applies tanh. The convolution's bias is added after the
max: max(y + b) = max(y) + b exactly, since adding b (with its rounding) never
changes the order of two values. The 2.1 GB output is read once and nothing
full-size is written; eager PyTorch re-reads and re-writes it for the bias, writes
and re-reads the pooled quarter for Hardtanh, and reads it again for the mean.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.modules.utils import _pair


@triton.jit
def maxpool_hardtanh_mean_tanh_kernel(y_ptr, conv_bias_ptr, out_ptr, C, H, W, OH, OW, lo, hi,
                                      KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                                      BLOCK_OH: tl.constexpr, OW_P2: tl.constexpr, KW_P2: tl.constexpr):
    plane_id = tl.program_id(axis=0)     # (n, c)
    bias = tl.load(conv_bias_ptr + plane_id % C)
    plane = plane_id.to(tl.int64) * H * W
    ohs = tl.arange(0, BLOCK_OH)
    wo = tl.arange(0, OW_P2)
    k = tl.arange(0, KW_P2)
    w = wo[None, :, None] * SW + k[None, None, :]
    w_ok = (wo[None, :, None] < OW) & (k[None, None, :] < KW)

    total = tl.zeros([BLOCK_OH, OW_P2], dtype=tl.float32)
    for oh0 in range(0, OH, BLOCK_OH):
        oh = oh0 + ohs
        mask = (oh[:, None, None] < OH) & w_ok
        best = tl.full([BLOCK_OH, OW_P2], float("-inf"), dtype=tl.float32)
        for kh in tl.static_range(KH):
            row = (oh * SH + kh) * W
            x = tl.load(y_ptr + plane + row[:, None, None] + w, mask=mask, other=float("-inf"))
            best = tl.maximum(best, tl.max(x, axis=2))
        z = tl.minimum(tl.maximum(best + bias, lo), hi)
        total += tl.where((oh[:, None] < OH) & (wo[None, :] < OW), z, 0.0)
    m = tl.sum(tl.sum(total, axis=1), axis=0) / (OH * OW)
    t = tl.exp(-2.0 * tl.abs(m))
    r = (1.0 - t) / (1.0 + t)
    tl.store(out_ptr + plane_id, tl.where(m < 0.0, -r, r))



def forward_conv_of(ct, x):
    """ConvTranspose2d(x) without its bias, run as the equivalent forward convolution when the stride
    is 1: conv2d with the kernel flipped in H and W, in/out channels swapped, and padding
    dilation * (k - 1) - padding. Other configurations keep cuDNN's transposed path."""
    kh, kw = ct.kernel_size
    ph, pw = ct.padding
    dh, dw = ct.dilation
    if tuple(ct.stride) == (1, 1) and ct.groups == 1 and not any(ct.output_padding) \
            and dh * (kh - 1) >= ph and dw * (kw - 1) >= pw:
        weight = ct.weight.transpose(0, 1).flip(2, 3).contiguous()
        return F.conv2d(x, weight, None, 1, (dh * (kh - 1) - ph, dw * (kw - 1) - pw), ct.dilation)
    return F.conv_transpose2d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding, ct.groups,
                              ct.dilation)

class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, maxpool_kernel_size, maxpool_stride,
                 hardtanh_min, hardtanh_max):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.maxpool = nn.MaxPool2d(kernel_size=maxpool_kernel_size, stride=maxpool_stride)
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)

    def forward(self, x):
        ct, pool = self.conv_transpose, self.maxpool
        kh, kw = _pair(pool.kernel_size)
        sh, sw = _pair(pool.stride)
        if any(_pair(pool.padding)) or any(d != 1 for d in _pair(pool.dilation)) or pool.ceil_mode:
            raise NotImplementedError("this kernel implements MaxPool2d without padding, dilation or ceil_mode")
        y = forward_conv_of(ct, x).contiguous()
        n, c, h, w = y.shape
        oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
        out = torch.empty((n, c, 1, 1), device=y.device, dtype=y.dtype)
        ow_p2, kw_p2 = triton.next_power_of_2(ow), triton.next_power_of_2(kw)
        block_oh = min(triton.next_power_of_2(oh), max(1, 2048 // (ow_p2 * kw_p2)))
        maxpool_hardtanh_mean_tanh_kernel[(n * c,)](
            y, ct.bias, out, c, h, w, oh, ow, float(self.hardtanh.min_val), float(self.hardtanh.max_val),
            KH=kh, KW=kw, SH=sh, SW=sw, BLOCK_OH=block_oh, OW_P2=ow_p2, KW_P2=kw_p2, num_warps=4)
        return out
