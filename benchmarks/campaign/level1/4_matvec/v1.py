"""Matrix-vector product (kb:1/4), step 1: one program per row of A, a K loop of vector multiply-adds.

C = A @ B with A of M x K and B a K x 1 column (M = 2048, K = 1,048,576).
Two flops per element of A, each element read once: memory-bound. Each
program streams one 4 MiB row of A in BLOCK-wide chunks, multiplies by the
matching chunk of B and accumulates per lane in fp32; one tree sum at the
end. B (4 MiB) is re-read by every row, from L2.

Bytes: A is 8.6 GB (B and C are negligible): 2.9 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matvec_rows_kernel(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    a_row = a_ptr + row * stride_am
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, K, BLOCK):
        mask = start + cols < K
        a = tl.load(a_row + start + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + (start + cols) * stride_bk, mask=mask, other=0.0)
        acc += a * b
    tl.store(c_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        M, K = A.shape
        A = A if A.stride(1) == 1 else A.contiguous()
        C = torch.empty((M, 1), device=A.device, dtype=torch.float32)
        matvec_rows_kernel[(M,)](A, B, C, K, A.stride(0), B.stride(0), BLOCK=4096, num_warps=8)
        return C
