"""MaxPool1d with dilation (kb:1/41), step 1: one program per (row, block of outputs), one load per window tap.

Output o of a row takes the max of x[o * stride - padding + j * dilation],
j < kernel_size; taps in the padding count as -inf (they never win). Rows
are the (batch, channel) pairs, each contiguous. A program computes BLOCK
consecutive outputs of one row with kernel_size vector loads, each a
contiguous (shifted) run of the row: coalesced, and the overlapping runs of
neighbouring taps are served by L1. NaN propagates as in PyTorch.

Bytes: the input read once and the output written once: 3.2 + 3.2 GB at the
problem's 64 x 192 x 65536, 2.1 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def maxpool1d_kernel(x_ptr, y_ptr, L, L_out, kernel_size, stride, padding, dilation, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    o = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    out_mask = o < L_out
    acc = tl.full([BLOCK], float("-inf"), tl.float32)
    for j in range(kernel_size):
        i = o * stride - padding + j * dilation
        x = tl.load(x_ptr + row * L + i, mask=out_mask & (i >= 0) & (i < L), other=float("-inf"))
        acc = tl.maximum(acc, x, propagate_nan=tl.PropagateNan.ALL)
    tl.store(y_ptr + row * L_out + o, acc, mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0, dilation: int = 1,
                 return_indices: bool = False):
        super().__init__()
        if return_indices:
            raise NotImplementedError("this kernel returns the pooled values only")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        L = x.shape[-1]
        L_out = (L + 2 * self.padding - self.dilation * (self.kernel_size - 1) - 1) // self.stride + 1
        rows = x.numel() // max(L, 1)
        y = torch.empty((*x.shape[:-1], L_out), device=x.device, dtype=x.dtype)
        BLOCK = 1024
        if y.numel() > 0:
            maxpool1d_kernel[(rows, triton.cdiv(L_out, BLOCK))](x, y, L, L_out, self.kernel_size, self.stride,
                                                                self.padding, self.dilation, BLOCK=BLOCK,
                                                                num_warps=4)
        return y
