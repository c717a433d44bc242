"""A pointwise (1x1) fp32 convolution: a GEMM over channels, checked at fp32 tolerance."""
import torch
import torch.nn as nn

N, C_IN, C_OUT, H, W = 32, 64, 128, 128, 128


class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 1, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(N, C_IN, H, W)]


def get_init_inputs():
    return [C_IN, C_OUT]


META = {
    "family": "conv",
    "dtype": "fp32",
    "description": "1x1 Conv2d 64 -> 128 channels on 32 x 64 x 128 x 128, fp32.",
    "small": {"N": 2, "C_IN": 16, "C_OUT": 32, "H": 5, "W": 7},
    "atol": 1e-4,
    "rtol": 1e-4,
    "flops": lambda: 2 * N * C_OUT * C_IN * H * W,
    "bytes": lambda: 4 * (N * C_IN * H * W + N * C_OUT * H * W + C_IN * C_OUT),
}
