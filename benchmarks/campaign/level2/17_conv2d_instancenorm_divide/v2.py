"""Conv2d -> InstanceNorm2d -> / d, step 2: cuDNN convolution, each (n, c) plane held in
registers by one program: one read, exact two-pass statistics, one write.

Step 1 walked each plane twice in BLOCK chunks (statistics merged with Chan's
formula, then normalize), the second walk served mostly from L2. A plane here is
126 x 126 = 15,876 values (63 KB): one program of 16 warps holds all of it in
registers (32 values per thread at the 16,384-lane block), so the plane is loaded
once, the mean and the variance are computed exactly in two passes over registers
(no merge arithmetic, no sum-of-squares cancellation), and the normalized,
divided plane is stored once. Planes longer than MAX_PLANE values would not fit
this way and are refused with a clear error instead of spilling.

InstanceNorm2d (affine=False, no running stats) normalizes each plane by its own
mean and biased variance; the convolution's bias is a constant per plane and
cancels in y - mean(y), so the convolution runs without it.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

MAX_PLANE = 32768


@triton.jit
def instance_norm_divide_plane_kernel(y_ptr, out_ptr, plane_len, eps, inv_divisor, BLOCK: tl.constexpr):
    plane = tl.program_id(axis=0).to(tl.int64) * plane_len
    offs = tl.arange(0, BLOCK)
    mask = offs < plane_len               # BLOCK is plane_len rounded up to a power of two
    x = tl.load(y_ptr + plane + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    mean = tl.sum(x, axis=0) / plane_len
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / plane_len
    scale = inv_divisor / tl.sqrt(var + eps)
    tl.store(out_ptr + plane + offs, d * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divide_by):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.instance_norm = nn.InstanceNorm2d(out_channels)
        self.divide_by = divide_by

    def forward(self, x):
        norm = self.instance_norm
        if norm.affine or norm.track_running_stats:
            raise NotImplementedError("this kernel implements InstanceNorm2d(affine=False, no running stats)")
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous()
        n, c, h, w = y.shape
        if h * w > MAX_PLANE:
            raise NotImplementedError(f"planes of {h * w} values exceed the {MAX_PLANE} one program holds")
        out = torch.empty_like(y)
        block = triton.next_power_of_2(h * w)
        instance_norm_divide_plane_kernel[(n * c,)](y, out, h * w, norm.eps, 1.0 / self.divide_by,
                                                    BLOCK=block, num_warps=16 if block >= 8192 else 4)
        return out
