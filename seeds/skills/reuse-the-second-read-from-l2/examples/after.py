"""Persistent row programs: only about one row per SM in flight, so the second pass hits L2."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l1_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        base = row * n_cols  # under 2^31 at the task's 4096 x 65536
        acc = tl.zeros((BLOCK,), tl.float32)
        for off in range(0, n_cols, BLOCK):
            m = off + cols < n_cols
            # Kept in L2 for the second pass, which follows right after.
            acc += tl.abs(tl.load(x_ptr + base + off + cols, mask=m, other=0.0, eviction_policy="evict_last"))
        scale = n_cols / tl.sum(acc, axis=0)
        for off in range(0, n_cols, BLOCK):
            m = off + cols < n_cols
            x = tl.load(x_ptr + base + off + cols, mask=m, other=0.0, eviction_policy="evict_first")
            tl.store(y_ptr + base + off + cols, x * scale, mask=m)


def _num_sms(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        grid = (min(n_rows, _num_sms(x.device)),)
        l1_rows_kernel[grid](x, y, n_rows, n_cols, BLOCK=2048, num_warps=16)
        return y
