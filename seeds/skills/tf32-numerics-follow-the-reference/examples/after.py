"""A 1x1 convolution as a GEMM whose arithmetic follows the reference's: TF32 products (operands
rounded to nearest even, like cuDNN) where PyTorch lets cuDNN run fp32 convolutions in TF32, exact
fp32 products elsewhere (the CPU, or TF32 turned off)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def round_tf32(x):
    # Keep 10 mantissa bits, rounding the 13 dropped ones to nearest even.
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def conv1x1_kernel(x_ptr, w_ptr, y_ptr, C_IN, C_OUT, P, TF32: tl.constexpr, BLOCK_CO: tl.constexpr,
                   BLOCK_P: tl.constexpr, BLOCK_CI: tl.constexpr):
    # y[n, co, p] = sum_ci w[co, ci] * x[n, ci, p]: a [C_OUT, C_IN] x [C_IN, P] product per sample.
    n = tl.program_id(2)
    offs_co = tl.program_id(0) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    offs_p = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_ci = tl.arange(0, BLOCK_CI)
    x_base = x_ptr + n.to(tl.int64) * C_IN * P
    acc = tl.zeros((BLOCK_CO, BLOCK_P), tl.float32)
    for ci in range(0, C_IN, BLOCK_CI):
        cs = ci + offs_ci
        w = tl.load(w_ptr + offs_co[:, None] * C_IN + cs[None, :],
                    mask=(offs_co[:, None] < C_OUT) & (cs[None, :] < C_IN), other=0.0)
        x = tl.load(x_base + cs[:, None] * P + offs_p[None, :], mask=(cs[:, None] < C_IN) & (offs_p[None, :] < P),
                    other=0.0)
        if TF32:
            acc = tl.dot(round_tf32(w), round_tf32(x), acc, input_precision="tf32")
        else:
            acc = tl.dot(w, x, acc, input_precision="ieee")
    tl.store(y_ptr + n.to(tl.int64) * C_OUT * P + offs_co[:, None] * P + offs_p[None, :], acc,
             mask=(offs_co[:, None] < C_OUT) & (offs_p[None, :] < P))


def reference_runs_tf32(x: torch.Tensor) -> bool:
    """Whether PyTorch lets cuDNN run this fp32 convolution in TF32 (Ampere or newer, flag on). A
    necessary condition only: cuDNN picks the algorithm per shape, so confirm once per problem by
    comparing the reference with float64 results of exact and of TF32-rounded operands."""
    return (x.is_cuda and torch.backends.cudnn.allow_tf32
            and torch.cuda.get_device_capability(x.device)[0] >= 8)


class ModelNew(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 1, bias=False)

    def forward(self, x):
        x = x.contiguous()
        n, c_in, h, w = x.shape
        weight = self.conv.weight.reshape(self.conv.out_channels, c_in).contiguous()
        c_out, p = weight.shape[0], h * w
        y = torch.empty((n, c_out, h, w), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(c_out, 64), triton.cdiv(p, 64), n)
        conv1x1_kernel[grid](x, weight, y, c_in, c_out, p, TF32=reference_runs_tf32(x), BLOCK_CO=64, BLOCK_P=64,
                             BLOCK_CI=16, num_warps=4)
        return y
