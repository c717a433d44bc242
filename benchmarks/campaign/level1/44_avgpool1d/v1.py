"""AvgPool1d (kb:1/44), step 1: one program per (row, block of outputs), one load per window tap.

Output o of a row is the sum of x[o * stride - padding + j], j < kernel_size,
divided by kernel_size: padded taps count as zeros and are counted in the
divisor (count_include_pad, the module's default). Rows are the (batch,
channel) pairs, each contiguous. A program computes BLOCK consecutive
outputs of one row with kernel_size shifted, contiguous vector loads (L1
serves the overlap), adding the taps in window order as PyTorch does.

Bytes: the input read once and the output written once: 2.1 + 2.1 GB at the
problem's 64 x 128 x 65536, 1.4 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def avgpool1d_kernel(x_ptr, y_ptr, L, L_out, kernel_size, stride, padding, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    o = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    out_mask = o < L_out
    acc = tl.zeros([BLOCK], tl.float32)
    for j in range(kernel_size):
        i = o * stride - padding + j
        acc += tl.load(x_ptr + row * L + i, mask=out_mask & (i >= 0) & (i < L), other=0.0)
    tl.store(y_ptr + row * L_out + o, acc / kernel_size, mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        L = x.shape[-1]
        L_out = (L + 2 * self.padding - self.kernel_size) // self.stride + 1
        rows = x.numel() // max(L, 1)
        y = torch.empty((*x.shape[:-1], L_out), device=x.device, dtype=x.dtype)
        BLOCK = 1024
        if y.numel() > 0:
            avgpool1d_kernel[(rows, triton.cdiv(L_out, BLOCK))](x, y, L, L_out, self.kernel_size, self.stride,
                                                                self.padding, BLOCK=BLOCK, num_warps=4)
        return y
