"""Scale and shift a large 2-D fp32 tensor: y = 2 x + 1. Memory-bound, one read and one write per element."""

import torch
import torch.nn as nn

M, N = 8192, 8192  # 256 MiB in, 256 MiB out


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []


META = {"family": "elementwise", "dtype": "fp32", "small": {"M": 37, "N": 70}, "atol": 1e-6, "rtol": 1e-6,
        "description": "y = 2x + 1 over an M x N fp32 tensor (8192 x 8192)."}
