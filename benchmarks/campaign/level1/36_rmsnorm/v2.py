"""RMS normalization over the channel dimension (kb:1/36), step 2: the whole channel column tile held in registers.

As in step 1 a program owns (one batch item, BLOCK_S contiguous positions),
but it loads all C channels of its block at once as a [BLOCK_C, BLOCK_S] tile
(each row contiguous and coalesced), reduces the squares over the channel
axis, and stores the normalized tile: one load and one store per element,
instead of step 1's channel loop that re-reads the tile from L1/L2 and waits
for each of its C dependent loads in turn. The whole tile's loads are in
flight together, which is what a streaming kernel needs to reach DRAM
bandwidth. BLOCK_S and warps are autotuned; channels beyond 256 would not fit
in registers and take step 1's loop kernel instead.

DRAM: one read and one write, 2 x 7.5 GB at the problem's size, 5.0 ms at
3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_CHANNELS_IN_REGISTERS = 256


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    return configs if named_args["x_ptr"].is_cuda else configs[:1]


def _configs():
    # The tile holds BLOCK_C x BLOCK_S floats; keep it at 32-64 registers' worth per thread.
    return [triton.Config({"TILE": t}, num_warps=w) for t, w in [(8192, 4), (8192, 8), (16384, 8), (16384, 16)]]


@triton.autotune(configs=_configs(), key=["C", "S"], prune_configs_by={"early_config_prune": _keep_one_config_off_gpu})
@triton.jit
def rmsnorm_tile_kernel(x_ptr, y_ptr, C, S, eps, BLOCK_C: tl.constexpr, TILE: tl.constexpr):
    BLOCK_S: tl.constexpr = TILE // BLOCK_C
    n = tl.program_id(axis=0).to(tl.int64)
    chans = tl.arange(0, BLOCK_C)
    offs = tl.program_id(axis=1) * BLOCK_S + tl.arange(0, BLOCK_S)
    # Padding channels (BLOCK_C is C rounded up to a power of two) and
    # positions past S load 0: they add nothing to the sum of squares.
    mask = (chans[:, None] < C) & (offs[None, :] < S)
    ptrs = n * C * S + chans[:, None].to(tl.int64) * S + offs[None, :]
    x = tl.load(x_ptr + ptrs, mask=mask, other=0.0, eviction_policy="evict_first")
    rms = tl.sqrt(tl.sum(x * x, axis=0) / C + eps)
    tl.store(y_ptr + ptrs, x / rms[None, :], mask=mask)


@triton.jit
def rmsnorm_channels_kernel(x_ptr, y_ptr, C, S, eps, BLOCK_S: tl.constexpr):
    n = tl.program_id(axis=0).to(tl.int64)
    offs = tl.program_id(axis=1) * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = offs < S
    base = n * C * S + offs
    sumsq = tl.zeros([BLOCK_S], tl.float32)
    for c in range(C):
        x = tl.load(x_ptr + base + c * S, mask=mask, other=0.0)
        sumsq += x * x
    rms = tl.sqrt(sumsq / C + eps)
    for c in range(C):
        x = tl.load(x_ptr + base + c * S, mask=mask, other=0.0)
        tl.store(y_ptr + base + c * S, x / rms, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c = x.shape[0], x.shape[1]
        s = x.numel() // max(n * c, 1)
        if x.numel() == 0:
            return y
        if c <= MAX_CHANNELS_IN_REGISTERS:
            block_c = triton.next_power_of_2(c)
            grid = lambda meta: (n, triton.cdiv(s, meta["TILE"] // block_c))
            rmsnorm_tile_kernel[grid](x, y, c, s, self.eps, BLOCK_C=block_c)
        else:
            rmsnorm_channels_kernel[(n, triton.cdiv(s, 256))](x, y, c, s, self.eps, BLOCK_S=256, num_warps=4)
        return y
