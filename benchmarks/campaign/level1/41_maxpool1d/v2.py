"""MaxPool1d with dilation (kb:1/41), step 2: window shape as compile-time constants, autotuned block and warps.

Step 1 passes kernel size, stride and dilation at run time, so the tap loop
stays a loop with its index arithmetic recomputed per tap. Here they are
constexpr: the taps unroll and their offsets fold into immediates. The
padding stays a run-time value on purpose: as a constant it would let Triton
prove 16-byte alignment for some taps and not others, and the mix of load
layouts then costs a shared-memory layout conversion per block. Block width
and warps are autotuned on the row length.

Output o of a row still takes the max of x[o * stride - padding + j * dilation]
over j < kernel_size, padded taps counting as -inf, NaN propagating.

Bytes: the input read once and the output written once: 3.2 + 3.2 GB at the
problem's 64 x 192 x 65536, 2.1 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    return configs if named_args["x_ptr"].is_cuda else configs[:1]


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in [(1024, 4), (2048, 4), (2048, 8), (4096, 8)]],
    key=["L", "L_out"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def maxpool1d_kernel(x_ptr, y_ptr, L, L_out, padding, KERNEL: tl.constexpr, STRIDE: tl.constexpr,
                     DILATION: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    o = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    out_mask = o < L_out
    x_row = x_ptr + row * L
    first = o * STRIDE - padding
    acc = tl.full([BLOCK], float("-inf"), tl.float32)
    for j in tl.static_range(KERNEL):
        i = first + j * DILATION
        x = tl.load(x_row + i, mask=out_mask & (i >= 0) & (i < L), other=float("-inf"))
        acc = tl.maximum(acc, x, propagate_nan=tl.PropagateNan.ALL)
    tl.store(y_ptr + row * L_out + o, acc, mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0, dilation: int = 1,
                 return_indices: bool = False):
        super().__init__()
        if return_indices:
            raise NotImplementedError("this kernel returns the pooled values only")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        L = x.shape[-1]
        L_out = (L + 2 * self.padding - self.dilation * (self.kernel_size - 1) - 1) // self.stride + 1
        rows = x.numel() // max(L, 1)
        y = torch.empty((*x.shape[:-1], L_out), device=x.device, dtype=x.dtype)
        if y.numel() > 0:
            grid = lambda meta: (rows, triton.cdiv(L_out, meta["BLOCK"]))
            maxpool1d_kernel[grid](x, y, L, L_out, self.padding, KERNEL=self.kernel_size, STRIDE=self.stride,
                                   DILATION=self.dilation)
        return y
