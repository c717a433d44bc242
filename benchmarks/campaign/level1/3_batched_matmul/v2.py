"""Batched fp32 matmul (kb:1/3), step 2: step 1's tiles on the tensor cores with 3xTF32 ("tf32x3").

C[b] = A[b] @ B[b] for 128 batches of 512 x 1024 @ 1024 x 2048 (275 GFLOP).
Step 1 multiplied on the CUDA cores (fp32 FMA, ~60 TFLOP/s peak on H100).
Plain TF32 keeps only 10 mantissa bits and misses the fp32 reference's 1e-4
tolerance; 3xTF32 splits each operand into a TF32 "big" part and a TF32
remainder and adds three tensor-core products (big*big + big*small +
small*big): close to fp32 accuracy at a third of the TF32 rate (~165 TFLOP/s
peak). The only change from step 1 is input_precision="tf32x3".

The grid is (tile rows, tile columns, batch); each program accumulates one
BLOCK_M x BLOCK_N tile of one batch's C over K in BLOCK_K steps.

Floor: 275 GFLOP at ~165 TFLOP/s (3xTF32 peak) is ~1.7 ms; bytes (0.27 +
1.07 GB read, 0.54 GB written: 0.63 ms at 3.0 TB/s) are not the limit.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bmm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
               stride_cb, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    batch = tl.program_id(axis=2).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + batch * stride_ab + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + batch * stride_bb + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        # Rows past M, columns past N and the K tail load zeros: they add nothing.
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + batch * stride_cb + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        batch, M, K = A.shape
        N = B.shape[2]
        C = torch.empty((batch, M, N), device=A.device, dtype=torch.float32)
        BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 32
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N), batch)
        bmm_kernel[grid](A, B, C, M, N, K, *A.stride(), *B.stride(), *C.stride(),
                         BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, PRECISION="tf32x3",
                         num_warps=8, num_stages=3)
        return C
