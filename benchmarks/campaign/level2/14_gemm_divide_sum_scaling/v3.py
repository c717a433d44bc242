"""x @ W^T -> / 2 -> sum over the features -> * s, step 3: the sum moved inside the product,
sum_n (x @ W^T)[m, n] = x[m] . (sum_n W[n]): a column sum of W and a matrix-vector product.

Steps 1 and 2 computed all 1024 x 8192 outputs of the GEMM (137 GFLOP) only to add
each row up. Summing first is the same sum in another order (linearity), so the
work drops to reading W once (268 MB) and x once (34 MB), ~0.1 ms of memory
traffic at 3 TB/s, and 0.1 GFLOP:
1. column sums: program (block of BLOCK_K columns, slice of ROWS rows of W) adds
   its [ROWS, BLOCK_K] slab in [BLOCK_R, BLOCK_K] tiles (each row's BLOCK_K
   floats contiguous) and adds the BLOCK_K partial sums atomically into w_sum;
   the N / ROWS slices of a column meet only in those adds (their order varies
   from run to run: last-bit differences);
2. matrix-vector: program owns BLOCK_M rows of x and walks K in BLOCK_K2 chunks
   against w_sum, then writes (dot * 0.5) * s per row.
Rounding: every term is still an fp32 product added in fp32 (no TF32 anywhere),
so the result differs from the reference by the reordering only.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

ROWS = 512           # rows of W per column-sum program
BLOCK_R, BLOCK_K = 64, 128
BLOCK_M, BLOCK_K2 = 4, 1024


@triton.jit
def column_sum_kernel(w_ptr, w_sum_ptr, N, K, ROWS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    cols = tl.program_id(axis=0) * BLOCK_K + tl.arange(0, BLOCK_K)
    col_ok = cols < K
    first_row = tl.program_id(axis=1) * ROWS
    r = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R, BLOCK_K], dtype=tl.float32)
    for r0 in range(first_row, tl.minimum(first_row + ROWS, N), BLOCK_R):
        rows = r0 + r
        mask = (rows[:, None] < tl.minimum(first_row + ROWS, N)) & col_ok[None, :]
        acc += tl.load(w_ptr + rows[:, None].to(tl.int64) * K + cols[None, :], mask=mask, other=0.0,
                       eviction_policy="evict_first")
    tl.atomic_add(w_sum_ptr + cols, tl.sum(acc, axis=0), mask=col_ok, sem="relaxed")


@triton.jit
def matvec_half_scale_kernel(x_ptr, w_sum_ptr, out_ptr, M, K, scale, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        k_ok = k < K
        x = tl.load(x_ptr + rows[:, None].to(tl.int64) * K + k[None, :], mask=row_ok[:, None] & k_ok[None, :],
                    other=0.0)
        acc += x * tl.load(w_sum_ptr + k, mask=k_ok, other=0.0)[None, :]
    tl.store(out_ptr + rows, (tl.sum(acc, axis=1) * 0.5) * scale, mask=row_ok)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = x.contiguous()
        w = self.weight.contiguous()
        m, k = x.shape
        n = w.shape[0]
        w_sum = torch.zeros((k,), device=x.device, dtype=torch.float32)  # the slices' sums are added into it
        column_sum_kernel[(triton.cdiv(k, BLOCK_K), triton.cdiv(n, ROWS))](w, w_sum, n, k, ROWS=ROWS,
                                                                         BLOCK_R=BLOCK_R, BLOCK_K=BLOCK_K,
                                                                         num_warps=8)
        out = torch.empty((m, 1), device=x.device, dtype=x.dtype)
        matvec_half_scale_kernel[(triton.cdiv(m, BLOCK_M),)](x, w_sum, out, m, k, float(self.scaling_factor),
                                                             BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K2, num_warps=4)
        return out
