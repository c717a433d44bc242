"""Deliberately flawed: low occupancy. Each one-warp program keeps 128 values per thread live
(it loads its whole 4096-element block before computing), so it needs well over a hundred
registers per thread; with 32-thread blocks the SM holds few warps and too few loads are in
flight to cover DRAM latency. Expected diagnosis: low occupancy, limited by registers (or by
the block count of one-warp blocks)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_one_warp_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)  # tanh(inner)
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK = 4096  # the flaw: 128 elements per thread in one warp
        gelu_one_warp_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=1)
        return y
