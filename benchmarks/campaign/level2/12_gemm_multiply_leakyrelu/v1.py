"""Linear -> * m -> LeakyReLU, step 1: cuBLAS matrix product without its bias, one Triton epilogue.

The matrix product (1024 x 8192 x 8192, 137 GFLOP) is the whole cost; cuBLAS runs
it in fp32. What follows it is one pass: a Triton kernel reads the product once
and writes leaky_relu((y + bias[n]) * m), the same operations in the same order as
the reference, so the rounding matches. The epilogue moves 64 MB, ~25 µs.

Tiles are [BLOCK_M rows, BLOCK_N columns] of the row-major product; the bias is
one vector load per tile.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_multiply_leaky_relu_kernel(y_ptr, bias_ptr, out_ptr, M, N, multiplier, negative_slope,
                                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(axis=1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    mask = (rows[:, None] < M) & col_ok[None, :]
    offsets = rows[:, None].to(tl.int64) * N + cols[None, :]
    y = tl.load(y_ptr + offsets, mask=mask)
    bias = tl.load(bias_ptr + cols, mask=col_ok, other=0.0)
    z = (y + bias[None, :]) * multiplier
    tl.store(out_ptr + offsets, tl.where(z > 0.0, z, z * negative_slope), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        y = torch.mm(x, self.gemm.weight.t())
        m, n = y.shape
        out = torch.empty_like(y)
        bm, bn = 16, 256
        bias_multiply_leaky_relu_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
            y, self.gemm.bias, out, m, n, float(self.multiplier), float(self.leaky_relu.negative_slope),
            BLOCK_M=bm, BLOCK_N=bn, num_warps=4)
        return out
