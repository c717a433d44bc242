"""InstanceNorm2d (kb:1/34), step 1: per-plane partial statistics, a per-plane combine, a normalize pass.

Every (n, c) plane of H x W contiguous values is normalized by its own mean
and biased variance (no affine parameters, no running statistics: the
module's defaults). At the problem's 112 x 64 x 512 x 512 a plane is 1 MiB.

1. plane_stats_kernel: a program reduces one chunk of one plane (SPLIT chunks
   per plane; 1 at the problem's size) to (count, mean, M2). Lanes accumulate
   shifted sums, sum(x - s) and sum((x - s)^2), with s the chunk's first
   value: no cancellation when the values sit far from zero, and no
   per-element division as in a running Welford update.
2. plane_combine_kernel: merges each plane's SPLIT partials with Chan's
   formula into mean and 1/sqrt(var + eps).
3. normalize_kernel: y = (x - mean) * rstd, per plane chunk.

Bytes: x is read twice and y written once, 3 x 7.5 GB, 7.5 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def plane_stats_kernel(x_ptr, count_ptr, mean_ptr, m2_ptr, plane_len, chunk_len, BLOCK: tl.constexpr):
    plane = tl.program_id(axis=0)
    split = tl.program_id(axis=1)
    base = x_ptr + plane.to(tl.int64) * plane_len
    start = split * chunk_len
    stop = tl.minimum(start + chunk_len, plane_len)
    shift = tl.load(base + tl.minimum(start, plane_len - 1))
    s1 = tl.zeros([BLOCK], tl.float32)
    s2 = tl.zeros([BLOCK], tl.float32)
    for i in range(start, stop, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        mask = offs < stop
        d = tl.where(mask, tl.load(base + offs, mask=mask, other=0.0) - shift, 0.0)
        s1 += d
        s2 += d * d
    n = tl.maximum(stop - start, 0).to(tl.float32)
    t1 = tl.sum(s1, axis=0)
    t2 = tl.sum(s2, axis=0)
    out = plane * tl.num_programs(axis=1) + split
    tl.store(count_ptr + out, n)
    tl.store(mean_ptr + out, shift + t1 / tl.maximum(n, 1.0))
    tl.store(m2_ptr + out, tl.maximum(t2 - t1 * t1 / tl.maximum(n, 1.0), 0.0))


@triton.jit
def _chan_combine(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    n = n_a + n_b
    delta = mean_b - mean_a
    # Empty partials (n = 0) on both sides stay empty.
    frac_b = tl.where(n > 0, n_b / tl.maximum(n, 1.0), 0.0)
    return n, mean_a + delta * frac_b, m2_a + m2_b + delta * delta * n_a * frac_b


@triton.jit
def plane_combine_kernel(count_ptr, mean_ptr, m2_ptr, stat_mean_ptr, stat_rstd_ptr, split, eps,
                         BLOCK_M: tl.constexpr):
    plane = tl.program_id(axis=0)
    m = tl.arange(0, BLOCK_M)
    valid = m < split
    idx = plane * split + m
    n = tl.load(count_ptr + idx, mask=valid, other=0.0)
    mean = tl.load(mean_ptr + idx, mask=valid, other=0.0)
    m2 = tl.load(m2_ptr + idx, mask=valid, other=0.0)
    n_t, mean_t, m2_t = tl.reduce((n, mean, m2), 0, _chan_combine)
    tl.store(stat_mean_ptr + plane, mean_t)
    tl.store(stat_rstd_ptr + plane, 1.0 / tl.sqrt(m2_t / n_t + eps))


@triton.jit
def normalize_kernel(x_ptr, y_ptr, stat_mean_ptr, stat_rstd_ptr, plane_len, BLOCK: tl.constexpr):
    plane = tl.program_id(axis=0)
    mean = tl.load(stat_mean_ptr + plane)
    rstd = tl.load(stat_rstd_ptr + plane)
    offs = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < plane_len
    base = plane.to(tl.int64) * plane_len
    x = tl.load(x_ptr + base + offs, mask=mask)
    tl.store(y_ptr + base + offs, (x - mean) * rstd, mask=mask)


def _split(planes: int, plane_len: int, device: torch.device) -> int:
    """Chunks per plane: enough programs to fill the GPU a few times over."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    return max(1, min(triton.cdiv(plane_len, BLOCK), triton.cdiv(8 * sms, planes)))


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
        if x.numel() == 0:
            return y
        split = _split(planes, plane_len, x.device)
        chunk_len = triton.cdiv(triton.cdiv(plane_len, split), BLOCK) * BLOCK
        parts = torch.empty((3, planes * split), device=x.device, dtype=torch.float32)
        stats = torch.empty((2, planes), device=x.device, dtype=torch.float32)
        plane_stats_kernel[(planes, split)](x, parts[0], parts[1], parts[2], plane_len, chunk_len,
                                            BLOCK=BLOCK, num_warps=8)
        plane_combine_kernel[(planes,)](parts[0], parts[1], parts[2], stats[0], stats[1], split, self.eps,
                                        BLOCK_M=triton.next_power_of_2(split), num_warps=1)
        normalize_kernel[(planes, triton.cdiv(plane_len, BLOCK))](x, y, stats[0], stats[1], plane_len,
                                                                  BLOCK=BLOCK, num_warps=8)
        return y
