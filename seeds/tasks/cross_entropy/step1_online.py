"""Cross-entropy, step 1: online log-sum-exp, one read of the logits.

The row kernel keeps a running max and a running sum of exp(x - max) that is
rescaled whenever the max grows, so log-sum-exp needs a single pass over the
row: half the DRAM traffic of the naive kernel, which the task's 1 GiB of
logits makes the whole cost. The target's logit is one extra scalar load.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_loss_kernel(logits_ptr, targets_ptr, loss_ptr, V, row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    logits = logits_ptr + row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    # Running (max, sum) over chunks. The first chunk always holds real
    # values, so the running max is finite after it and exp(max - new_max)
    # never sees -inf - -inf.
    row_max = float("-inf")
    row_sum = 0.0
    for start in range(0, V, BLOCK_SIZE):
        x = tl.load(logits + start + cols, mask=start + cols < V, other=float("-inf"))
        new_max = tl.maximum(row_max, tl.max(x, axis=0))
        row_sum = row_sum * tl.exp(row_max - new_max) + tl.sum(tl.exp(x - new_max), axis=0)
        row_max = new_max

    target = tl.load(targets_ptr + row)
    # log(sum) - (x[target] - max), not max + log(sum) - x[target]: the first rounds nothing away where
    # |max| is huge (a row masked with float32's lowest value).
    tl.store(loss_ptr + row, tl.log(row_sum) - (tl.load(logits + target) - row_max))


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
        row_loss_kernel[(N,)](logits, targets, row_loss, V, logits.stride(0), BLOCK_SIZE=2048, num_warps=8)
        out = torch.empty((), device=logits.device, dtype=torch.float32)
        mean_kernel[(1,)](row_loss, out, N, BLOCK_SIZE=1024)
        return out
