"""softplus(x) = log(1 + exp(x)), inputs drawn in [0, 1)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

N = 1 << 22


class Model(nn.Module):
    def forward(self, x):
        return F.softplus(x)


def get_inputs():
    return [torch.rand(N)]


def get_init_inputs():
    return []


META = {"small": {"N": 4099}}
