"""2-D convolution, 64 -> 128 channels, 3 x 3 (kb:1/55), step 2: step 1's implicit GEMM in TF32, rounded as cuDNN rounds.

The convolution is a GEMM of M = batch x H_out x W_out output pixels by
N = C_out channels over K = C_in x 3 x 3 taps, with the im2col matrix never
built: a program takes BLOCK_M consecutive pixels of one output row and
gathers its BLOCK_M x BLOCK_K slice of im2col straight from x (k = (c, kh,
kw) decomposed per step; for a fixed tap, neighbouring pixels read
neighbouring input columns, so the gather coalesces along the pixels),
multiplies by the matching BLOCK_K x BLOCK_N slice of the weights (0.3 MiB,
in L2) and writes its BLOCK_M x BLOCK_N tile of y in NCHW (pixels contiguous
for each channel). Padding, stride and dilation enter only as masks and
index arithmetic; all of them, and the kernel size, are compile-time
constants (one compiled kernel per layer shape), so the tap decomposition
needs no divisions and unpadded layers need no bounds tests.

Numerics: the reference runs on cuDNN with TF32 allowed (PyTorch's default
for convolutions), so it multiplies operands rounded to TF32 (10 mantissa
bits) and adds in fp32; an exact fp32 convolution (step 1's 3xTF32) then
differs from it by the reference's own rounding error, up to ~5e-4 here,
over the 1e-4 tolerance on ~20% of the outputs (simulated on the CPU). This
step rounds both operands to TF32 itself, to nearest with ties to even (as
Hopper's TMA conversion does), before one TF32 tensor-core product: TF32 x
TF32 products are exact in fp32, so only the order of the fp32 additions
differs from the reference. If the reference does run in fp32, step 1 is the
correct one; the GPU run decides. One TF32 product per step instead of three
also makes the arithmetic 3x cheaper.

Work: 615 GFLOP (8 x 510 x 1022 pixels x 128 x 576). Bytes: x 1.07 GB read,
y 2.13 GB written: 1.07 ms at 3.0 TB/s. TF32 at ~495 TFLOP/s peak: 1.24 ms.
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
def conv2d_igemm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, H, W, C_out, H_out, W_out, K,
                        KH: tl.constexpr, KW: tl.constexpr, STRIDE: tl.constexpr, PADDING: tl.constexpr,
                        DILATION: tl.constexpr, HAS_BIAS: tl.constexpr, IDX64: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # A program owns BLOCK_M consecutive pixels of one output row (n, oh): the
    # pixel offsets are then a scalar plus a range, which Triton can prove
    # contiguous (for stride 1) and so coalesces the gather along the pixels.
    n_ow_blocks = tl.cdiv(W_out, BLOCK_M)
    row = tl.program_id(axis=0) // n_ow_blocks
    n = row // H_out
    oh = row % H_out
    ow = (tl.program_id(axis=0) % n_ow_blocks) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = ow < W_out
    ih0 = oh * STRIDE - PADDING
    iw0 = ow * STRIDE - PADDING
    # 32-bit offsets unless the tensors are too large for them (fewer registers in the gather).
    nb = n.to(tl.int64) if IDX64 else n
    x_row = x_ptr + nb * C * H * W + ih0 * W
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
        # Pixels past the row's end and the K tail read zeros; so do taps in
        # the padding, which only exist when PADDING > 0.
        a_mask = m_ok[:, None] & k_ok[None, :]
        if PADDING > 0:
            ih = ih0 + kh
            iw = iw0[:, None] + kw[None, :]
            a_mask = a_mask & ((ih >= 0) & (ih < H))[None, :] & (iw >= 0) & (iw < W)
        a = tl.load(x_row + iw0[:, None] + (c * H * W + kh * W + kw)[None, :], mask=a_mask, other=0.0)
        b = tl.load(w_ptr + offs_n[None, :] * K + offs_k[:, None], mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(_round_to_tf32(a), _round_to_tf32(b), acc, input_precision="tf32")
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0)[None, :]
    hw_out = H_out * W_out
    y_row = y_ptr + nb * C_out * hw_out + oh * W_out
    tl.store(y_row + ow[:, None] + offs_n[None, :] * hw_out, acc, mask=m_ok[:, None] & n_ok[None, :])


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
    K = C * KH * KW
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 128, 32
    grid = (N * H_out * triton.cdiv(W_out, BLOCK_M), triton.cdiv(C_out, BLOCK_N))
    conv2d_igemm_kernel[grid](x, weight, bias if bias is not None else weight, y, C, H, W, C_out, H_out, W_out,
                              K, KH=KH, KW=KW, STRIDE=stride, PADDING=padding, DILATION=dilation,
                              HAS_BIAS=bias is not None,
                              IDX64=max(x.numel(), y.numel()) >= 2 ** 31,
                              BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=8, num_stages=3)
    return y


class _ConvParams(nn.Module):
    """Weight (and bias) under the reference's names, initialized as nn.Conv2d does."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size, kernel_size))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        fan_in = in_channels * kernel_size * kernel_size
        self.bias = nn.Parameter(torch.empty(out_channels).uniform_(-fan_in ** -0.5, fan_in ** -0.5)) if bias else None


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 dilation: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        if groups != 1:
            raise NotImplementedError("this kernel handles groups = 1 only")
        self.stride, self.padding, self.dilation = stride, padding, dilation
        self.conv2d = _ConvParams(in_channels, out_channels, kernel_size, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv2d_igemm(x, self.conv2d.weight, self.conv2d.bias, self.stride, self.padding, self.dilation)
