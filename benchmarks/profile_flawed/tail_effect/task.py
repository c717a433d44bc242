"""Row sums of a tall-and-wide fp32 matrix with few rows: (300 x 262144) -> (300,)."""

import torch
import torch.nn as nn

M, N = 300, 262144  # 300 MiB in


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=-1)


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []


META = {"family": "reduction", "dtype": "fp32", "small": {"M": 7, "N": 5000}, "atol": 1e-3, "rtol": 1e-4,
        "description": "sum over the last dim of a 300 x 262144 fp32 matrix."}
