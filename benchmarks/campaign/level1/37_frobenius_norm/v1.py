"""Frobenius-norm normalization (kb:1/37), step 1: partial sums of squares, a one-program combine, a divide pass.

y = x / sqrt(sum(x^2)) over the whole tensor. The norm needs every element
before any output can be written, so x is read twice:
1. sumsq_partials_kernel: each program squares and sums CHUNK consecutive
   elements (BLOCK lanes, CHUNK / BLOCK steps) into one float32 partial;
2. norm_kernel: one program adds the partials in float64 and takes the root;
3. divide_kernel: y = x / norm, the norm read from device memory (no host sync).

Bytes: two reads and one write, 3 x 7.5 GB at the problem's 112 x 64 x 512 x
512, 7.5 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
CHUNK = 65536


@triton.jit
def sumsq_partials_kernel(x_ptr, partial_ptr, numel, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    pid = tl.program_id(axis=0)
    start = pid.to(tl.int64) * CHUNK
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(0, CHUNK, BLOCK):
        offs = start + i + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < numel, other=0.0)
        acc += x * x
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def norm_kernel(partial_ptr, norm_ptr, n_partials, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float64)
    for i in range(0, n_partials, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < n_partials, other=0.0).to(tl.float64)
    tl.store(norm_ptr, tl.sqrt(tl.sum(acc, axis=0)).to(tl.float32))


@triton.jit
def divide_kernel(x_ptr, y_ptr, norm_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    norm = tl.load(norm_ptr)
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x / norm, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        numel = x.numel()
        n_partials = max(triton.cdiv(numel, CHUNK), 1)
        partials = torch.empty(n_partials, device=x.device, dtype=torch.float32)
        norm = torch.empty(1, device=x.device, dtype=torch.float32)
        sumsq_partials_kernel[(n_partials,)](x, partials, numel, BLOCK=BLOCK, CHUNK=CHUNK, num_warps=8)
        norm_kernel[(1,)](partials, norm, n_partials, BLOCK=1024, num_warps=4)
        divide_kernel[(triton.cdiv(numel, BLOCK),)](x, y, norm, numel, BLOCK=BLOCK, num_warps=8)
        return y
