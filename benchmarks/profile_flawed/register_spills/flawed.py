"""Deliberately flawed: register spills. One program holds a whole 16384-wide row in registers
with a single warp (512 fp32 values per thread, over the 255-register limit), so most of the
row lives in local memory. Expected diagnosis: register spills (ptxas spill bytes, local traffic)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_one_warp_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * N + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        M, N = x.shape
        # The flaw: the whole row in one warp's registers.
        softmax_one_warp_kernel[(M,)](x, y, N, BLOCK=triton.next_power_of_2(N), num_warps=1)
        return y
