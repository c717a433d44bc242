"""L1 normalization of rows (kb:1/38), step 2: a persistent grid sized so the rows in flight stay in L2.

As in step 1 a program sums |x| over a row, then re-reads it to write
x / mean. Whether that re-read costs DRAM traffic depends on how many rows
are in flight: with one row per program and several programs per SM (step 1),
hundreds of 256 KiB rows compete for the 50 MB L2 and the re-read mostly
misses. Here a persistent grid of one wide program (16 warps) per SM walks
rows in turn, so about 132 rows (34 MB) are in flight: the first read marks
the row evict_last, the re-read (evict_first) finds it in L2, and DRAM sees
one read and one write.

The row length 65535 is odd, so rows start at any 4-byte offset and the
accesses are 4-byte ones; each warp instruction still covers 128 contiguous
bytes, so this costs issue slots, not DRAM bandwidth.

Bytes: one read and one write of 8.6 GB (32768 x 65535): 5.7 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 8192
NUM_WARPS = 16


@triton.jit
def l1norm_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for row in range(tl.program_id(axis=0), n_rows, tl.num_programs(axis=0)):
        x_row = x_ptr + row * n_cols.to(tl.int64)
        y_row = y_ptr + row * n_cols.to(tl.int64)
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            x = tl.load(x_row + start + cols, mask=mask, other=0.0, eviction_policy="evict_last")
            acc += tl.abs(x)
        mean = tl.sum(acc, axis=0) / n_cols
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            x = tl.load(x_row + start + cols, mask=mask, other=0.0, eviction_policy="evict_first")
            tl.store(y_row + start + cols, x / mean, mask=mask)


def _num_programs(device: torch.device, n_rows: int) -> int:
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    return max(1, min(n_rows, sms))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The reduction is over dim 1; rows are everything else.
        xt = x.movedim(1, -1).contiguous()
        y = torch.empty_like(xt)
        n_cols = xt.shape[-1]
        n_rows = xt.numel() // max(n_cols, 1)
        if xt.numel() > 0:
            grid = (_num_programs(xt.device, n_rows),)
            l1norm_rows_kernel[grid](xt, y, n_rows, n_cols, BLOCK=BLOCK, num_warps=NUM_WARPS)
        return y.movedim(-1, 1)
