"""2-D convolution, 3 -> 96 channels, 11 x 11, stride 4 (kb:1/50), step 3: step 2 with weights rounded once, autotuned tiles.

Step 2 (TF32 implicit GEMM, operands rounded to nearest-even TF32 as cuDNN's
TF32 path does) rounded both operands inside the K loop. The weights are the
same for every program: rounding them there means loading the B tile to
registers, rounding, and writing it back to shared memory for the tensor
cores, in every program and every K step. Here one tiny kernel rounds the
weights once per call (34,848 values), and the main loop passes B from shared
memory to the tensor cores untouched; only the gathered activations are
rounded in registers. Tile shape, warps and pipeline depth are autotuned.

The convolution is still a GEMM of M = batch x H_out x W_out output pixels by
N = C_out channels over K = C_in x 11 x 11 taps, a program taking BLOCK_M
consecutive output pixels (flat numbering) and all or part of the output
channels, the bias added before the store; padding, stride and dilation are
compile-time constants.

Work: 54 GFLOP, plus the bias add fused into the store. Bytes: x 154 MB
read, y 297 MB written: 0.15 ms at 3.0 TB/s. TF32 at ~495 TFLOP/s: 0.11 ms.
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
             for bm, bn, bk, w, st in [(64, 128, 32, 8, 3), (64, 128, 32, 8, 4), (64, 128, 16, 4, 4),
                                       (64, 64, 32, 4, 4), (32, 128, 32, 4, 4)]],
    key=["C", "H", "W", "C_out", "K"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def conv2d_igemm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, H, W, C_out, H_out, W_out, M, K,
                        KH: tl.constexpr, KW: tl.constexpr, STRIDE: tl.constexpr, PADDING: tl.constexpr,
                        DILATION: tl.constexpr, HAS_BIAS: tl.constexpr, IDX64: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Output pixels of this tile, numbered m = (n * H_out + oh) * W_out + ow.
    # At stride 4 neighbouring pixels are 16 bytes apart in x anyway, so a
    # flat numbering (no partly empty tiles at the 55-pixel row ends) costs
    # no coalescing.
    offs_m = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = offs_m < M
    ow = offs_m % W_out
    oh = (offs_m // W_out) % H_out
    n = offs_m // (W_out * H_out)
    ih0 = oh * STRIDE - PADDING
    iw0 = ow * STRIDE - PADDING
    # 32-bit offsets unless the tensors are too large for them (fewer registers in the gather).
    nb = n.to(tl.int64) if IDX64 else n
    x_pix = nb * C * H * W + ih0 * W + iw0
    offs_n = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < C_out
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        # Taps of this step: k -> (c, kh, kw), the weights' own flattening order
        # (constant kernel sizes turn the divisions into multiplies).
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < K
        kw = (offs_k % KW) * DILATION
        kh = ((offs_k // KW) % KH) * DILATION
        c = offs_k // (KW * KH)
        # Pixels past M and the K tail read zeros; so do taps in
        # the padding, which only exist when PADDING > 0.
        a_mask = m_ok[:, None] & k_ok[None, :]
        if PADDING > 0:
            ih = ih0[:, None] + kh[None, :]
            iw = iw0[:, None] + kw[None, :]
            a_mask = a_mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_ptr + x_pix[:, None] + (c * H * W + kh * W + kw)[None, :], mask=a_mask, other=0.0)
        b = tl.load(w_ptr + offs_n[None, :] * K + offs_k[:, None], mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        # The weights arrive already rounded to TF32.
        acc = tl.dot(_round_to_tf32(a), b, acc, input_precision="tf32")
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0)[None, :]
    hw_out = H_out * W_out
    y_pix = nb * C_out * hw_out + oh * W_out + ow
    tl.store(y_ptr + y_pix[:, None] + offs_n[None, :] * hw_out, acc, mask=m_ok[:, None] & n_ok[None, :])


def conv2d_igemm(x: torch.Tensor, weight: torch.Tensor, bias, stride: int, padding: int,
                 dilation: int) -> torch.Tensor:
    """y = conv2d(x, weight, bias) for NCHW fp32 tensors, groups = 1, by implicit GEMM."""
    x = x.contiguous()
    weight = weight.contiguous()
    w_tf32 = torch.empty_like(weight)
    round_to_tf32_kernel[(triton.cdiv(weight.numel(), 1024),)](weight, w_tf32, weight.numel(), BLOCK=1024)
    N, C, H, W = x.shape
    C_out, _, KH, KW = weight.shape
    H_out = (H + 2 * padding - dilation * (KH - 1) - 1) // stride + 1
    W_out = (W + 2 * padding - dilation * (KW - 1) - 1) // stride + 1
    y = torch.empty((N, C_out, H_out, W_out), device=x.device, dtype=torch.float32)
    M, K = N * H_out * W_out, C * KH * KW
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(C_out, meta["BLOCK_N"]))
    conv2d_igemm_kernel[grid](x, w_tf32, bias if bias is not None else w_tf32, y, C, H, W, C_out, H_out, W_out,
                              M, K, KH=KH, KW=KW, STRIDE=stride, PADDING=padding, DILATION=dilation,
                              HAS_BIAS=bias is not None,
                              IDX64=max(x.numel(), y.numel()) >= 2 ** 31)
    return y


class _ConvParams(nn.Module):
    """Weight and bias under the reference's names (conv1.weight, conv1.bias), initialized as nn.Conv2d does."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size, kernel_size))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        fan_in = in_channels * kernel_size * kernel_size
        self.bias = nn.Parameter(torch.empty(out_channels).uniform_(-fan_in ** -0.5, fan_in ** -0.5))


class ModelNew(nn.Module):
    """The problem's layer: 3 -> 96 channels, 11 x 11 kernel, stride 4, padding 2, with bias."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = _ConvParams(3, 96, 11)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv2d_igemm(x, self.conv1.weight, self.conv1.bias, stride=4, padding=2, dilation=1)
