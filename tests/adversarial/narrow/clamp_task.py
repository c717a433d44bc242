"""hardtanh: clamp(x, -1, 1), inputs drawn in [0, 1)."""
import torch
import torch.nn as nn

N = 1 << 22


class Model(nn.Module):
    def forward(self, x):
        return torch.clamp(x, -1.0, 1.0)


def get_inputs():
    return [torch.rand(N)]


def get_init_inputs():
    return []


META = {"small": {"N": 4099}}
