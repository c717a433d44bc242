"""Linear -> sum over the features -> max, mean, logsumexp, logsumexp over dim 1, step 1: cuBLAS
matrix product without its bias, one Triton row sum.

After the sum with keepdim the tensor is (batch, 1): the max, the mean and both
logsumexps then reduce a dimension of size one, where each returns its input
unchanged (max and mean of one value are that value; logsumexp of one finite
value x is x + log(exp(x - x)) = x exactly, and an infinite or NaN x passes
through as well). So the result is out[m] = sum_n (y[m, n] + bias[n]).

The matrix product (1024 x 8192 x 8192, 137 GFLOP) is the whole cost; cuBLAS runs
it in fp32 without the bias. A program owns BLOCK_M rows and walks their N
columns in BLOCK_N chunks, adding the bias as it goes, with a [BLOCK_M, BLOCK_N]
running sum reduced across columns once at the end: the 32 MB product is read once.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_row_sum_kernel(y_ptr, bias_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    row_base = rows.to(tl.int64) * N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        col_ok = cols < N  # the last chunk may be partial
        y = tl.load(y_ptr + row_base[:, None] + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
        acc += tl.where(col_ok[None, :], y + tl.load(bias_ptr + cols, mask=col_ok, other=0.0)[None, :], 0.0)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1), mask=row_ok)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.mm(x, self.linear.weight.t())
        m, n = y.shape
        out = torch.empty((m, 1), device=y.device, dtype=y.dtype)
        bm = 4
        bias_row_sum_kernel[(triton.cdiv(m, bm),)](y, self.linear.bias, out, m, n, BLOCK_M=bm, BLOCK_N=512,
                                                   num_warps=4)
        return out
