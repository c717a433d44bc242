"""Cross-entropy with mean reduction (kb:1/95), step 2: the whole row in registers, one exp per logit.

loss = mean over counted rows n of (logsumexp(x[n, :]) - x[n, target[n]]),
32768 x 4096 fp32 logits, int64 targets, torch's default ignore_index
(-100) honoured. Step 1 walks each row in four 1024-wide chunks with an
online normalizer: two exps per logit (the rescale and the term), four
dependent steps per row, and a dependent load of the target's logit at the
end. A 4096-float row is 16 KiB: it fits in the registers of one program
(16 floats per thread at 8 warps), so here a program loads its whole row
(or several short rows) at once, takes the maximum, sums exp(x - max) (one
exp per logit, still overflow-safe), and picks the target's logit out of
the registers it already holds instead of loading it again. The row is
read from DRAM once, as before, but every load of the row is in flight
together. Rows wider than MAX_CLASSES_IN_REGISTERS keep step 1's chunked
online kernel. The float64 mean over the counted rows is step 1's.

Floor: one read of the logits, 537 MB: 0.18 ms at 3.0 TB/s (targets and
row losses are 0.5 MB).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

CHUNK = 1024
COMBINE_BLOCK = 1024
IGNORE_INDEX = -100  # cross_entropy's default
MAX_CLASSES_IN_REGISTERS = 8192
TILE = 4096  # logits per program in the register kernel: rows x padded classes


@triton.jit
def rows_in_registers_loss_kernel(x_ptr, target_ptr, loss_ptr, n_rows, C, ignore_index,
                                  ROWS: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(axis=0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    cols = tl.arange(0, BLOCK_C)
    ptrs = x_ptr + rows[:, None].to(tl.int64) * C + cols[None, :]
    x = tl.load(ptrs, mask=row_ok[:, None] & (cols[None, :] < C), other=float("-inf")).to(tl.float32)
    row_max = tl.max(x, axis=1)
    # A row of only -inf (padding rows) must not compute -inf - -inf = NaN.
    shift = tl.where(row_max == float("-inf"), 0.0, row_max)
    lse = shift + tl.log(tl.sum(tl.exp(x - shift[:, None]), axis=1))
    target = tl.load(target_ptr + rows, mask=row_ok, other=ignore_index)
    counted = target != ignore_index
    x_target = tl.sum(tl.where(cols[None, :] == target[:, None], x, 0.0), axis=1)
    tl.store(loss_ptr + rows, tl.where(counted, lse - x_target, 0.0), mask=row_ok)


@triton.jit
def chunked_online_loss_kernel(x_ptr, target_ptr, loss_ptr, C, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * C
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, C, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < C, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
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
        if c <= MAX_CLASSES_IN_REGISTERS:
            block_c = triton.next_power_of_2(c)
            rows = max(1, TILE // block_c)
            rows_in_registers_loss_kernel[(triton.cdiv(n_rows, rows),)](
                x, target, losses, n_rows, c, IGNORE_INDEX, ROWS=rows, BLOCK_C=block_c, num_warps=8)
        else:
            chunked_online_loss_kernel[(n_rows,)](x, target, losses, c, IGNORE_INDEX, BLOCK=CHUNK, num_warps=4)
        mean_over_counted_kernel[(1,)](losses, target, out, n_rows, IGNORE_INDEX, BLOCK=COMBINE_BLOCK, num_warps=4)
        return out
