"""Sum over one dimension, kept as size 1 (kb:1/47), step 1: one program per (outer index, column block), a row per iteration.

x is viewed as (outer, R, inner) around the reduced dimension: at the
problem's (128, 4096, 4095) with dim=1 that is outer=128, R=4096,
inner=4095, and the R values summed into one output sit inner elements
apart. A block of BLOCK_I neighbouring columns is contiguous in every one of
the R rows, so a program owns (one outer index, BLOCK_I columns) and walks
the R rows, adding each coalesced row segment into a vector of BLOCK_I fp32
sums. Nothing is transposed and no lane reads a separate sector.

Floor: one read of x, 8.59 GB, and a 2 MB write: 2.9 ms at 3.0 TB/s. This
step keeps one BLOCK_I-wide load per program in flight at a time; that, not
the arithmetic (one add per 4 bytes), is what bounds it.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_middle_kernel(x_ptr, y_ptr, R, inner, BLOCK_I: tl.constexpr):
    outer = tl.program_id(axis=0).to(tl.int64)
    cols = tl.program_id(axis=1) * BLOCK_I + tl.arange(0, BLOCK_I)
    mask = cols < inner
    # Pointer steps are 64-bit: R * inner alone can pass 2^31 elements.
    row = x_ptr + outer * R * inner + cols
    acc = tl.zeros([BLOCK_I], tl.float32)
    for _ in range(R):
        acc += tl.load(row, mask=mask, other=0.0).to(tl.float32)
        row += inner
    tl.store(y_ptr + outer * inner + cols, acc, mask=mask)


def _split(shape, dim):
    outer = 1
    for s in shape[:dim]:
        outer *= s
    inner = 1
    for s in shape[dim + 1:]:
        inner *= s
    return outer, shape[dim], inner


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        outer, r, inner = _split(x.shape, dim)
        out_shape = list(x.shape)
        out_shape[dim] = 1
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        if y.numel() == 0:
            return y
        BLOCK_I = min(256, triton.next_power_of_2(inner))
        sum_middle_kernel[(outer, triton.cdiv(inner, BLOCK_I))](x, y, r, inner, BLOCK_I=BLOCK_I, num_warps=4)
        return y
