"""GELU (tanh form) over a large fp32 tensor: memory-bound, one read and one write per element."""

import torch
import torch.nn as nn

M, N = 8192, 8192


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []


META = {"family": "elementwise", "dtype": "fp32", "small": {"M": 9, "N": 1001}, "atol": 1e-5, "rtol": 1e-5,
        "description": "tanh-GELU over an 8192 x 8192 fp32 tensor."}
