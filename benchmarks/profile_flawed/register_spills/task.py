"""Row softmax over wide fp32 rows: one read and one write per element."""

import torch
import torch.nn as nn

M, N = 4096, 16384  # 256 MiB in, 256 MiB out


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []


META = {"family": "softmax", "dtype": "fp32", "small": {"M": 5, "N": 300}, "atol": 1e-5, "rtol": 1e-5,
        "description": "softmax over the last dim of a 4096 x 16384 fp32 tensor."}
