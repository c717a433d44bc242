"""ReLU, optimized: autotuned block size and warps, 64-bit offsets, no cache hints.

- The best block size and warp count depend on the size of the tensor (small
  tensors want more, smaller programs to fill 132 SMs; large ones want more
  bytes in flight per thread), so they are autotuned, keyed on n_elements.
- No cache hints: evict_first loads with streaming (.cs) stores measured about
  3% slower than plain loads and stores on the H100 for this pure stream
  (benchmarks/tune_memory_bound.py); each byte is touched once either way.
- Offsets are computed in 64 bits so tensors past 2^31 elements index
  correctly; the cost is one wider multiply per program.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in named_args.values())
    return configs if on_gpu else configs[:1]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 8192}, num_warps=8),
    ],
    key=["n_elements"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    start = tl.program_id(axis=0).to(tl.int64) * BLOCK_SIZE
    offsets = start + tl.arange(0, BLOCK_SIZE)
    # Only the last program is partial; the mask covers its tail.
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n_elements = x.numel()
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        relu_kernel[grid](x, y, n_elements)
        return y
