"""Row softmax, optimized: row in registers with autotuned warps; a lane-wise online kernel for wide rows.

Rows up to 32768 values (the task's 8192 among them):
- one read, one write, the row held in registers as in step 2;
- exp(x - max) is computed as exp2((x - max) * log2 e), the form the SFU
  evaluates natively, and the division becomes one reciprocal per row;
- num_warps is autotuned per row width: enough warps to keep registers per
  thread low and several rows resident per SM, not so many that the
  cross-warp reductions dominate.

Wider rows (they do not fit on chip) take two passes:
- pass 1 keeps a running max and sum per lane instead of per chunk, so the
  loop has no cross-warp reduction and no barrier: each iteration is loads and
  lane-local math, and the lanes are combined once after the loop. Each value
  costs one exp2: of exp2(m_old - m_new) and exp2(x - m_new), one is exp2(0);
- pass 2 walks the row backwards: the chunks pass 1 read last are the likeliest
  to still be in L2.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_IN_REGISTERS = 32768
LOG2E = 1.4426950408889634


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
    # BLOCK_SIZE is a power of two >= n_cols: lanes past the row read -inf,
    # which does not change the max and adds 2^-inf = 0 to the sum.
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf"),
                eviction_policy="evict_first")
    z = (x - tl.max(x, axis=0)) * 1.4426950408889634
    e = tl.exp2(z)
    inv_sum = 1.0 / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, e * inv_sum, mask=mask)


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 8192}, num_warps=16),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=16),
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
        tl.store(y_row + start + cols, tl.exp2((x - row_max) * 1.4426950408889634) * inv_sum, mask=mask)


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
