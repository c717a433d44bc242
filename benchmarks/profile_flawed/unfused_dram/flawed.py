"""Deliberately flawed: an unfused chain at the DRAM limit. Each op of relu(3x - 1) is its own
well-written streaming kernel, each near peak DRAM throughput, so the chain moves three times
the bytes one fused kernel would. Expected diagnosis: DRAM-bound; only fusion helps."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


@triton.jit
def shift_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) - 1.0, mask=mask)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, BLOCK = x.numel(), 4096
        grid = (triton.cdiv(n, BLOCK),)
        a, b, y = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
        scale_kernel[grid](x, a, n, BLOCK=BLOCK, num_warps=8)
        shift_kernel[grid](a, b, n, BLOCK=BLOCK, num_warps=8)
        relu_kernel[grid](b, y, n, BLOCK=BLOCK, num_warps=8)
        return y
