"""Mean cross-entropy of logits against class indices: one program per row computes
logsumexp(row) - row[target] with the row's max subtracted first (no overflow at any magnitude);
a second kernel averages the per-row losses in a fixed order (deterministic)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_loss_kernel(x_ptr, t_ptr, loss_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for c0 in range(0, C, BLOCK):  # online max and rescaled sum, column block by column block
        x = tl.load(x_ptr + row * C + c0 + cols, mask=c0 + cols < C, other=float("-inf"))
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.where(x == float("-inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    target = tl.load(t_ptr + row)
    picked = tl.load(x_ptr + row * C + target)
    tl.store(loss_ptr + row, row_max + tl.log(total) - picked)


@triton.jit
def mean_kernel(loss_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(0, n, BLOCK):
        acc += tl.load(loss_ptr + i + offs, mask=i + offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        x = predictions.contiguous()
        rows, C = x.shape
        losses = torch.empty(rows, device=x.device, dtype=torch.float32)
        row_loss_kernel[(rows,)](x, targets, losses, C, BLOCK=1024, num_warps=4)
        out = torch.empty((), device=x.device, dtype=torch.float32)
        mean_kernel[(1,)](losses, out, rows, BLOCK=1024, num_warps=4)
        return out
