"""Frobenius-norm normalization (kb:1/37), step 2: persistent grid-stride reduction, combine folded into the divide.

Step 1 launches 28,672 reduction programs (one per 256 KiB chunk), a single-
program combine and a divide pass. Here:
- the reduction grid is a fixed number of programs per SM, each striding over
  the tensor with a vector accumulator, so there are a few hundred partials,
  no tail wave, and more independent loads in flight per program;
- there is no combine kernel: the divide pass is persistent too, and each of
  its programs adds the few hundred partials itself (in float64, from L2)
  once before striding over its blocks: one launch fewer and no dependent
  single-program step between the two big passes;
- the divide pass walks the tensor from the end, so its first blocks are the
  ones the reduction read last and may still find in L2.

Bytes: two reads and one write, 3 x 7.5 GB at the problem's size, 7.5 ms at
3.0 TB/s: the floor for an exact norm, since no on-chip storage holds 7.5 GB.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
PROGRAMS_PER_SM = 4


@triton.jit
def sumsq_partials_kernel(x_ptr, partial_ptr, numel, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    stride = tl.num_programs(axis=0).to(tl.int64) * BLOCK
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(pid.to(tl.int64) * BLOCK, numel, stride):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < numel, other=0.0, eviction_policy="evict_first")
        acc += x * x
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def divide_kernel(x_ptr, y_ptr, partial_ptr, numel, n_partials, BLOCK: tl.constexpr, P_BLOCK: tl.constexpr):
    p = tl.arange(0, P_BLOCK)
    partials = tl.load(partial_ptr + p, mask=p < n_partials, other=0.0).to(tl.float64)
    norm = tl.sqrt(tl.sum(partials, axis=0)).to(tl.float32)
    # Grid-stride from the end: program 0 takes the last block first.
    n_blocks = tl.cdiv(numel, BLOCK)
    for i in range(tl.program_id(axis=0), n_blocks, tl.num_programs(axis=0)):
        offs = (n_blocks - 1 - i).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < numel
        x = tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first")
        tl.store(y_ptr + offs, x / norm, mask=mask)


def _num_programs(device: torch.device) -> int:
    if device.type == "cuda":
        return PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count
    return 8


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        numel = x.numel()
        n_partials = _num_programs(x.device)
        partials = torch.empty(n_partials, device=x.device, dtype=torch.float32)
        sumsq_partials_kernel[(n_partials,)](x, partials, numel, BLOCK=BLOCK, num_warps=8)
        if numel > 0:
            divide_kernel[(n_partials,)](x, y, partials, numel, n_partials, BLOCK=BLOCK,
                                         P_BLOCK=triton.next_power_of_2(n_partials), num_warps=8)
        return y
