"""Transpose of a square fp32 matrix as a contiguous copy: (N, N) -> (N, N)^T."""

import torch
import torch.nn as nn

N = 8192  # 256 MiB in, 256 MiB out


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous()


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []


META = {"family": "layout", "dtype": "fp32", "small": {"N": 64}, "atol": 0.0, "rtol": 0.0,
        "description": "contiguous transpose of an 8192 x 8192 fp32 matrix."}
