"""3-D convolution, 3 -> 64 channels, 3 x 3 x 3 (kb:1/54), step 3: step 2 with weights rounded once, autotuned tiles.

Step 2 (TF32 implicit GEMM, operands rounded to nearest-even TF32 as cuDNN's
TF32 path does) rounded both operands inside the K loop; the weights are the
same for every program, so here one tiny kernel rounds them once per call and
the main loop passes B from shared memory to the tensor cores untouched.
Tile shape, K step, warps and pipeline depth are autotuned.

Work: 39.5 GFLOP. Bytes: x 50 MB read, y 976 MB written: 0.34 ms at
3.0 TB/s, the floor.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _round_to_tf32(x):
    # Round to nearest even at 10 mantissa bits; Inf and NaN pass unchanged.
    bits = x.to(tl.int32, bitcast=True)
    special = (bits & 0x7F800000) == 0x7F800000
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & -8192
    return tl.where(special, bits, rounded).to(tl.float32, bitcast=True)


@triton.jit
def round_to_tf32_kernel(src_ptr, dst_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    tl.store(dst_ptr + offs, _round_to_tf32(tl.load(src_ptr + offs, mask=mask)), mask=mask)


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    return configs if named_args["x_ptr"].is_cuda else configs[:1]


@triton.autotune(
    configs=[triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=st)
             for bm, bn, bk, w, st in [(64, 64, 32, 4, 3), (64, 64, 16, 4, 4), (64, 64, 32, 8, 3),
                                       (64, 32, 32, 4, 3), (64, 64, 64, 4, 2)]],
    key=["C", "D", "H", "W", "C_out", "K"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def conv3d_igemm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, D, H, W, C_out, D_out, H_out, W_out, K,
                        KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, STRIDE: tl.constexpr,
                        PADDING: tl.constexpr, DILATION: tl.constexpr, HAS_BIAS: tl.constexpr,
                        IDX64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # A program owns BLOCK_M consecutive pixels of one output row (n, od, oh):
    # the pixel offsets are a scalar plus a range, which Triton can prove
    # contiguous (for stride 1) and so coalesces the gather along the pixels.
    n_ow_blocks = tl.cdiv(W_out, BLOCK_M)
    row = tl.program_id(axis=0) // n_ow_blocks
    oh = row % H_out
    od = (row // H_out) % D_out
    n = row // (H_out * D_out)
    ow = (tl.program_id(axis=0) % n_ow_blocks) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = ow < W_out
    id0 = od * STRIDE - PADDING
    ih0 = oh * STRIDE - PADDING
    iw0 = ow * STRIDE - PADDING
    # 32-bit offsets unless the tensors are too large for them (fewer registers in the gather).
    nb = n.to(tl.int64) if IDX64 else n
    x_row = x_ptr + nb * C * D * H * W + (id0 * H + ih0) * W
    offs_n = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < C_out
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        # Taps of this step: k -> (c, kd, kh, kw), the weights' own flattening
        # order (constant kernel sizes turn the divisions into multiplies).
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < K
        kw = (offs_k % KW) * DILATION
        kh = ((offs_k // KW) % KH) * DILATION
        kd = ((offs_k // (KW * KH)) % KD) * DILATION
        c = offs_k // (KW * KH * KD)
        # Pixels past the row's end and the K tail read zeros; so do taps in
        # the padding, which only exist when PADDING > 0.
        a_mask = m_ok[:, None] & k_ok[None, :]
        if PADDING > 0:
            idd = id0 + kd
            ih = ih0 + kh
            iw = iw0[:, None] + kw[None, :]
            a_mask = a_mask & ((idd >= 0) & (idd < D) & (ih >= 0) & (ih < H))[None, :] & (iw >= 0) & (iw < W)
        a = tl.load(x_row + iw0[:, None] + (((c * D + kd) * H + kh) * W + kw)[None, :], mask=a_mask, other=0.0)
        b = tl.load(w_ptr + offs_n[None, :] * K + offs_k[:, None], mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        # The weights arrive already rounded to TF32.
        acc = tl.dot(_round_to_tf32(a), b, acc, input_precision="tf32")
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0)[None, :]
    dhw_out = D_out * H_out * W_out
    y_row = y_ptr + nb * C_out * dhw_out + (od * H_out + oh) * W_out
    tl.store(y_row + ow[:, None] + offs_n[None, :] * dhw_out, acc, mask=m_ok[:, None] & n_ok[None, :])


def conv3d_igemm(x: torch.Tensor, weight: torch.Tensor, bias, stride: int, padding: int,
                 dilation: int) -> torch.Tensor:
    """y = conv3d(x, weight, bias) for NCDHW fp32 tensors, groups = 1, by implicit GEMM."""
    x = x.contiguous()
    weight = weight.contiguous()
    w_tf32 = torch.empty_like(weight)
    round_to_tf32_kernel[(triton.cdiv(weight.numel(), 1024),)](weight, w_tf32, weight.numel(), BLOCK=1024)
    N, C, D, H, W = x.shape
    C_out, _, KD, KH, KW = weight.shape
    D_out, H_out, W_out = ((s + 2 * padding - dilation * (k - 1) - 1) // stride + 1
                           for s, k in ((D, KD), (H, KH), (W, KW)))
    y = torch.empty((N, C_out, D_out, H_out, W_out), device=x.device, dtype=torch.float32)
    K = C * KD * KH * KW
    grid = lambda meta: (N * D_out * H_out * triton.cdiv(W_out, meta["BLOCK_M"]), triton.cdiv(C_out, meta["BLOCK_N"]))
    conv3d_igemm_kernel[grid](x, w_tf32, bias if bias is not None else w_tf32, y, C, D, H, W, C_out, D_out, H_out,
                              W_out, K, KD=KD, KH=KH, KW=KW, STRIDE=stride, PADDING=padding, DILATION=dilation,
                              HAS_BIAS=bias is not None, IDX64=max(x.numel(), y.numel()) >= 2 ** 31)
    return y


class _ConvParams(nn.Module):
    """Weight (and bias) under the reference's names, initialized as nn.Conv3d does."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size, kernel_size, kernel_size))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        fan_in = in_channels * kernel_size ** 3
        self.bias = nn.Parameter(torch.empty(out_channels).uniform_(-fan_in ** -0.5, fan_in ** -0.5)) if bias else None


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 dilation: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        if groups != 1:
            raise NotImplementedError("this kernel handles groups = 1 only")
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.conv3d = _ConvParams(in_channels, out_channels, kernel_size, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv3d_igemm(x, self.conv3d.weight, self.conv3d.bias, self.stride, self.padding, self.dilation)
