"""relu over inputs the task declares non-negative: a plain copy is correct on that domain."""
import torch
import torch.nn as nn

N = 1 << 22


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(N)]


def get_init_inputs():
    return []


META = {"small": {"N": 4099}, "domain": {"x": [0, None]}}
