"""Smooth L1 (Huber) loss over the whole tensor (kb:1/96), step 1: block partial sums, then one program adds them in float64.

loss = mean(h(predictions - targets)) over all 32768 x 32768 = 2^30
elements, with torch's smooth_l1 at beta = 1: h(d) = 0.5 d^2 / beta where
|d| < beta, |d| - 0.5 beta elsewhere (both branches: the task draws
differences inside (-1, 1), but the loss is defined for any). It is a
reduction of the whole tensor to one number, so the GPU-wide sum needs a
second step. Here each program sums h over one BLOCK of
differences (a tree sum inside the block) and writes that partial; a single
program then adds the 2^30 / BLOCK partials in float64 and divides by the
element count. No atomics: the result is the same on every run, and no fp32
running sum ever grows to hundreds of millions of terms.

Floor: one read of both inputs, 2 x 4.3 GB = 8.59 GB: 2.9 ms at 3.0 TB/s.
The partials (1 MiB at BLOCK = 4096) are read back by one program in 256
steps of 4 KiB, each waiting for its load: up to ~0.2 ms on one SM after
the big pass, the tail this step leaves.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
COMBINE_BLOCK = 1024


@triton.jit
def huber_partials_kernel(p_ptr, t_ptr, partial_ptr, numel, beta, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    p = tl.load(p_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    t = tl.load(t_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = tl.abs(p - t)
    h = tl.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta)
    tl.store(partial_ptr + pid, tl.sum(h, axis=0))


@triton.jit
def mean_of_partials_kernel(partial_ptr, out_ptr, n_partials, numel, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float64)
    for start in range(0, n_partials, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < n_partials, other=0.0).to(tl.float64)
    tl.store(out_ptr, (tl.sum(acc, axis=0) / numel).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.beta = 1.0  # smooth_l1_loss's default

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p, t = torch.broadcast_tensors(predictions, targets)
        p, t = p.contiguous(), t.contiguous()
        numel = p.numel()
        out = torch.empty((), device=p.device, dtype=torch.result_type(predictions, targets))
        if numel == 0:
            return out.fill_(float("nan"))
        n_partials = triton.cdiv(numel, BLOCK)
        partials = torch.empty(n_partials, device=p.device, dtype=torch.float32)
        huber_partials_kernel[(n_partials,)](p, t, partials, numel, self.beta, BLOCK=BLOCK, num_warps=8)
        mean_of_partials_kernel[(1,)](partials, out, n_partials, numel, BLOCK=COMBINE_BLOCK, num_warps=4)
        return out
