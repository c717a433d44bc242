"""MaxPool2d, step 1: 2-D output tiles per (n, c) plane, index arithmetic per tile, autotuned.

- A program owns a [BLOCK_H, BLOCK_W] tile of one output plane, so the plane,
  the output rows and the output columns come from the program ids and two
  aranges: no per-element division or modulo (which dominated the naive
  kernel's instruction count).
- Within a window step, lanes along ow read input columns STRIDE apart; the
  KERNEL column taps of a row hit the same cache lines, so L1 serves all but
  the first.
- Tile shape and warps are autotuned on the plane size: wide tiles keep the
  output stores long and contiguous, tall ones reuse input rows between
  vertically adjacent windows.
- Plane offsets are 64-bit: N * C * H * W can pass 2^31.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in named_args.values())
    return configs if on_gpu else configs[:1]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_H": 8, "BLOCK_W": 64}, num_warps=4),
        triton.Config({"BLOCK_H": 16, "BLOCK_W": 64}, num_warps=4),
        triton.Config({"BLOCK_H": 16, "BLOCK_W": 32}, num_warps=4),
        triton.Config({"BLOCK_H": 32, "BLOCK_W": 64}, num_warps=8),
        triton.Config({"BLOCK_H": 4, "BLOCK_W": 128}, num_warps=4),
    ],
    key=["H", "W", "OH", "OW"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def maxpool2d_kernel(x_ptr, y_ptr, H, W, OH, OW,
                     KERNEL: tl.constexpr, STRIDE: tl.constexpr, PADDING: tl.constexpr,
                     BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    pid_w = tl.program_id(axis=0)
    pid_h = tl.program_id(axis=1)
    plane = tl.program_id(axis=2).to(tl.int64)  # n * C + c
    oh = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    ow = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)
    # Edge tiles are partial when OH, OW are not multiples of the block.
    out_mask = (oh[:, None] < OH) & (ow[None, :] < OW)
    x_plane = x_ptr + plane * H * W

    acc = tl.full([BLOCK_H, BLOCK_W], float("-inf"), tl.float32)
    for kh in tl.static_range(KERNEL):
        ih = oh * STRIDE - PADDING + kh
        row_ok = (ih >= 0) & (ih < H)
        for kw in tl.static_range(KERNEL):
            iw = ow * STRIDE - PADDING + kw
            # Window positions in the padding read -inf, as PyTorch pads.
            valid = out_mask & row_ok[:, None] & ((iw >= 0) & (iw < W))[None, :]
            x = tl.load(x_plane + ih[:, None] * W + iw[None, :], mask=valid, other=float("-inf"))
            acc = tl.maximum(acc, x)
    y_plane = y_ptr + plane * OH * OW
    tl.store(y_plane + oh[:, None] * OW + ow[None, :], acc, mask=out_mask, cache_modifier=".cs")


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        N, C, H, W = x.shape
        k, s, p = self.kernel_size, self.stride, self.padding
        OH, OW = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
        y = torch.empty((N, C, OH, OW), device=x.device, dtype=x.dtype)
        grid = lambda meta: (triton.cdiv(OW, meta["BLOCK_W"]), triton.cdiv(OH, meta["BLOCK_H"]), N * C)
        maxpool2d_kernel[grid](x, y, H, W, OH, OW, KERNEL=k, STRIDE=s, PADDING=p)
        return y
