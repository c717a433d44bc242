"""BatchNorm2d in training mode (kb:1/33), step 2: the per-channel combine folded into a plane-wide normalize kernel.

Step 1 runs three kernels: partial statistics per plane, a per-channel
combine (64 programs, a dependent step between the two big passes), and a
normalize pass of 262,144 small programs that each reload the channel's
statistics. Here the normalize kernel takes a whole (n, c) plane per
program: it merges channel c's N x SPLIT partials itself (Chan's formula, a
few hundred bytes from L2, once per plane), and the program of plane (0, c)
also updates channel c's running statistics (plane 0 counts the batch). Two
launches instead of three, and the normalize loop keeps a plane's chunks in
flight back to back.

Statistics as in step 1: per-lane shifted sums, sum(x - s) and
sum((x - s)^2), with s the chunk's first value.

Bytes: x is read twice and y written once: 3 x 4.3 GB, 4.3 ms at 3.0 TB/s. A
channel (64 MiB) does not fit on chip, so its statistics cannot be kept
between the two reads; this step only trims launches and dependent steps.
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
def normalize_planes_kernel(x_ptr, y_ptr, count_ptr, mean_ptr, m2_ptr, w_ptr, b_ptr,
                            run_mean_ptr, run_var_ptr, batches_ptr, C, plane_len, members, split, eps, momentum,
                            BLOCK_M: tl.constexpr, BLOCK: tl.constexpr):
    plane = tl.program_id(axis=0)
    c = plane % C
    # Member m of channel c is chunk m % split of plane (m // split) * C + c.
    m = tl.arange(0, BLOCK_M)
    idx = ((m // split) * C + c) * split + m % split
    valid = m < members
    n = tl.load(count_ptr + idx, mask=valid, other=0.0)
    mean = tl.load(mean_ptr + idx, mask=valid, other=0.0)
    m2 = tl.load(m2_ptr + idx, mask=valid, other=0.0)
    n_t, mean_t, m2_t = tl.reduce((n, mean, m2), 0, _chan_combine)
    scale = tl.load(w_ptr + c) / tl.sqrt(m2_t / n_t + eps)
    bias = tl.load(b_ptr + c)
    if plane < C:
        unbiased = m2_t / tl.maximum(n_t - 1.0, 1.0)
        tl.store(run_mean_ptr + c, (1.0 - momentum) * tl.load(run_mean_ptr + c) + momentum * mean_t)
        tl.store(run_var_ptr + c, (1.0 - momentum) * tl.load(run_var_ptr + c) + momentum * unbiased)
        if plane == 0:
            tl.store(batches_ptr, tl.load(batches_ptr) + 1)
    base = plane.to(tl.int64) * plane_len
    for i in range(0, plane_len, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        mask = offs < plane_len
        x = tl.load(x_ptr + base + offs, mask=mask, eviction_policy="evict_first")
        tl.store(y_ptr + base + offs, (x - mean_t) * scale + bias, mask=mask)


@triton.jit
def normalize_eval_kernel(x_ptr, y_ptr, run_mean_ptr, run_var_ptr, w_ptr, b_ptr, C, plane_len, eps,
                          BLOCK: tl.constexpr):
    plane = tl.program_id(axis=0)
    c = plane % C
    mean = tl.load(run_mean_ptr + c)
    scale = tl.load(w_ptr + c) / tl.sqrt(tl.load(run_var_ptr + c) + eps)
    bias = tl.load(b_ptr + c)
    base = plane.to(tl.int64) * plane_len
    for i in range(0, plane_len, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        mask = offs < plane_len
        x = tl.load(x_ptr + base + offs, mask=mask)
        tl.store(y_ptr + base + offs, (x - mean) * scale + bias, mask=mask)


class _BatchNormState(nn.Module):
    """The affine parameters and running statistics, under BatchNorm2d's names."""

    def __init__(self, num_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))


def _split(planes: int, plane_len: int, device: torch.device) -> int:
    """Chunks per plane: enough programs to fill the GPU a few times over."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    return max(1, min(triton.cdiv(plane_len, BLOCK), triton.cdiv(8 * sms, planes)))


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = _BatchNormState(num_features)
        self.eps = 1e-5
        self.momentum = 0.1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        N, C = x.shape[0], x.shape[1]
        plane_len = x.numel() // max(N * C, 1)
        if x.numel() == 0:
            return y
        bn = self.bn
        if not self.training:
            normalize_eval_kernel[(N * C,)](x, y, bn.running_mean, bn.running_var, bn.weight, bn.bias, C,
                                            plane_len, self.eps, BLOCK=BLOCK, num_warps=8)
            return y
        split = _split(N * C, plane_len, x.device)
        chunk_len = triton.cdiv(triton.cdiv(plane_len, split), BLOCK) * BLOCK
        parts = torch.empty((3, N * C * split), device=x.device, dtype=torch.float32)
        plane_stats_kernel[(N * C, split)](x, parts[0], parts[1], parts[2], plane_len, chunk_len,
                                           BLOCK=BLOCK, num_warps=8)
        members = N * split
        normalize_planes_kernel[(N * C,)](x, y, parts[0], parts[1], parts[2], bn.weight, bn.bias,
                                          bn.running_mean, bn.running_var, bn.num_batches_tracked,
                                          C, plane_len, members, split, self.eps, self.momentum,
                                          BLOCK_M=triton.next_power_of_2(members), BLOCK=BLOCK, num_warps=8)
        return y
