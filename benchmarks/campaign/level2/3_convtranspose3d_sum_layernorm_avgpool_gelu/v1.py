"""ConvTranspose3d -> + w -> LayerNorm(last dim) -> AvgPool3d -> GELU, step 1: cuDNN transposed
convolution without its bias, one Triton kernel for everything after it.

The LayerNorm normalizes each W-long row of the (N, C, D, H, W) output (W = 64 here),
and the 2x2x2 average pool then mixes 2 rows in D, 2 in H and 2 neighbours in W. So
one program takes R output rows (n, c, od, oh) and, for each of the PD*PH input rows
of every output row, loads the whole W-long row, normalizes it in registers and adds
it into the pool sum; the full-size normalized tensor never exists. The convolution's
1.07 GB output is read once and only the 8x smaller pooled result is written, where
eager PyTorch writes and re-reads the full size after the bias, the add and the norm.

Row layout in registers: [R, NWO, PW_P2] with w = wo * PW + k, so the pool's W
window is the last axis (summed away) and the LayerNorm statistics are over the
last two axes; w >= W (padding to powers of two) is masked out of both.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.utils import _triple
import triton
import triton.language as tl


@triton.jit
def layernorm_avgpool_gelu_kernel(y_ptr, conv_bias_ptr, sum_weight_ptr, gamma_ptr, beta_ptr, out_ptr,
                                  n_out_rows, C, D, H, W, OD, OH, OW, eps,
                                  PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, R: tl.constexpr,
                                  NWO: tl.constexpr, PW_P2: tl.constexpr):
    rows = tl.program_id(axis=0) * R + tl.arange(0, R)          # output rows (n, c, od, oh)
    row_ok = rows < n_out_rows
    oh = rows % OH
    od = (rows // OH) % OD
    nc = rows // (OH * OD)
    channel = nc % C
    wo = tl.arange(0, NWO)
    k = tl.arange(0, PW_P2)
    w = wo[None, :, None] * PW + k[None, None, :]                  # [1, NWO, PW_P2]
    w_ok = (w < W) & (k[None, None, :] < PW)
    mask = row_ok[:, None, None] & w_ok
    gamma = tl.load(gamma_ptr + w, mask=w_ok, other=0.0)
    beta = tl.load(beta_ptr + w, mask=w_ok, other=0.0)
    shift = tl.load(conv_bias_ptr + channel, mask=row_ok, other=0.0)[:, None, None]
    sum_weight = tl.load(sum_weight_ptr)

    acc = tl.zeros([R, NWO], dtype=tl.float32)
    for kd in tl.static_range(PD):
        for kh in tl.static_range(PH):
            in_row = (nc.to(tl.int64) * D + od * PD + kd) * H + oh * PH + kh
            x = tl.load(y_ptr + in_row[:, None, None] * W + w, mask=mask, other=0.0)
            x = (x + shift) + sum_weight
            mean = tl.sum(tl.sum(tl.where(mask, x, 0.0), axis=2), axis=1) / W
            d = tl.where(mask, x - mean[:, None, None], 0.0)
            var = tl.sum(tl.sum(d * d, axis=2), axis=1) / W
            rstd = 1.0 / tl.sqrt(var + eps)
            acc += tl.sum(d * rstd[:, None, None] * gamma + beta, axis=2)
    # The pooled mean, then exact (erf) GELU; padding lanes wo >= OW are not stored.
    z = acc * (1.0 / (PD * PH * PW))
    z = 0.5 * z * (1.0 + tl.math.erf(z * 0.7071067811865476))
    out_mask = row_ok[:, None] & (wo[None, :] < OW)
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * OW + wo[None, :], z, mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, sum_weight,
                 norm_shape, pool_kernel_size):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.sum_weight = nn.Parameter(torch.tensor(sum_weight))
        self.norm = nn.LayerNorm(norm_shape)
        self.avg_pool = nn.AvgPool3d(kernel_size=pool_kernel_size)
        self.gelu = nn.GELU()

    def forward(self, x):
        ct, ln, pool = self.conv_transpose, self.norm, self.avg_pool
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding, ct.groups,
                               ct.dilation).contiguous()
        n, c, d, h, w = y.shape
        if tuple(ln.normalized_shape) != (w,) or not ln.elementwise_affine or ln.bias is None:
            raise NotImplementedError("this kernel implements an affine LayerNorm over the last dimension only")
        pd, ph, pw = _triple(pool.kernel_size)
        if _triple(pool.stride) != (pd, ph, pw) or any(_triple(pool.padding)) or pool.ceil_mode \
                or pool.divisor_override:
            raise NotImplementedError("this kernel implements AvgPool3d with stride = kernel, no padding")
        od, oh, ow = d // pd, h // ph, w // pw
        out = torch.empty((n, c, od, oh, ow), device=y.device, dtype=y.dtype)
        n_out_rows = n * c * od * oh
        nwo = triton.next_power_of_2(triton.cdiv(w, pw))
        pw_p2 = triton.next_power_of_2(pw)
        rows = max(1, 2048 // (nwo * pw_p2))
        layernorm_avgpool_gelu_kernel[(triton.cdiv(n_out_rows, rows),)](
            y, ct.bias, self.sum_weight, ln.weight, ln.bias, out, n_out_rows, c, d, h, w, od, oh, ow, ln.eps,
            PD=pd, PH=ph, PW=pw, R=rows, NWO=nwo, PW_P2=pw_p2, num_warps=4)
        return out
