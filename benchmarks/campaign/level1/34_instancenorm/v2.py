"""InstanceNorm2d (kb:1/34), step 2: one kernel, a persistent program per SM normalizing whole planes in turn.

Step 1 reads every plane twice in two separate passes over the whole 7.5 GB
tensor, so the second read always comes from DRAM, and it needs two more
launches for the partials and their combine. Here each program takes whole
planes in turn: it computes the plane's statistics (shifted sums over lanes,
as in step 1) and immediately re-reads the same 1 MiB to normalize it. With
one program per SM, about 132 planes (132 MiB) are in flight at once: more
than the 50 MB L2, so only the most recently read part of each plane (the
tail of the statistics pass) is still there when the normalize pass reaches
it; the first read is marked evict_last and the second evict_first to keep
the useful lines longest.

Bytes: between 2 (all re-reads hit L2) and 3 (none do) x 7.5 GB: 5.0 to
7.5 ms at 3.0 TB/s. A plane is too large to keep on chip in one program.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 8192
NUM_WARPS = 16


@triton.jit
def instancenorm_planes_kernel(x_ptr, y_ptr, planes, plane_len, eps, BLOCK: tl.constexpr):
    lanes = tl.arange(0, BLOCK)
    for plane in range(tl.program_id(axis=0), planes, tl.num_programs(axis=0)):
        base = plane * plane_len.to(tl.int64)
        shift = tl.load(x_ptr + base)
        s1 = tl.zeros([BLOCK], tl.float32)
        s2 = tl.zeros([BLOCK], tl.float32)
        for i in range(0, plane_len, BLOCK):
            mask = i + lanes < plane_len
            x = tl.load(x_ptr + base + i + lanes, mask=mask, other=0.0, eviction_policy="evict_last")
            d = tl.where(mask, x - shift, 0.0)
            s1 += d
            s2 += d * d
        t1 = tl.sum(s1, axis=0)
        t2 = tl.sum(s2, axis=0)
        mean = shift + t1 / plane_len
        var = tl.maximum(t2 - t1 * t1 / plane_len, 0.0) / plane_len
        rstd = 1.0 / tl.sqrt(var + eps)
        for i in range(0, plane_len, BLOCK):
            mask = i + lanes < plane_len
            x = tl.load(x_ptr + base + i + lanes, mask=mask, eviction_policy="evict_first")
            tl.store(y_ptr + base + i + lanes, (x - mean) * rstd, mask=mask)


def _num_programs(device: torch.device, planes: int) -> int:
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    return max(1, min(planes, sms))


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.num_features = num_features
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        planes = x.shape[0] * x.shape[1]
        plane_len = x.numel() // max(planes, 1)
        if x.numel() > 0:
            instancenorm_planes_kernel[(_num_programs(x.device, planes),)](x, y, planes, plane_len, self.eps,
                                                                         BLOCK=BLOCK, num_warps=NUM_WARPS)
        return y
