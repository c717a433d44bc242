"""ConvTranspose2d -> BatchNorm2d -> tanh -> MaxPool2d -> GroupNorm, step 2: the stride-1 transposed
convolution run as cuDNN's forward convolution, the same two Triton kernels for the rest.

Step 2 changes only the convolution. A stride-1 transposed convolution is a
forward convolution of the same input with the kernel flipped in H and W, its in
and out channels swapped, and padding k - 1 - p: the same products (rounded to
TF32 the same way), summed in another order. Step 1 ran it as cuDNN's
transposed path (a data-gradient kernel); here it runs as a forward convolution,
the path cuDNN has the most tuned tensor-core kernels for, at the cost of one
flip of the small weight per call (819 KB). Everything after the convolution is
step 1's, unchanged.

The model is used as constructed, in training mode: BatchNorm normalizes with the
batch's per-channel mean and biased variance over (N, H, W) and updates its running
statistics (unbiased variance, momentum). The convolution's bias is a constant per
channel, so it cancels in the normalization and only enters the running mean.

1. statistics: program (c, s) takes channel c of a slice of the batch (a few
   thousand values), computes mean and M2 per BLOCK in registers and merges them
   with Chan's formula; it writes one (mean, M2) partial.
2. one program per (n, group): it merges its channels' partials (a few dozen numbers
   each), then for each pool window position loads [channels of the group, pooled
   positions] values, normalizes, applies tanh and keeps the max; the pooled group
   (C/G x OH x OW, 4,624 values here) stays in registers for the GroupNorm statistics,
   normalization and affine, and is stored once. Programs of sample 0 also update
   the running statistics.
The convolution's 0.3 GB output is read twice and only the pooled result written;
eager PyTorch adds the bias pass, writes BatchNorm's and tanh's full-size results
and re-reads them, and runs GroupNorm over the pooled tensor in two more passes.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.modules.utils import _pair

BLOCK = 1024


@triton.jit
def channel_stats_kernel(y_ptr, mean_ptr, m2_ptr, N, C, HW, samples_per_part, n_parts, BLOCK: tl.constexpr):
    c = tl.program_id(axis=0)
    part = tl.program_id(axis=1)
    n0 = part * samples_per_part
    span = tl.minimum(samples_per_part, N - n0) * HW        # values of channel c in this slice
    offs = tl.arange(0, BLOCK)
    mean = 0.0
    m2 = 0.0
    count = 0.0
    for start in range(0, span, BLOCK):
        idx = start + offs
        mask = idx < span
        n = n0 + idx // HW
        x = tl.load(y_ptr + (n.to(tl.int64) * C + c) * HW + idx % HW, mask=mask, other=0.0)
        n_b = tl.minimum(span - start, BLOCK).to(tl.float32)
        mean_b = tl.sum(x, axis=0) / n_b
        d = tl.where(mask, x - mean_b, 0.0)
        m2_b = tl.sum(d * d, axis=0)
        total = count + n_b          # Chan et al.: merge the block into the running statistics
        delta = mean_b - mean
        mean += delta * (n_b / total)
        m2 += m2_b + delta * delta * (count * n_b / total)
        count = total
    tl.store(mean_ptr + c * n_parts + part, mean)
    tl.store(m2_ptr + c * n_parts + part, m2)


@triton.jit
def bn_tanh_maxpool_groupnorm_kernel(
        y_ptr, mean_ptr, m2_ptr, conv_bias_ptr, bn_w_ptr, bn_b_ptr, run_mean_ptr, run_var_ptr,
        gn_w_ptr, gn_b_ptr, out_ptr,
        N, C, H, W, OH, OW, groups, samples_per_part, n_parts, bn_eps, gn_eps, momentum,
        BATCH_STATS: tl.constexpr, UPDATE_RUNNING: tl.constexpr,
        KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
        CPG_P2: tl.constexpr, PARTS_P2: tl.constexpr, P_P2: tl.constexpr):
    pid = tl.program_id(axis=0)          # (n, group)
    g = pid % groups
    n = pid // groups
    cpg = C // groups
    cl = tl.arange(0, CPG_P2)
    c_ok = cl < cpg
    c = g * cpg + cl

    # BatchNorm statistics of the group's channels: merge the partials,
    # mean = sum n_i m_i / count, M2 = sum M2_i + n_i (m_i - mean)^2.
    count = (N * H * W).to(tl.float32)
    if BATCH_STATS:
        parts = tl.arange(0, PARTS_P2)
        p_ok = c_ok[:, None] & (parts[None, :] < n_parts)
        n_i = (tl.minimum(samples_per_part, N - parts * samples_per_part) * H * W).to(tl.float32)
        mean_i = tl.load(mean_ptr + c[:, None] * n_parts + parts[None, :], mask=p_ok, other=0.0)
        m2_i = tl.load(m2_ptr + c[:, None] * n_parts + parts[None, :], mask=p_ok, other=0.0)
        w_i = tl.where(p_ok, n_i[None, :], 0.0)
        mean = tl.sum(w_i * mean_i, axis=1) / count
        dev = mean_i - mean[:, None]
        var = (tl.sum(m2_i, axis=1) + tl.sum(w_i * dev * dev, axis=1)) / count
        if UPDATE_RUNNING:
            if n == 0:
                conv_b = tl.load(conv_bias_ptr + c, mask=c_ok, other=0.0)
                rm = tl.load(run_mean_ptr + c, mask=c_ok, other=0.0)
                rv = tl.load(run_var_ptr + c, mask=c_ok, other=0.0)
                unbiased = var * (count / tl.maximum(count - 1.0, 1.0))
                tl.store(run_mean_ptr + c, (1.0 - momentum) * rm + momentum * (mean + conv_b), mask=c_ok)
                tl.store(run_var_ptr + c, (1.0 - momentum) * rv + momentum * unbiased, mask=c_ok)
    else:
        # Running statistics describe y + conv_bias; y here has no bias.
        mean = tl.load(run_mean_ptr + c, mask=c_ok, other=0.0) - tl.load(conv_bias_ptr + c, mask=c_ok, other=0.0)
        var = tl.load(run_var_ptr + c, mask=c_ok, other=1.0)
    bn_scale = tl.load(bn_w_ptr + c, mask=c_ok, other=0.0) / tl.sqrt(var + bn_eps)
    bn_shift = tl.load(bn_b_ptr + c, mask=c_ok, other=0.0)

    # BatchNorm + tanh + max pool over [channels, pooled positions p = oh * OW + ow].
    p = tl.arange(0, P_P2)
    oh = p // OW
    ow = p % OW
    mask = c_ok[:, None] & (p[None, :] < OH * OW)
    plane = (n.to(tl.int64) * C + c) * H * W                        # [CPG_P2]
    best = tl.full([CPG_P2, P_P2], float("-inf"), dtype=tl.float32)
    for kh in tl.static_range(KH):
        for kw in tl.static_range(KW):
            hw = (oh * SH + kh) * W + ow * SW + kw
            x = tl.load(y_ptr + plane[:, None] + hw[None, :], mask=mask, other=0.0)
            z = (x - mean[:, None]) * bn_scale[:, None] + bn_shift[:, None]
            t = tl.exp(-2.0 * tl.abs(z))
            r = (1.0 - t) / (1.0 + t)
            best = tl.maximum(best, tl.where(z < 0.0, -r, r))

    # GroupNorm over the pooled group, then the per-channel affine.
    n_group = (cpg * OH * OW).to(tl.float32)
    g_mean = tl.sum(tl.sum(tl.where(mask, best, 0.0), axis=1), axis=0) / n_group
    d = tl.where(mask, best - g_mean, 0.0)
    g_rstd = 1.0 / tl.sqrt(tl.sum(tl.sum(d * d, axis=1), axis=0) / n_group + gn_eps)
    gamma = tl.load(gn_w_ptr + c, mask=c_ok, other=0.0)
    beta = tl.load(gn_b_ptr + c, mask=c_ok, other=0.0)
    y_out = d * (g_rstd * gamma)[:, None] + beta[:, None]
    out_plane = (n.to(tl.int64) * C + c) * OH * OW
    tl.store(out_ptr + out_plane[:, None] + p[None, :], y_out, mask=mask)



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
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, groups, num_groups):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.batch_norm = nn.BatchNorm2d(out_channels)
        self.tanh = nn.Tanh()
        self.max_pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        ct, bn, pool, gn = self.conv_transpose, self.batch_norm, self.max_pool, self.group_norm
        kh, kw = _pair(pool.kernel_size)
        sh, sw = _pair(pool.stride)
        if any(_pair(pool.padding)) or any(d != 1 for d in _pair(pool.dilation)) or pool.ceil_mode \
                or not bn.affine or not gn.affine:
            raise NotImplementedError("this kernel implements an unpadded MaxPool2d and affine norms")
        y = forward_conv_of(ct, x).contiguous()
        n, c, h, w = y.shape
        oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
        batch_stats = bn.training or not bn.track_running_stats
        update_running = bn.training and bn.track_running_stats
        momentum = bn.momentum
        if update_running:
            bn.num_batches_tracked.add_(1)
            if momentum is None:  # cumulative moving average
                momentum = 1.0 / float(bn.num_batches_tracked.item())

        samples_per_part = triton.cdiv(n, min(n, 32))
        n_parts = triton.cdiv(n, samples_per_part)
        means = torch.empty((c, n_parts), device=y.device, dtype=torch.float32)
        m2s = torch.empty_like(means)
        if batch_stats:
            channel_stats_kernel[(c, n_parts)](y, means, m2s, n, c, h * w, samples_per_part, n_parts,
                                               BLOCK=BLOCK, num_warps=4)
        out = torch.empty((n, c, oh, ow), device=y.device, dtype=y.dtype)
        running_mean = bn.running_mean if bn.running_mean is not None else means
        running_var = bn.running_var if bn.running_var is not None else means
        bn_tanh_maxpool_groupnorm_kernel[(n * gn.num_groups,)](
            y, means, m2s, ct.bias, bn.weight, bn.bias, running_mean, running_var, gn.weight, gn.bias, out,
            n, c, h, w, oh, ow, gn.num_groups, samples_per_part, n_parts, bn.eps, gn.eps, float(momentum or 0.0),
            BATCH_STATS=batch_stats, UPDATE_RUNNING=update_running, KH=kh, KW=kw, SH=sh, SW=sw,
            CPG_P2=triton.next_power_of_2(c // gn.num_groups), PARTS_P2=triton.next_power_of_2(n_parts),
            P_P2=triton.next_power_of_2(oh * ow), num_warps=8)
        return out
