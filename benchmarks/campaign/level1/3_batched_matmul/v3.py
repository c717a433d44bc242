"""Batched fp32 matmul (kb:1/3), step 3: step 2's 3xTF32 kernel with grouped tile order and a small autotune set.

C[b] = A[b] @ B[b] for 128 batches of 512 x 1024 @ 1024 x 2048 (275 GFLOP).
Step 2 visits each batch's tiles row-major: concurrent programs share one row
panel of A[b] but sweep across all of B[b] (8 MiB per batch), so B[b] streams
through L2 again for each tile row. Here the tiles of a batch are ordered in
groups of GROUP_M tile rows that advance through the tile columns together
(an L2 swizzle), and the batch is the slowest grid axis so concurrent
programs work on one or two batches at a time. Tile shape, warps and
pipeline depth are autotuned over five configurations that fit 3xTF32's
extra shared memory and registers.

Floor: 275 GFLOP at ~165 TFLOP/s (3xTF32 peak) is ~1.7 ms.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    return configs if named_args["a_ptr"].is_cuda else configs[:1]


def _configs():
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in [
            (128, 128, 32, 8, 3),
            (128, 128, 32, 8, 4),
            (128, 128, 64, 8, 2),
            (64, 128, 32, 4, 4),
            (128, 64, 32, 4, 4),
        ]
    ]


@triton.autotune(configs=_configs(), key=["M", "N", "K"],
                 prune_configs_by={"early_config_prune": _keep_one_config_off_gpu})
@triton.jit
def bmm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
               stride_cb, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped order within a batch: GROUP_M rows of tiles advance through the tile columns together.
    pid = tl.program_id(axis=0)
    batch = tl.program_id(axis=1).to(tl.int64)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

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
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
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
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]), batch)
        bmm_kernel[grid](A, B, C, M, N, K, *A.stride(), *B.stride(), *C.stride())
        return C
