"""AvgPool1d (kb:1/44), step 2: window shape as compile-time constants, autotuned block and warps.

Step 1 passes kernel size and stride at run time, so the tap loop stays a
loop and the final division is a true division by a run-time count. Here
both are constexpr: the taps unroll, their offsets fold into immediates, and
the division by the constant kernel size becomes a multiply when it is a
power of two (exact, so the result matches step 1 bit for bit). The padding
stays a run-time value on purpose: as a constant it would let Triton prove
16-byte alignment for some taps and not others, and mixed load layouts cost
a shared-memory conversion. Block width and warps are autotuned.

Output o is still the sum of x[o * stride - padding + j] over j < kernel_size
in window order, padded taps counted as zeros and in the divisor.

Bytes: the input read once and the output written once: 2.1 + 2.1 GB at the
problem's 64 x 128 x 65536, 1.4 ms at 3.0 TB/s.
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
def avgpool1d_kernel(x_ptr, y_ptr, L, L_out, padding, KERNEL: tl.constexpr, STRIDE: tl.constexpr,
                     BLOCK: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    o = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    out_mask = o < L_out
    x_row = x_ptr + row * L
    first = o * STRIDE - padding
    acc = tl.zeros([BLOCK], tl.float32)
    for j in tl.static_range(KERNEL):
        i = first + j
        acc += tl.load(x_row + i, mask=out_mask & (i >= 0) & (i < L), other=0.0)
    tl.store(y_ptr + row * L_out + o, acc / KERNEL, mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        L = x.shape[-1]
        L_out = (L + 2 * self.padding - self.kernel_size) // self.stride + 1
        rows = x.numel() // max(L, 1)
        y = torch.empty((*x.shape[:-1], L_out), device=x.device, dtype=x.dtype)
        if y.numel() > 0:
            grid = lambda meta: (rows, triton.cdiv(L_out, meta["BLOCK"]))
            avgpool1d_kernel[grid](x, y, L, L_out, self.padding, KERNEL=self.kernel_size, STRIDE=self.stride)
        return y
