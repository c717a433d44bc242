"""KL divergence with reduction='batchmean' (kb:1/98), step 2: one log per element, a persistent grid-stride pass.

Same result as step 1: sum over all elements of torch's term
xlogy(t, t) - t * log(p), divided by the first dimension (16384). Two
changes:
- One log instead of two. Where t > 0 the term is t * log(t / p): one
  division and one log (about half the instructions of two accurate logs,
  which at 5.4e8 logs were no longer small beside the 0.72 ms of reading).
  Where t == 0 torch's term is 0 - 0 * log(p): 0, or NaN when log(p) is not
  finite (p <= 0, p infinite or NaN); that case is written out. A negative t
  gives log of a negative, NaN, as torch's xlogy does; p = 0 under a
  positive t gives +inf, as torch.
- A fixed grid of a few programs per SM, each striding over the tensor with
  a vector of BLOCK fp32 sums (about 120 terms per lane at 2^28 elements)
  and loading evict-first, instead of 65,536 one-block programs; the second
  kernel then adds a few hundred partials in float64, not 65,536.
No atomics: the same result every run.

Floor: one read of both 16384 x 16384 inputs, 2 x 1.07 GB: 0.72 ms at
3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
PROGRAMS_PER_SM = 4


@triton.jit
def kl_partials_kernel(p_ptr, t_ptr, partial_ptr, numel, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    stride = tl.num_programs(axis=0).to(tl.int64) * BLOCK
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(pid.to(tl.int64) * BLOCK, numel, stride):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < numel
        # Padding lanes load p = t = 1: their term is 1 * log(1 / 1) = 0.
        p = tl.load(p_ptr + offs, mask=mask, other=1.0, eviction_policy="evict_first").to(tl.float32)
        t = tl.load(t_ptr + offs, mask=mask, other=1.0, eviction_policy="evict_first").to(tl.float32)
        zero_target = tl.where((p > 0.0) & (p < float("inf")), 0.0, float("nan"))
        acc += tl.where(t == 0.0, zero_target, t * tl.log(t / p))
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def batchmean_of_partials_kernel(partial_ptr, out_ptr, n_partials, batch, P_BLOCK: tl.constexpr):
    offs = tl.arange(0, P_BLOCK)
    partials = tl.load(partial_ptr + offs, mask=offs < n_partials, other=0.0).to(tl.float64)
    tl.store(out_ptr, (tl.sum(partials, axis=0) / batch).to(out_ptr.dtype.element_ty))


def _num_programs(device: torch.device, numel: int) -> int:
    n = PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
    return max(1, min(n, triton.cdiv(numel, BLOCK)))


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
        n_partials = _num_programs(p.device, numel)
        partials = torch.empty(n_partials, device=p.device, dtype=torch.float32)
        kl_partials_kernel[(n_partials,)](p, t, partials, numel, BLOCK=BLOCK, num_warps=8)
        batchmean_of_partials_kernel[(1,)](partials, out, n_partials, batch,
                                           P_BLOCK=triton.next_power_of_2(n_partials), num_warps=4)
        return out
