"""Deliberately flawed: uncoalesced access. Each program owns a block of COLUMNS and walks it
down the rows, and the vector axis of its tile runs along the rows: neighbouring lanes read
addresses N * 4 bytes apart, so every 4-byte load touches its own 32-byte sector.
Expected diagnosis: uncoalesced loads and stores (~8x the sectors a row-major tile needs)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_shift_colmajor_kernel(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr):
    col = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = rows < M
    # The flaw: consecutive lanes take consecutive ROWS of one column (stride N elements).
    offs = rows * N + col
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        M, N = x.shape
        BLOCK_M = 256
        scale_shift_colmajor_kernel[(N, triton.cdiv(M, BLOCK_M))](x, y, M, N, BLOCK_M=BLOCK_M)
        return y
