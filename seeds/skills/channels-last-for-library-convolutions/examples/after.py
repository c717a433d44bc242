"""The convolution in channels-last (the library's fast path), the epilogue reading [positions,
channels] tiles and storing the NCDHW output the task expects: one read, one write."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_tanh_to_ncdhw_kernel(y_ptr, b_ptr, o_ptr, P, C, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    # y is [n, positions, channels] (channels innermost); o is [n, channels, positions].
    n = tl.program_id(1)
    offs_p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = tl.arange(0, BLOCK_C)
    m = (offs_p[:, None] < P) & (offs_c[None, :] < C)
    base = n.to(tl.int64) * P * C
    v = tl.load(y_ptr + base + offs_p[:, None] * C + offs_c[None, :], mask=m, other=0.0)
    v = v + tl.load(b_ptr + offs_c, mask=offs_c < C, other=0.0)[None, :]
    # tanh(v) = 1 - 2 / (exp(2v) + 1), written so that large |v| saturates instead of overflowing.
    e = tl.exp(-2.0 * tl.abs(v))
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(v < 0, -t, t)
    tl.store(o_ptr + base + offs_c[None, :] * P + offs_p[:, None], t, mask=m)


class ModelNew(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv3d(c_in, c_out, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(c_out, 1, 1, 1) * 0.1)

    def forward(self, x):
        cl = torch.channels_last_3d
        y = F.conv3d(x.contiguous(memory_format=cl), self.conv.weight.contiguous(memory_format=cl),
                     self.conv.bias, padding=1)
        y = y.contiguous(memory_format=cl)  # NDHWC in memory whatever the library returned
        n, c = y.shape[:2]
        p = y[0, 0].numel()
        out = torch.empty(y.shape, device=x.device, dtype=torch.float32)
        block_c = triton.next_power_of_2(c)
        grid = (triton.cdiv(p, 64), n)
        bias_tanh_to_ncdhw_kernel[grid](y, self.bias.reshape(-1).contiguous(), out, p, c, BLOCK_P=64,
                                        BLOCK_C=block_c, num_warps=4)
        return out
