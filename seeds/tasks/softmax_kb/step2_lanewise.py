"""Softmax at KernelBench size, step 2: lane-wise online statistics, a reversed second pass, L2-aware occupancy.

A 393216-value row (1.5 MiB) cannot stay on chip, so the kernel streams it
twice: statistics, then normalization. What is left to win is the cost of
each pass and how much of the second read L2 can serve.
- Pass 1 keeps a running max and sum per lane instead of per chunk: the loop
  has no cross-warp reduction and no barrier, only loads and lane-local math;
  the lanes are combined once after the loop. Each value costs one exp2: of
  exp2(m_old - m_new) and exp2(x - m_new), one is exp2(0).
- Pass 2 walks the row backwards: the chunks pass 1 read last are the
  likeliest to still be in L2.
- How much of a row survives in L2 depends on how many rows are in flight:
  50 MB of L2 over ~400 resident programs is about 8% of a row each, over 132
  (one 32-warp program per SM) about 25%. Configs from many small programs to
  one large program per SM are autotuned.
- Rows that do fit in registers (other shapes) take the one-read kernel.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_IN_REGISTERS = 32768


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in named_args.values())
    return configs if on_gpu else configs[:1]


@triton.autotune(
    configs=[triton.Config({}, num_warps=w) for w in (8, 4, 16, 32)],
    key=["n_cols"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def softmax_row_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    # BLOCK_SIZE is a power of two >= n_cols: lanes past the row read -inf.
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf"),
                eviction_policy="evict_first")
    e = tl.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)
    tl.store(y_ptr + row * y_row_stride + cols, e * (1.0 / tl.sum(e, axis=0)), mask=mask)


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 8192}, num_warps=16),
        triton.Config({"BLOCK_SIZE": 8192}, num_warps=32),
        triton.Config({"BLOCK_SIZE": 16384}, num_warps=32),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
    ],
    key=["n_cols"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def softmax_wide_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    # Pass 1, lane-wise online statistics: lane i sees
    # columns i, i + BLOCK_SIZE, ... The max starts at float32's lowest
    # finite value rather than -inf, so that lanes that only ever see padding
    # (-inf) keep sum 0 instead of computing -inf - -inf = nan; not at a
    # larger sentinel such as -1e30, which a row masked with the lowest value
    # (every value below it) would leave with sum 0 and 0 / 0 at the end.
    m = tl.full([BLOCK_SIZE], -3.4028234663852886e38, tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        d = x - m  # exact; scaled to log2 after (x * log2(e) first rounds by an error growing with |x|)
        e = tl.exp2(-tl.abs(d) * 1.4426950408889634)
        # x above the running max: rescale the old sum and count x as 2^0.
        s = tl.where(d > 0, s * e + 1.0, s + e)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    inv_sum = 1.0 / tl.sum(s * tl.exp2((m - row_max) * 1.4426950408889634), axis=0)

    # Pass 2, last chunk first, to reuse what pass 1 left in L2.
    last = tl.cdiv(n_cols, BLOCK_SIZE) - 1
    for i in range(0, last + 1):
        start = (last - i) * BLOCK_SIZE
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"), eviction_policy="evict_first")
        tl.store(y_row + start + cols, tl.exp2((x - row_max) * 1.4426950408889634) * inv_sum, mask=mask,
                 cache_modifier=".cs")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        y = torch.empty_like(x2)
        n_rows, n_cols = x2.shape
        if n_cols <= MAX_ROW_IN_REGISTERS:
            softmax_row_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0),
                                          BLOCK_SIZE=triton.next_power_of_2(n_cols))
        else:
            softmax_wide_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0))
        return y.view(x.shape)
