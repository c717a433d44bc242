"""fp32 GEMM with a bias and ReLU epilogue, checked at fp32 tolerance."""
import torch
import torch.nn as nn

M, K, N = 1024, 8192, 8192


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N]


META = {
    "family": "matmul_epilogue",
    "dtype": "fp32",
    "description": "relu(x @ W^T + b), 1024 x 8192 x 8192 fp32.",
    "small": {"M": 48, "K": 96, "N": 80},
    "atol": 1e-4,
    "rtol": 1e-4,
    "flops": lambda: 2 * M * N * K,
    "bytes": lambda: 4 * (M * K + K * N + M * N),
}
