"""RMSNorm, optimized: the row in registers, launch shape autotuned, no cache hints.

- One read of x and one write of y per row, the row held in registers as in
  step 1 (fp32 math, one rounding to bf16).
- Rows per program and warps are autotuned on the row width. On the H100 one
  8 KiB bf16 row per 4-warp program measured fastest: the bf16 weight stays in
  L2 across programs without help, so loading it once for several rows bought
  nothing (benchmarks/tune_memory_bound.py).
- No cache hints: evict_first on x and evict_last on the weight measured about
  1% slower than plain loads.
- Rows wider than 16384 values take the chunked two-pass kernel.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_IN_REGISTERS = 16384


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in named_args.values())
    return configs if on_gpu else configs[:1]


@triton.autotune(
    configs=[
        triton.Config({"ROWS_PER_PROGRAM": 1}, num_warps=4),
        triton.Config({"ROWS_PER_PROGRAM": 1}, num_warps=8),
        triton.Config({"ROWS_PER_PROGRAM": 2}, num_warps=8),
        triton.Config({"ROWS_PER_PROGRAM": 2}, num_warps=16),
        triton.Config({"ROWS_PER_PROGRAM": 4}, num_warps=4),
    ],
    key=["n_cols"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def rmsnorm_rows_kernel(x_ptr, y_ptr, w_ptr, n_rows, n_cols, x_row_stride, y_row_stride, eps,
                        BLOCK_SIZE: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr):
    cols = tl.arange(0, BLOCK_SIZE)
    w = tl.load(w_ptr + cols, mask=cols < n_cols).to(tl.float32)
    first_row = tl.program_id(axis=0) * ROWS_PER_PROGRAM
    for i in range(ROWS_PER_PROGRAM):
        row = first_row + i
        # The last program may run past n_rows: rows past the end get no valid column.
        mask = cols < tl.where(row < n_rows, n_cols, 0)
        row = row.to(tl.int64)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(y_ptr + row * y_row_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_chunked_kernel(x_ptr, y_ptr, w_ptr, n_cols, x_row_stride, y_row_stride, eps,
                           BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask).to(tl.float32)
        tl.store(y_row + start + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        y = torch.empty_like(x2)
        n_rows, n_cols = x2.shape
        if n_cols <= MAX_ROW_IN_REGISTERS:
            grid = lambda meta: (triton.cdiv(n_rows, meta["ROWS_PER_PROGRAM"]),)
            rmsnorm_rows_kernel[grid](x2, y, self.weight, n_rows, n_cols, x2.stride(0), y.stride(0), self.eps,
                                      BLOCK_SIZE=triton.next_power_of_2(n_cols))
        else:
            rmsnorm_chunked_kernel[(n_rows,)](x2, y, self.weight, n_cols, x2.stride(0), y.stride(0), self.eps,
                                              BLOCK_SIZE=4096, num_warps=8)
        return y.view(x.shape)
