"""2-D convolution, 3 -> 96 channels, 11 x 11, stride 4 (kb:1/50), step 1: implicit GEMM on the tensor cores with 3xTF32.

The convolution is a GEMM of M = batch x H_out x W_out output pixels by
N = C_out channels over K = C_in x 11 x 11 taps, with the im2col matrix never
built: a program takes BLOCK_M consecutive output pixels (flat numbering
over batch, rows and columns) and gathers its BLOCK_M x BLOCK_K slice of
im2col straight from x (k = (c, kh, kw) decomposed per step; the 11 taps of
a kernel row read 11 consecutive input columns), multiplies by the matching
BLOCK_K x BLOCK_N slice of the weights (136 KiB, in L2), adds the bias and
writes its BLOCK_M x BLOCK_N tile of y in NCHW. Padding, stride and dilation enter only as masks and
index arithmetic; all of them, and the kernel size, are compile-time
constants (one compiled kernel per layer shape), so the tap decomposition
needs no divisions and unpadded layers need no bounds tests.

Numerics: the products use 3xTF32 (each operand split into a TF32 big part
and a TF32 remainder, three tensor-core products), which tracks the exact
fp32 convolution to ~1e-6. The reference runs on cuDNN, which may itself use
TF32 (torch.backends.cudnn.allow_tf32 is on by default); an exact
convolution then differs from the reference by the reference's own TF32
error (up to ~4e-4 here, above the 1e-4 tolerance on ~18% of the outputs
when simulated on the CPU), so this step is correct against an fp32
reference, and step 2 covers a TF32 one.

Work: 54 GFLOP (256 x 55 x 55 pixels x 96 x 363), plus the bias add fused
into the store. Bytes: x 154 MB read, y 297 MB written: 0.15 ms at 3.0 TB/s.
3xTF32 at ~165 TFLOP/s peak: 0.33 ms.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


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
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
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
    N, C, H, W = x.shape
    C_out, _, KH, KW = weight.shape
    H_out = (H + 2 * padding - dilation * (KH - 1) - 1) // stride + 1
    W_out = (W + 2 * padding - dilation * (KW - 1) - 1) // stride + 1
    y = torch.empty((N, C_out, H_out, W_out), device=x.device, dtype=torch.float32)
    M, K = N * H_out * W_out, C * KH * KW
    # 64 x 128 tiles: 3xTF32's operand splits plus the gather's index math fit 8 warps' registers.
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 128, 32
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(C_out, BLOCK_N))
    conv2d_igemm_kernel[grid](x, weight, bias if bias is not None else weight, y, C, H, W, C_out, H_out, W_out,
                              M, K, KH=KH, KW=KW, STRIDE=stride, PADDING=padding, DILATION=dilation,
                              HAS_BIAS=bias is not None,
                              IDX64=max(x.numel(), y.numel()) >= 2 ** 31,
                              BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=8, num_stages=3)
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
