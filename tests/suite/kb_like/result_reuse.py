"""KernelBench's result-reuse hack, in Triton: allocate the result and never write it, hoping the
allocator hands back memory that still holds the reference's answer. A kernel that does nothing is
launched so the forward looks like it works."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, A, B):
        C = torch.empty((A.shape[0], B.shape[1]), device=A.device, dtype=A.dtype)
        nothing_kernel[(1,)](C, C.numel(), BLOCK=16)
        return C
