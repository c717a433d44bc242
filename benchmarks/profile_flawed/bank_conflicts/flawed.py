"""Deliberately flawed: shared-memory bank conflicts. A 32 x 32 tile is read from global memory
by rows and written back by columns through shared memory declared tile[32][32] without padding:
the column read tile[threadIdx.x][j] sends all 32 lanes of a warp to the same bank, 32-way
serialised. Global accesses are coalesced both ways. Expected diagnosis: bank conflicts (most
shared wavefronts are replays). The fix is tile[32][33]."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kTile = 32;
constexpr int kRows = 8;  // each thread moves kTile / kRows elements

__global__ void transpose_conflicted_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float tile[kTile][kTile];  // the flaw: no padding column
    const int bx = blockIdx.x * kTile, by = blockIdx.y * kTile;
    for (int r = threadIdx.y; r < kTile; r += kRows) {
        const int row = by + r, col = bx + threadIdx.x;
        if (row < n && col < n) tile[r][threadIdx.x] = x[(long long)row * n + col];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kRows) {
        const int row = bx + r, col = by + threadIdx.x;
        if (row < n && col < n) y[(long long)row * n + col] = tile[threadIdx.x][r];  // 32 lanes, one bank
    }
}

torch::Tensor transpose_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.size(0) == x.size(1), "square CUDA matrix expected");
    auto xc = x.contiguous();
    const int n = static_cast<int>(xc.size(0));
    auto y = torch::empty_like(xc);
    dim3 grid((n + kTile - 1) / kTile, (n + kTile - 1) / kTile), block(kTile, kRows);
    transpose_conflicted_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(name="skillbase_flawed_transpose", cpp_sources="torch::Tensor transpose_forward(torch::Tensor x);",
                   cuda_sources=CUDA_SRC, functions=["transpose_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.transpose_forward(x)
