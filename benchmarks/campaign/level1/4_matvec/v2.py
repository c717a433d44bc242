"""Matrix-vector product (kb:1/4), step 2: several rows per program sharing each chunk of B, split over K.

C = A @ B with A of M x K and B a K x 1 column (M = 2048, K = 1,048,576).
Step 1 gives each program one row: every 16 KiB chunk of A comes with a
16 KiB chunk of B from L2 (as much L2 traffic for B as DRAM traffic for A),
and 2048 programs of 4 MiB each end in a ragged last wave. Here a program
owns ROWS rows and one of SPLIT slices of K: it loads each chunk of B once
for all its rows (a [ROWS, BLOCK] tile of A against a [BLOCK] vector), so B's
L2 traffic drops ROWS-fold, and M / ROWS x SPLIT programs of about 1 MiB
each (8192 at the problem's size) balance across the SMs. A second tiny kernel adds the SPLIT partials of each
row (in a fixed order: deterministic, unlike atomics).

Bytes: A is 8.6 GB (B and C are negligible): 2.9 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

ROWS = 8
BLOCK = 1024


@triton.jit
def matvec_partials_kernel(a_ptr, b_ptr, part_ptr, M, K, k_per_split, stride_am, stride_bk,
                           ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(axis=0) * ROWS + tl.arange(0, ROWS)
    split = tl.program_id(axis=1)
    row_ok = rows < M
    a_rows = a_ptr + rows.to(tl.int64)[:, None] * stride_am
    cols = tl.arange(0, BLOCK)
    k0 = split * k_per_split
    k1 = tl.minimum(k0 + k_per_split, K)
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(k0, k1, BLOCK):
        k = start + cols
        k_ok = k < k1
        b = tl.load(b_ptr + k * stride_bk, mask=k_ok, other=0.0)
        a = tl.load(a_rows + k[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0,
                    eviction_policy="evict_first")
        acc += a * b[None, :]
    tl.store(part_ptr + split * M + rows, tl.sum(acc, axis=1), mask=row_ok)


@triton.jit
def sum_partials_kernel(part_ptr, c_ptr, M, SPLIT: tl.constexpr, BLOCK_M: tl.constexpr):
    rows = tl.program_id(axis=0) * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = rows < M
    acc = tl.zeros([BLOCK_M], tl.float32)
    for s in range(SPLIT):
        acc += tl.load(part_ptr + s * M + rows, mask=mask, other=0.0)
    tl.store(c_ptr + rows, acc, mask=mask)


def _split(M: int, K: int, device: torch.device) -> int:
    """Slices of K: about 32 programs per SM (a small last wave), each slice at least a few chunks long."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    want = triton.cdiv(32 * sms, triton.cdiv(M, ROWS))
    return max(1, min(want, triton.cdiv(K, 4 * BLOCK)))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        M, K = A.shape
        A = A if A.stride(1) == 1 else A.contiguous()
        C = torch.empty((M, 1), device=A.device, dtype=torch.float32)
        split = _split(M, K, A.device)
        # Each slice is a whole number of chunks, so only the last one is ragged.
        k_per_split = triton.cdiv(triton.cdiv(K, split), BLOCK) * BLOCK
        split = triton.cdiv(K, k_per_split)
        partials = torch.empty((split, M), device=A.device, dtype=torch.float32)
        matvec_partials_kernel[(triton.cdiv(M, ROWS), split)](A, B, partials, M, K, k_per_split, A.stride(0),
                                                              B.stride(0), ROWS=ROWS, BLOCK=BLOCK, num_warps=8)
        sum_partials_kernel[(triton.cdiv(M, 1024),)](partials, C, M, SPLIT=split, BLOCK_M=1024, num_warps=4)
        return C
