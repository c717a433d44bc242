"""Tanh (kb:1/22), step 2: block size and warps autotuned on the element count, no cache hints.

Same kernel body as step 1 (exp(-2|x|) and a short odd series near 0).
What changes is how much each program moves. Step 1's 1024-value, 4-warp
programs (8 values, two 16-byte loads a thread) already keep enough bytes in
flight on paper; the configs below span 1024 to 8192 values and 4 to 16 warps
(4 to 16 values a thread, one to four 16-byte loads), and the autotuner keeps
the fastest for this element count. Fewer, larger programs also cut the 1.57 M
block launches of step 1 to as few as 197 K.
Loads and stores carry no eviction hints: recall's relu lessons measured
evict_first / streaming stores about 3% slower on the H100 for a single-use
stream, and a float4 grid-stride CUDA kernel 5% slower than the plain block.

Floor unchanged: one read and one write, 2 x 6.44 GB = 12.9 GB, 4.3 ms at the
~3.0 TB/s the H100 measures for a copy. Step 1 should already be within a few
percent of it, so the expected gain is 0-2%.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    return configs if named_args["x_ptr"].is_cuda else configs[:1]


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w)
             for b, w in [(1024, 4), (1024, 8), (2048, 8), (4096, 8), (4096, 16), (8192, 16)]],
    key=["n_elements"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def tanh_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    a = tl.abs(x)
    t = tl.exp(-2.0 * a)
    big = (1.0 - t) / (1.0 + t)
    a2 = a * a
    small = a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0))))
    r = tl.where(a < 0.0625, small, big)
    tl.store(y_ptr + offs, tl.where(x < 0.0, -r, r), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n > 0:
            grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
            tanh_kernel[grid](x, y, n)
        return y
