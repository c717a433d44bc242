"""Bias + exact GELU + per-column scale + residual add on a bf16 activation."""
import torch
import torch.nn as nn
import torch.nn.functional as F

M, N = 8192, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, bias, gamma, residual):
        return F.gelu(x + bias) * gamma + residual


def get_inputs():
    return [
        torch.randn(M, N, dtype=torch.bfloat16),
        torch.randn(N, dtype=torch.bfloat16),
        torch.randn(N, dtype=torch.bfloat16),
        torch.randn(M, N, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return []


META = {
    "family": "fused_elementwise",
    "dtype": "bf16",
    "description": "gelu(x + bias) * gamma + residual over an M x N bf16 tensor; four eager kernels.",
    "small": {"M": 19, "N": 72},
    "extra_shapes": [{"M": 1000, "N": 1000}],
    # The eager reference rounds to bf16 after each of its four ops. Where gelu(x + bias) * gamma
    # nearly cancels the residual, one ulp of an intermediate of magnitude 16-32 (0.125) survives
    # the cancellation, so the absolute tolerance must cover about two of them.
    "atol": 2.5e-1,
    "rtol": 3e-2,
    "flops": lambda: 20 * M * N,
    "bytes": lambda: 2 * (3 * M * N + 2 * N),
}
