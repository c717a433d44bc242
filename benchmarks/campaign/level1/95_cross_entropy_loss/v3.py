"""Cross-entropy with mean reduction (kb:1/95), step 3: a persistent grid of row programs, each keeping its own loss sum.

Step 2 writes one loss per row (32768 floats) and then a single program
reads them back with the 32768 int64 targets, 1 KiB at a time, to form the
mean: 32 dependent round trips to memory on one SM, tens of microseconds
beside a 0.18 ms floor. Here a fixed grid of a few programs per SM strides
over the rows (each row, or group of short rows, held in registers as in
step 2), and each program adds its rows' losses and counts its counted rows
as it goes (in fp32: about 30 rows each at the problem's size). The final
kernel reads one (sum, count) pair per program, a few hundred, in a single
load, and divides in float64. No atomics: the same result every run.

Everything else is step 2's: max, one exp per logit, the target's logit
picked out of registers, torch's default ignore_index (-100) honoured, and
rows wider than MAX_CLASSES_IN_REGISTERS on the chunked online kernel.

Floor: one read of the logits, 537 MB: 0.18 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

CHUNK = 1024
IGNORE_INDEX = -100  # cross_entropy's default
MAX_CLASSES_IN_REGISTERS = 8192
TILE = 4096  # logits per program in the register kernel: rows x padded classes
PROGRAMS_PER_SM = 8


@triton.jit
def rows_loss_partials_kernel(x_ptr, target_ptr, sum_ptr, count_ptr, n_rows, C, ignore_index,
                              ROWS: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_C)
    total = tl.zeros([ROWS], tl.float32)
    count = tl.zeros([ROWS], tl.int32)
    for first in range(pid * ROWS, n_rows, tl.num_programs(axis=0) * ROWS):
        rows = first + tl.arange(0, ROWS)
        row_ok = rows < n_rows
        ptrs = x_ptr + rows[:, None].to(tl.int64) * C + cols[None, :]
        x = tl.load(ptrs, mask=row_ok[:, None] & (cols[None, :] < C), other=float("-inf"),
                    eviction_policy="evict_first").to(tl.float32)
        row_max = tl.max(x, axis=1)
        # A row of only -inf (padding rows) must not compute -inf - -inf = NaN.
        shift = tl.where(row_max == float("-inf"), 0.0, row_max)
        lse = shift + tl.log(tl.sum(tl.exp(x - shift[:, None]), axis=1))
        target = tl.load(target_ptr + rows, mask=row_ok, other=ignore_index)
        counted = target != ignore_index
        x_target = tl.sum(tl.where(cols[None, :] == target[:, None], x, 0.0), axis=1)
        total += tl.where(counted, lse - x_target, 0.0)
        count += counted.to(tl.int32)
    tl.store(sum_ptr + pid, tl.sum(total, axis=0))
    tl.store(count_ptr + pid, tl.sum(count, axis=0))


@triton.jit
def chunked_online_loss_kernel(x_ptr, target_ptr, sum_ptr, count_ptr, C, ignore_index, BLOCK: tl.constexpr):
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
    tl.store(sum_ptr + row, tl.where(counted, lse - x_target, 0.0))
    tl.store(count_ptr + row, counted.to(tl.int32))


@triton.jit
def mean_of_partials_kernel(sum_ptr, count_ptr, out_ptr, n_partials, BLOCK: tl.constexpr):
    total = tl.zeros([BLOCK], tl.float64)
    count = tl.zeros([BLOCK], tl.int64)
    for start in range(0, n_partials, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        inside = offs < n_partials
        total += tl.load(sum_ptr + offs, mask=inside, other=0.0).to(tl.float64)
        count += tl.load(count_ptr + offs, mask=inside, other=0).to(tl.int64)
    mean = tl.sum(total, axis=0) / tl.sum(count, axis=0).to(tl.float64)
    tl.store(out_ptr, mean.to(out_ptr.dtype.element_ty))


def _num_programs(device: torch.device, n_groups: int) -> int:
    n = PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
    return max(1, min(n, n_groups))


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
        if c <= MAX_CLASSES_IN_REGISTERS:
            block_c = triton.next_power_of_2(c)
            rows = max(1, TILE // block_c)
            n_partials = _num_programs(x.device, triton.cdiv(n_rows, rows))
            sums = torch.empty(n_partials, device=x.device, dtype=torch.float32)
            counts = torch.empty(n_partials, device=x.device, dtype=torch.int32)
            rows_loss_partials_kernel[(n_partials,)](x, target, sums, counts, n_rows, c, IGNORE_INDEX,
                                                     ROWS=rows, BLOCK_C=block_c, num_warps=8)
        else:
            n_partials = n_rows
            sums = torch.empty(n_partials, device=x.device, dtype=torch.float32)
            counts = torch.empty(n_partials, device=x.device, dtype=torch.int32)
            chunked_online_loss_kernel[(n_rows,)](x, target, sums, counts, c, IGNORE_INDEX, BLOCK=CHUNK, num_warps=4)
        mean_of_partials_kernel[(1,)](sums, counts, out, n_partials,
                                      BLOCK=min(1024, triton.next_power_of_2(n_partials)), num_warps=4)
        return out
