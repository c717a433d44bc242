"""3-D convolution, 3 -> 64 channels, 3 x 3 x 3 (kb:1/54), step 1: implicit GEMM on the tensor cores with 3xTF32.

The convolution is a GEMM of M = batch x D_out x H_out x W_out output pixels
by N = C_out channels over K = C_in x 3 x 3 x 3 = 81 taps, with the im2col
matrix never built: a program takes BLOCK_M consecutive pixels of one output
row (n, od, oh) and gathers its BLOCK_M x BLOCK_K slice of im2col straight
from x (k = (c, kd, kh, kw) decomposed per step; for a fixed tap,
neighbouring pixels read neighbouring input columns, so the gather coalesces
along the pixels), multiplies by the matching BLOCK_K x BLOCK_N slice of the
weights (20 KiB) and writes its tile of y in NCDHW (pixels contiguous for
each channel). Padding, stride, dilation and the kernel size are
compile-time constants: the tap decomposition needs no divisions and
unpadded layers no bounds tests. The 62-pixel output rows fill 97% of a
64-pixel tile.

Numerics: the products use 3xTF32 (each operand split into a TF32 big part
and a TF32 remainder, three tensor-core products), which tracks the exact
fp32 convolution to ~1e-6. The reference runs on cuDNN, which may itself use
TF32 (torch.backends.cudnn.allow_tf32 is on by default); an exact
convolution then differs from the reference by the reference's own TF32
error (up to ~4e-4 here, above the 1e-4 tolerance on ~19% of the outputs
when simulated on the CPU), so this step is correct against an fp32
reference, and step 2 covers a TF32 one.

Work: 39.5 GFLOP (16 x 62^3 pixels x 64 x 81). Bytes: x 50 MB read, y 976 MB
written: 0.34 ms at 3.0 TB/s, the floor; 3xTF32 at ~165 TFLOP/s peak needs
0.24 ms, so the kernel is store-bound if the two overlap.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


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
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
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
    N, C, D, H, W = x.shape
    C_out, _, KD, KH, KW = weight.shape
    D_out, H_out, W_out = ((s + 2 * padding - dilation * (k - 1) - 1) // stride + 1
                           for s, k in ((D, KD), (H, KH), (W, KW)))
    y = torch.empty((N, C_out, D_out, H_out, W_out), device=x.device, dtype=torch.float32)
    K = C * KD * KH * KW
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (N * D_out * H_out * triton.cdiv(W_out, BLOCK_M), triton.cdiv(C_out, BLOCK_N))
    conv3d_igemm_kernel[grid](x, weight, bias if bias is not None else weight, y, C, D, H, W, C_out, D_out, H_out,
                              W_out, K, KD=KD, KH=KH, KW=KW, STRIDE=stride, PADDING=padding, DILATION=dilation,
                              HAS_BIAS=bias is not None, IDX64=max(x.numel(), y.numel()) >= 2 ** 31,
                              BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4, num_stages=3)
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
