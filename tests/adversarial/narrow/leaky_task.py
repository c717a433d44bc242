"""leaky_relu(x, 0.01) over N values, drawn with torch.rand as many KernelBench problems draw them."""
import torch
import torch.nn as nn
import torch.nn.functional as F

N = 1 << 22


class Model(nn.Module):
    def forward(self, x):
        return F.leaky_relu(x, 0.01)


def get_inputs():
    return [torch.rand(N)]


def get_init_inputs():
    return []


META = {"small": {"N": 5003}}
