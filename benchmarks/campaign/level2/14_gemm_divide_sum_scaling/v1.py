"""x @ W^T -> / 2 -> sum over the features -> * s, step 1: cuBLAS matrix product, one Triton row sum.

The matrix product (1024 x 8192 x 8192, 137 GFLOP) is the whole cost; cuBLAS runs
it in fp32. The rest is one pass: a Triton kernel reads the 32 MB product once and
writes one number per row, sum(y / 2) * s. Halving is exact in floating point, so
halving each term or the sum gives the same bits; the 32 MB read takes ~12 µs.

A program owns BLOCK_M rows and walks their N columns in BLOCK_N chunks, keeping a
[BLOCK_M, BLOCK_N] running sum that is reduced across columns once at the end.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def half_row_sum_scale_kernel(y_ptr, out_ptr, M, N, scale,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    row_base = rows.to(tl.int64) * N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        mask = row_ok[:, None] & (cols[None, :] < N)  # the last chunk may be partial
        acc += tl.load(y_ptr + row_base[:, None] + cols[None, :], mask=mask, other=0.0)
    total = tl.sum(acc, axis=1)
    tl.store(out_ptr + rows, (total * 0.5) * scale, mask=row_ok)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        y = torch.mm(x, self.weight.t())
        m, n = y.shape
        out = torch.empty((m, 1), device=y.device, dtype=y.dtype)
        bm = 4
        half_row_sum_scale_kernel[(triton.cdiv(m, bm),)](y, out, m, n, float(self.scaling_factor),
                                                         BLOCK_M=bm, BLOCK_N=512, num_warps=4)
        return out
