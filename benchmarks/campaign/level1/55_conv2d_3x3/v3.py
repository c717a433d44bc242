"""2-D convolution, 64 -> 128 channels, 3 x 3 (kb:1/55), step 3: step 2 with weights rounded once, autotuned tiles.

Step 2 (TF32 implicit GEMM, operands rounded to nearest-even TF32 as cuDNN's
TF32 path does) rounded both operands inside the K loop. The weights are the
same for every program: rounding them there means loading the B tile to
registers, rounding, and writing it back to shared memory for the tensor
cores, in every program and every K step. Here one tiny kernel rounds the
weights once per call (73,728 values), and the main loop passes B from shared
memory to the tensor cores untouched; only the gathered activations are
rounded in registers. Tile shape, warps and pipeline depth are autotuned.

The convolution is still a GEMM of M = batch x H_out x W_out output pixels by
N = C_out channels over K = C_in x 3 x 3 taps, a program taking BLOCK_M
consecutive pixels of one output row (coalesced gather along the pixels) and
all or part of the output channels; padding, stride and dilation are
compile-time constants.

Work: 615 GFLOP. Bytes: x 1.07 GB read, y 2.13 GB written: 1.07 ms at
3.0 TB/s. TF32 at ~495 TFLOP/s peak: 1.24 ms.
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
             for bm, bn, bk, w, st in [(128, 128, 32, 8, 3), (128, 128, 32, 8, 4), (64, 128, 32, 4, 4),
                                       (128, 64, 32, 4, 4), (128, 128, 64, 8, 2)]],
    key=["C", "H", "W", "C_out", "K"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
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
        # The weights arrive already rounded to TF32.
        acc = tl.dot(_round_to_tf32(a), b, acc, input_precision="tf32")
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
    w_tf32 = torch.empty_like(weight)
    round_to_tf32_kernel[(triton.cdiv(weight.numel(), 1024),)](weight, w_tf32, weight.numel(), BLOCK=1024)
    N, C, H, W = x.shape
    C_out, _, KH, KW = weight.shape
    H_out = (H + 2 * padding - dilation * (KH - 1) - 1) // stride + 1
    W_out = (W + 2 * padding - dilation * (KW - 1) - 1) // stride + 1
    y = torch.empty((N, C_out, H_out, W_out), device=x.device, dtype=torch.float32)
    K = C * KH * KW
    grid = lambda meta: (N * H_out * triton.cdiv(W_out, meta["BLOCK_M"]), triton.cdiv(C_out, meta["BLOCK_N"]))
    conv2d_igemm_kernel[grid](x, w_tf32, bias if bias is not None else w_tf32, y, C, H, W, C_out, H_out, W_out,
                              K, KH=KH, KW=KW, STRIDE=stride, PADDING=padding, DILATION=dilation,
                              HAS_BIAS=bias is not None,
                              IDX64=max(x.numel(), y.numel()) >= 2 ** 31)
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
