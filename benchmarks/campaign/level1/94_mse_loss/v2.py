"""Mean squared error over the whole tensor (kb:1/94), step 2: a persistent grid-stride pass, a few hundred partials.

Step 1 launches 262,144 programs, each summing one 4096-element block into a
partial, and one program then adds all 262,144 partials in float64: a
single-program tail of about 1 MiB of loads after the big pass. Here:
- the first pass is a fixed grid of a few programs per SM, each striding
  over the tensor with a vector of BLOCK fp32 sums (about 500 terms per lane
  at the problem's 2^30 elements, far from fp32 trouble), so there is no
  tail wave and each program keeps its loads in flight back to back;
- the streamed inputs are loaded evict-first: nothing is read twice, so
  they should not push anything else out of L2;
- the second kernel adds only one partial per program (a few hundred) in
  float64 in one load: microseconds instead of up to ~0.2 ms.
No atomics: the same result every run.

Floor: one read of both inputs, 2 x 4.3 GB = 8.59 GB: 2.9 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
PROGRAMS_PER_SM = 4


@triton.jit
def squared_error_partials_kernel(p_ptr, t_ptr, partial_ptr, numel, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    stride = tl.num_programs(axis=0).to(tl.int64) * BLOCK
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(pid.to(tl.int64) * BLOCK, numel, stride):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < numel
        p = tl.load(p_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        t = tl.load(t_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        d = p - t
        acc += d * d
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def mean_of_partials_kernel(partial_ptr, out_ptr, n_partials, numel, P_BLOCK: tl.constexpr):
    offs = tl.arange(0, P_BLOCK)
    partials = tl.load(partial_ptr + offs, mask=offs < n_partials, other=0.0).to(tl.float64)
    tl.store(out_ptr, (tl.sum(partials, axis=0) / numel).to(out_ptr.dtype.element_ty))


def _num_programs(device: torch.device, numel: int) -> int:
    n = PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
    return max(1, min(n, triton.cdiv(numel, BLOCK)))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p, t = torch.broadcast_tensors(predictions, targets)
        p, t = p.contiguous(), t.contiguous()
        numel = p.numel()
        out = torch.empty((), device=p.device, dtype=torch.result_type(predictions, targets))
        if numel == 0:
            return out.fill_(float("nan"))
        n_partials = _num_programs(p.device, numel)
        partials = torch.empty(n_partials, device=p.device, dtype=torch.float32)
        squared_error_partials_kernel[(n_partials,)](p, t, partials, numel, BLOCK=BLOCK, num_warps=8)
        mean_of_partials_kernel[(1,)](partials, out, n_partials, numel, P_BLOCK=triton.next_power_of_2(n_partials),
                                      num_warps=4)
        return out
