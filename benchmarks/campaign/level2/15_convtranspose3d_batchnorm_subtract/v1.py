"""ConvTranspose3d -> BatchNorm3d -> subtract the spatial mean, step 1: cuDNN transposed
convolution without its bias, two Triton kernels for the rest.

In training mode (the model as constructed) BatchNorm is z = (y - mu_c) * a_c + beta_c
with a_c = gamma_c / sqrt(var_c + eps) over (N, D, H, W). Subtracting z's own mean over
(D, H, W) removes every per-(n, c) constant:
    z - mean_dhw(z) = a_c * (y - m_nc),   m_nc = mean_dhw(y),
so beta, mu_c and the convolution's bias all cancel (the bias still enters the
running mean, which BatchNorm updates as a side effect). What is needed:
1. statistics: program (n, c, s) computes mean and M2 of one chunk of the (n, c)
   volume (two-pass per BLOCK in registers, merged with Chan's formula);
2. apply: program (n, c, s) merges its volume's partials into m_nc and its channel's
   N * S partials into var_c, and writes a_c * (y - m_nc) for its chunk.
The 0.25 GB output is read twice and the result written once; eager PyTorch adds
the bias pass, BatchNorm's two reads and write, the mean's read, and the
subtraction's read and write.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

BLOCK = 2048
CHUNK = 8 * BLOCK


@triton.jit
def volume_stats_kernel(y_ptr, mean_ptr, m2_ptr, vol_len, n_chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    vol = tl.program_id(axis=0)          # (n, c)
    chunk = tl.program_id(axis=1)
    base = vol.to(tl.int64) * vol_len
    offs = tl.arange(0, BLOCK)
    mean = 0.0
    m2 = 0.0
    count = 0.0
    for start in range(chunk * CHUNK, tl.minimum(chunk * CHUNK + CHUNK, vol_len), BLOCK):
        mask = start + offs < vol_len
        x = tl.load(y_ptr + base + start + offs, mask=mask, other=0.0)
        n_b = tl.minimum(vol_len - start, BLOCK).to(tl.float32)
        mean_b = tl.sum(x, axis=0) / n_b
        d = tl.where(mask, x - mean_b, 0.0)
        m2_b = tl.sum(d * d, axis=0)
        total = count + n_b          # Chan et al.: merge the block into the chunk's statistics
        delta = mean_b - mean
        mean += delta * (n_b / total)
        m2 += m2_b + delta * delta * (count * n_b / total)
        count = total
    tl.store(mean_ptr + vol * n_chunks + chunk, mean)
    tl.store(m2_ptr + vol * n_chunks + chunk, m2)


@triton.jit
def bn_minus_volume_mean_kernel(y_ptr, mean_ptr, m2_ptr, conv_bias_ptr, bn_w_ptr, run_mean_ptr, run_var_ptr,
                                out_ptr, N, C, vol_len, n_chunks, eps, momentum,
                                BATCH_STATS: tl.constexpr, UPDATE_RUNNING: tl.constexpr,
                                CHUNK: tl.constexpr, BLOCK: tl.constexpr, N_P2: tl.constexpr,
                                CHUNKS_P2: tl.constexpr):
    vol = tl.program_id(axis=0)          # (n, c)
    chunk = tl.program_id(axis=1)
    c = vol % C
    n = vol // C
    # Partials of channel c over every sample: [N_P2, CHUNKS_P2], each chunk holding n_s values.
    ns = tl.arange(0, N_P2)
    ss = tl.arange(0, CHUNKS_P2)
    ok = (ns[:, None] < N) & (ss[None, :] < n_chunks)
    where = (ns[:, None] * C + c) * n_chunks + ss[None, :]
    n_s = tl.where(ok, tl.minimum(vol_len - ss[None, :] * CHUNK, CHUNK), 0).to(tl.float32)
    mean_s = tl.load(mean_ptr + where, mask=ok, other=0.0)
    m2_s = tl.load(m2_ptr + where, mask=ok, other=0.0)
    # This volume's mean: its own row of partials.
    vol_mean = tl.sum(tl.sum(tl.where(ns[:, None] == n, n_s * mean_s, 0.0), axis=1), axis=0) / vol_len
    if BATCH_STATS:
        count = (N * vol_len).to(tl.float32)
        mean = tl.sum(tl.sum(n_s * mean_s, axis=1), axis=0) / count
        dev = mean_s - mean
        var = (tl.sum(tl.sum(m2_s, axis=1), axis=0) + tl.sum(tl.sum(n_s * dev * dev, axis=1), axis=0)) / count
        if UPDATE_RUNNING:
            if (n == 0) & (chunk == 0):
                rm = tl.load(run_mean_ptr + c)
                rv = tl.load(run_var_ptr + c)
                unbiased = var * (count / tl.maximum(count - 1.0, 1.0))
                tl.store(run_mean_ptr + c, (1.0 - momentum) * rm + momentum * (mean + tl.load(conv_bias_ptr + c)))
                tl.store(run_var_ptr + c, (1.0 - momentum) * rv + momentum * unbiased)
    else:
        var = tl.load(run_var_ptr + c)
    a = tl.load(bn_w_ptr + c) / tl.sqrt(var + eps)

    base = vol.to(tl.int64) * vol_len
    offs = tl.arange(0, BLOCK)
    for start in range(chunk * CHUNK, tl.minimum(chunk * CHUNK + CHUNK, vol_len), BLOCK):
        mask = start + offs < vol_len
        x = tl.load(y_ptr + base + start + offs, mask=mask, eviction_policy="evict_first")
        tl.store(out_ptr + base + start + offs, (x - vol_mean) * a, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias=True):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, bias=bias)
        self.batch_norm = nn.BatchNorm3d(out_channels)

    def forward(self, x):
        ct, bn = self.conv_transpose, self.batch_norm
        if not bn.affine:
            raise NotImplementedError("this kernel implements an affine BatchNorm3d")
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding, ct.groups,
                               ct.dilation).contiguous()
        n, c = y.shape[:2]
        vol_len = y[0, 0].numel()
        batch_stats = bn.training or not bn.track_running_stats
        update_running = bn.training and bn.track_running_stats
        momentum = bn.momentum
        if update_running:
            bn.num_batches_tracked.add_(1)
            if momentum is None:  # cumulative moving average
                momentum = 1.0 / float(bn.num_batches_tracked.item())
        conv_bias = ct.bias if ct.bias is not None else torch.zeros(c, device=y.device, dtype=y.dtype)

        n_chunks = triton.cdiv(vol_len, CHUNK)
        means = torch.empty((n * c, n_chunks), device=y.device, dtype=torch.float32)
        m2s = torch.empty_like(means)
        grid = (n * c, n_chunks)
        volume_stats_kernel[grid](y, means, m2s, vol_len, n_chunks, CHUNK=CHUNK, BLOCK=BLOCK, num_warps=8)
        out = torch.empty_like(y)
        running_mean = bn.running_mean if bn.running_mean is not None else means
        running_var = bn.running_var if bn.running_var is not None else means
        bn_minus_volume_mean_kernel[grid](
            y, means, m2s, conv_bias, bn.weight, running_mean, running_var, out, n, c, vol_len, n_chunks, bn.eps,
            float(momentum or 0.0), BATCH_STATS=batch_stats, UPDATE_RUNNING=update_running, CHUNK=CHUNK,
            BLOCK=BLOCK, N_P2=triton.next_power_of_2(n), CHUNKS_P2=triton.next_power_of_2(n_chunks), num_warps=8)
        return out
