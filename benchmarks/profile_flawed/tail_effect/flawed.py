"""Deliberately flawed: tail effect. One 32-warp program per row, each looping over 262144
elements: 300 long-running programs on an H100 whose 132 SMs hold 2 such programs each (264 at
once), so a second wave of 36 programs runs alone while 86% of the GPU waits.
Expected diagnosis: tail effect (about 1.14 waves, most of the last wave idle)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        M, N = x.shape
        y = torch.empty(M, device=x.device, dtype=x.dtype)
        # The flaw: one program per row, so the grid is the row count, barely over one wave.
        row_sum_kernel[(M,)](x, y, N, BLOCK=4096, num_warps=32)
        return y
