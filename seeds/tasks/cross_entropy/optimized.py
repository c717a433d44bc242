"""Cross-entropy, optimized: lane-wise online log-sum-exp with one exp2 per logit, autotuned, 64-bit rows.

- One read of the logits, as in step 1, but the running max and sum are kept
  per lane instead of per chunk: the loop body is loads and lane-local math
  with no cross-warp reduction or barrier, so the loads of the next chunk
  are not held up behind the reductions of this one. The lanes are combined
  once per row.
- Each logit costs one exp2 in the log2 domain: of 2^(m_old - m_new) and
  2^(x - m_new), one is 2^0, so only 2^-|x - m_old| is computed.
- Chunk size and warps are autotuned on V; loads are evict_first (read once).
- The mean is a second, single-program kernel adding the row losses in a
  fixed order: deterministic, unlike an atomic accumulation, and a few
  microseconds next to the row kernel.
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
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 8192}, num_warps=16),
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=16),
    ],
    key=["V"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def row_loss_kernel(logits_ptr, targets_ptr, loss_ptr, V, row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    logits = logits_ptr + row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    # Lane-wise online statistics: lane i sees columns i, i + BLOCK_SIZE, ...
    # The max starts at float32's lowest finite value rather than -inf, so
    # that lanes that only ever see padding (-inf) keep sum 0 instead of nan;
    # not at a larger sentinel such as -1e30, which would leave a row masked
    # with the lowest value with sum 0. Maxima stay in the logits' own units
    # and differences are scaled to log2 after the subtraction: x * log2(e)
    # first would round by an error growing with |x|, and overflow to -inf
    # for the lowest values.
    m = tl.full([BLOCK_SIZE], -3.4028234663852886e38, tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, V, BLOCK_SIZE):
        x = tl.load(logits + start + cols, mask=start + cols < V, other=float("-inf"),
                    eviction_policy="evict_first")
        d = x - m
        e = tl.exp2(-tl.abs(d) * 1.4426950408889634)
        # x above the running max: rescale the old sum and count x as 2^0.
        s = tl.where(d > 0, s * e + 1.0, s + e)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    log_sum = tl.log(tl.sum(s * tl.exp2((m - row_max) * 1.4426950408889634), axis=0))

    # log(sum) - (x[target] - max): the max is taken off x[target] first, since max + log(sum) would
    # round log(sum) away where |max| is huge.
    target = tl.load(targets_ptr + row)
    tl.store(loss_ptr + row, log_sum - (tl.load(logits + target) - row_max))


@triton.jit
def mean_kernel(loss_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    # A single program adds the row losses in a fixed order.
    acc = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n, BLOCK_SIZE):
        offs = start + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(loss_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.contiguous()
        N, V = logits.shape
        row_loss = torch.empty(N, device=logits.device, dtype=torch.float32)
        row_loss_kernel[(N,)](logits, targets, row_loss, V, logits.stride(0))
        out = torch.empty((), device=logits.device, dtype=torch.float32)
        mean_kernel[(1,)](row_loss, out, N, BLOCK_SIZE=1024, num_warps=8)
        return out
