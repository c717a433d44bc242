"""A short elementwise chain over a large fp32 tensor: y = relu(3 x - 1)."""

import torch
import torch.nn as nn

M, N = 8192, 8192


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 3.0 - 1.0)


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []


META = {"family": "fused_elementwise", "dtype": "fp32", "small": {"M": 33, "N": 500}, "atol": 1e-6, "rtol": 1e-6,
        "description": "y = relu(3x - 1) over an 8192 x 8192 fp32 tensor."}
