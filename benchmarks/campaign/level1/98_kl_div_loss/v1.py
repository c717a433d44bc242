"""KL divergence with reduction='batchmean' (kb:1/98), step 1: block partial sums, then one program adds them in float64.

The reference is kl_div(log(predictions), targets, reduction='batchmean'):
torch's pointwise term for a non-log target is xlogy(t, t) - t * input, with
input = log(p) here, and 'batchmean' divides the sum over every element by
the first dimension (16384), not by the element count. The kernel computes
exactly that term, including torch's edge rules: xlogy(0, 0) = 0 (a zero
target adds nothing unless log(p) is infinite), a negative p or target gives
NaN. log(p) is taken in the kernel, so the log-probabilities never touch
DRAM.

Each program sums the terms of one BLOCK (a tree sum in the block) and
writes that partial; one program adds the 2^28 / BLOCK partials in float64
and divides by the batch size. No atomics: the same result every run.

Floor: one read of both 16384 x 16384 inputs, 2 x 1.07 GB: 0.72 ms at
3.0 TB/s. Two accurate logs per element (5.4e8 in all, each a polynomial of
some twenty instructions) bring the instruction count near what the SMs
issue in that time; the 65,536 partials are read back by one program in 64
serial 4 KiB steps (~50 us).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
COMBINE_BLOCK = 1024


@triton.jit
def kl_partials_kernel(p_ptr, t_ptr, partial_ptr, numel, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    # Padding lanes load p = t = 1: their term is 1 * log 1 - 1 * log 1 = 0.
    p = tl.load(p_ptr + offs, mask=mask, other=1.0).to(tl.float32)
    t = tl.load(t_ptr + offs, mask=mask, other=1.0).to(tl.float32)
    xlogy = tl.where(t == 0.0, 0.0, t * tl.log(t))
    term = xlogy - t * tl.log(p)
    tl.store(partial_ptr + pid, tl.sum(term, axis=0))


@triton.jit
def batchmean_of_partials_kernel(partial_ptr, out_ptr, n_partials, batch, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float64)
    for start in range(0, n_partials, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < n_partials, other=0.0).to(tl.float64)
    tl.store(out_ptr, (tl.sum(acc, axis=0) / batch).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # The batch is the first dimension of the log-probabilities, i.e. of predictions.
        batch = predictions.shape[0] if predictions.dim() > 0 else 1
        p, t = torch.broadcast_tensors(predictions, targets)
        p, t = p.contiguous(), t.contiguous()
        numel = p.numel()
        out = torch.empty((), device=p.device, dtype=torch.result_type(predictions, targets))
        if numel == 0:
            return out.fill_(0.0 if batch else float("nan"))
        n_partials = triton.cdiv(numel, BLOCK)
        partials = torch.empty(n_partials, device=p.device, dtype=torch.float32)
        kl_partials_kernel[(n_partials,)](p, t, partials, numel, BLOCK=BLOCK, num_warps=8)
        batchmean_of_partials_kernel[(1,)](partials, out, n_partials, batch, BLOCK=COMBINE_BLOCK, num_warps=4)
        return out
