"""Rows scaled by their mean absolute value: a statistic, then a second pass over the same row."""
import torch
import torch.nn as nn

ROWS, COLS = 4096, 65536


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / torch.mean(torch.abs(x), dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []


META = {
    "family": "norm",
    "dtype": "fp32",
    "description": "x / mean(|x|) per row, 4096 rows of 256 KiB: two passes over each row.",
    "small": {"ROWS": 6, "COLS": 3000},
    "atol": 1e-4,
    "rtol": 1e-4,
    "flops": lambda: 3 * ROWS * COLS,
    "bytes": lambda: 2 * 4 * ROWS * COLS,
}
