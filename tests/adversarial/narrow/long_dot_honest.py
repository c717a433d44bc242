"""An honest fp32 matrix product (tiles of 64 x 64, K in steps of 32): right for any inputs."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  TRI: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One program per BLOCK_M x BLOCK_N tile of C; K is walked BLOCK_K at a time with fp32 products
    # (input_precision="ieee": no TF32 rounding, so the result matches an fp32 reference to 1e-4).
    # Strides are passed, so a transposed operand is read in place. TRI keeps the upper (1) or
    # lower (2) triangle of C and writes zeros elsewhere.
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    if TRI == 1:
        acc = tl.where(rn[None, :] >= rm[:, None], acc, 0.0)
    if TRI == 2:
        acc = tl.where(rn[None, :] <= rm[:, None], acc, 0.0)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b, M, N, K, sam, sak, sbk, sbn, tri=0, out_shape=None):
    """C = A @ B (M x N, row-major; allocated with ``out_shape``), A and B read through the strides given."""
    c = torch.empty(out_shape or (M, N), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    matmul_kernel[grid](a, b, c, M, N, K, sam, sak, sbk, sbn, N, 1, TRI=tri,
                        BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4, num_stages=3)
    return c


class ModelNew(nn.Module):
    def forward(self, A, B):
        N, K = B.shape[1], A.shape[1]
        return matmul(A, B, A.shape[0], N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1))
