"""Conv2d -> InstanceNorm2d -> / d, step 1: cuDNN convolution, one Triton kernel for the norm.

InstanceNorm2d (affine=False, no running stats) normalizes each (n, c) plane of
H*W values by its own mean and biased variance. The convolution's bias is a
constant per plane, so it cancels in y - mean(y): the convolution runs without it,
which also drops PyTorch's separate bias pass over the 1 GB output.

One program per plane, two loops over it:
- statistics: each BLOCK-chunk's mean and squared deviations (two-pass inside the
  chunk, in registers), merged into the running (mean, M2) with Chan's formula, so
  no sum-of-squares cancellation;
- normalize and divide, storing once.
The second loop re-reads the plane (63 KB at the task's size) right after the
first: with ~264 planes in flight that is ~17 MB, so the re-read comes from L2.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def instance_norm_divide_kernel(y_ptr, out_ptr, plane_len, eps, inv_divisor, BLOCK: tl.constexpr):
    plane = tl.program_id(axis=0).to(tl.int64) * plane_len
    offs = tl.arange(0, BLOCK)

    mean = 0.0
    m2 = 0.0
    count = 0.0
    for start in range(0, plane_len, BLOCK):
        mask = start + offs < plane_len
        x = tl.load(y_ptr + plane + start + offs, mask=mask, other=0.0)
        n_b = tl.minimum(plane_len - start, BLOCK).to(tl.float32)
        mean_b = tl.sum(x, axis=0) / n_b
        d = tl.where(mask, x - mean_b, 0.0)
        m2_b = tl.sum(d * d, axis=0)
        # Chan et al.: merge (mean_b, m2_b, n_b) into the running statistics.
        total = count + n_b
        delta = mean_b - mean
        mean += delta * (n_b / total)
        m2 += m2_b + delta * delta * (count * n_b / total)
        count = total
    rstd = 1.0 / tl.sqrt(m2 / plane_len + eps)
    scale = rstd * inv_divisor

    for start in range(0, plane_len, BLOCK):
        mask = start + offs < plane_len
        x = tl.load(y_ptr + plane + start + offs, mask=mask, eviction_policy="evict_first")
        tl.store(out_ptr + plane + start + offs, (x - mean) * scale, mask=mask)


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
        out = torch.empty_like(y)
        instance_norm_divide_kernel[(n * c,)](y, out, h * w, norm.eps, 1.0 / self.divide_by,
                                              BLOCK=2048, num_warps=8)
        return out
