"""A 3D convolution followed by a bias and a tanh: the convolution dominates."""
import torch
import torch.nn as nn

N, C_IN, C_OUT, D, H, W = 16, 16, 32, 32, 64, 64


class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv3d(c_in, c_out, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(c_out, 1, 1, 1) * 0.1)

    def forward(self, x):
        return torch.tanh(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(N, C_IN, D, H, W)]


def get_init_inputs():
    return [C_IN, C_OUT]


META = {
    "family": "conv_epilogue",
    "dtype": "fp32",
    "description": "Conv3d 16 -> 32 channels, 3x3x3, then + bias and tanh.",
    "small": {"N": 2, "C_IN": 4, "C_OUT": 8, "D": 4, "H": 6, "W": 5},
    "atol": 1e-4,
    "rtol": 1e-4,
    "flops": lambda: 2 * N * C_OUT * D * H * W * C_IN * 27,
    "bytes": lambda: 4 * (N * C_IN * D * H * W + N * C_OUT * D * H * W),
}
