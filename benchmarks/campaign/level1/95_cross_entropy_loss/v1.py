"""Cross-entropy with mean reduction (kb:1/95), step 1: one program per row, online log-sum-exp over chunks, then a float64 mean.

loss = mean over rows n of (logsumexp(x[n, :]) - x[n, target[n]]), for a
32768 x 4096 fp32 logit matrix and int64 targets. Rows whose target is
torch's default ignore_index (-100) add nothing and are not counted.

A program walks its row in BLOCK-wide chunks, keeping per lane a running
maximum m and a running sum s of exp(x - m) that is rescaled whenever m
grows (the online normalizer): the logits are read once, and subtracting the
maximum keeps exp from overflowing however large the logits are. At the end
the lanes are merged, the target's logit is fetched, and the row's loss is
written. A second, single program adds the 32768 row losses in float64 and
divides by the number of counted rows: no atomics, the same result every run.

Floor: one read of the logits, 537 MB: 0.18 ms at 3.0 TB/s (targets and
row losses are 0.5 MB). One exp per logit (1.3e8) is far under the special
function units' rate; the chunk loop's dependent steps and the second
launch are what this step leaves on the table.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024
COMBINE_BLOCK = 1024
IGNORE_INDEX = -100  # cross_entropy's default


@triton.jit
def row_loss_kernel(x_ptr, target_ptr, loss_ptr, C, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * C
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, C, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < C, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # A lane that has seen only -inf (padding) keeps s = 0 instead of exp(-inf - -inf) = NaN.
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
    row_max = tl.max(m, axis=0)
    shift = tl.where(row_max == float("-inf"), 0.0, row_max)
    lse = shift + tl.log(tl.sum(s * tl.exp(m - shift), axis=0))
    target = tl.load(target_ptr + row)
    counted = target != ignore_index
    x_target = tl.load(x_row + target, mask=counted, other=0.0).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(counted, lse - x_target, 0.0))


@triton.jit
def mean_over_counted_kernel(loss_ptr, target_ptr, out_ptr, n_rows, ignore_index, BLOCK: tl.constexpr):
    total = tl.zeros([BLOCK], tl.float64)
    count = tl.zeros([BLOCK], tl.int64)
    for start in range(0, n_rows, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        inside = offs < n_rows
        total += tl.load(loss_ptr + offs, mask=inside, other=0.0).to(tl.float64)
        target = tl.load(target_ptr + offs, mask=inside, other=ignore_index)
        count += (target != ignore_index).to(tl.int64)
    mean = tl.sum(total, axis=0) / tl.sum(count, axis=0).to(tl.float64)
    tl.store(out_ptr, mean.to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # Classes are dimension 1 (N, C, d1, ...): move them last so every row is contiguous.
        c = predictions.shape[1] if predictions.dim() > 1 else predictions.shape[0]
        x = predictions.movedim(1, -1).reshape(-1, c).contiguous() if predictions.dim() > 1 else predictions.reshape(1, c)
        target = targets.reshape(-1).contiguous()
        n_rows = x.shape[0]
        out = torch.empty((), device=x.device, dtype=x.dtype)
        if n_rows == 0:
            return out.fill_(float("nan"))
        losses = torch.empty(n_rows, device=x.device, dtype=torch.float32)
        row_loss_kernel[(n_rows,)](x, target, losses, c, IGNORE_INDEX, BLOCK=min(BLOCK, triton.next_power_of_2(c)),
                                   num_warps=4)
        mean_over_counted_kernel[(1,)](losses, target, out, n_rows, IGNORE_INDEX, BLOCK=COMBINE_BLOCK, num_warps=4)
        return out
