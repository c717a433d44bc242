"""MaxPool3d with dilation (kb:1/43), step 2: window shape as compile-time constants, autotuned tiles.

Step 1 passes kernel size, stride and dilation at run time: the 27 taps stay
three nested loops, each tap recomputing its indices and bounds, and the
8 x 64 tile was fixed by hand. Here the window shape is constexpr, so the
taps unroll and their offsets fold into immediates, and the tile shape and
warps are autotuned. The padding stays a run-time value that is never
specialized (do_not_specialize): a padding of 1 turned into a constant would
prove 16-byte alignment for some taps and not others, and mixed load layouts
cost a shared-memory conversion per tap.

Output (od, oh, ow) is still the max over the window at
o * stride - padding + k * dilation per axis, padded taps -inf, NaN
propagating.

Bytes: the input read once and the output written once: 4.3 + 0.49 GB at
16 x 32 x 128^3, 1.6 ms at 3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    return configs if named_args["x_ptr"].is_cuda else configs[:1]


@triton.autotune(
    configs=[triton.Config({"TILE_H": h, "TILE_W": w}, num_warps=nw)
             for h, w, nw in [(8, 64, 4), (16, 64, 4), (16, 64, 8), (4, 128, 4), (32, 32, 4)]],
    key=["D_out", "H_out", "W_out"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit(do_not_specialize=["padding"])
def maxpool3d_kernel(x_ptr, y_ptr, D, H, W, D_out, H_out, W_out, padding, KERNEL: tl.constexpr,
                     STRIDE: tl.constexpr, DILATION: tl.constexpr, TILE_H: tl.constexpr, TILE_W: tl.constexpr):
    volume = tl.program_id(axis=0).to(tl.int64)
    od = tl.program_id(axis=1)
    n_w_tiles = tl.cdiv(W_out, TILE_W)
    oh = (tl.program_id(axis=2) // n_w_tiles) * TILE_H + tl.arange(0, TILE_H)
    ow = (tl.program_id(axis=2) % n_w_tiles) * TILE_W + tl.arange(0, TILE_W)
    out_mask = (oh[:, None] < H_out) & (ow[None, :] < W_out)
    x_vol = x_ptr + volume * D * H * W
    acc = tl.full([TILE_H, TILE_W], float("-inf"), tl.float32)
    for a in tl.static_range(KERNEL):
        # Kept as a vector over the tile's rows so every mask below is a vector.
        id_ = oh * 0 + (od * STRIDE - padding + a * DILATION)
        depth_ok = (id_ >= 0) & (id_ < D)
        for b in tl.static_range(KERNEL):
            ih = oh * STRIDE - padding + b * DILATION
            row_ok = depth_ok & (ih >= 0) & (ih < H)
            row_base = (id_ * H + ih) * W
            for c in tl.static_range(KERNEL):
                iw = ow * STRIDE - padding + c * DILATION
                mask = out_mask & row_ok[:, None] & ((iw >= 0) & (iw < W))[None, :]
                x = tl.load(x_vol + row_base[:, None] + iw[None, :], mask=mask, other=float("-inf"))
                acc = tl.maximum(acc, x, propagate_nan=tl.PropagateNan.ALL)
    y_slice = y_ptr + (volume * D_out + od) * H_out * W_out
    tl.store(y_slice + oh[:, None] * W_out + ow[None, :], acc, mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0, dilation: int = 1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        if return_indices or ceil_mode:
            raise NotImplementedError("this kernel returns the pooled values only, with floor-mode output sizes")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        D, H, W = x.shape[-3:]
        span = self.dilation * (self.kernel_size - 1) + 1
        D_out, H_out, W_out = ((s + 2 * self.padding - span) // self.stride + 1 for s in (D, H, W))
        volumes = x.numel() // max(D * H * W, 1)
        y = torch.empty((*x.shape[:-3], D_out, H_out, W_out), device=x.device, dtype=x.dtype)
        if y.numel() > 0:
            grid = lambda meta: (volumes, D_out,
                                 triton.cdiv(H_out, meta["TILE_H"]) * triton.cdiv(W_out, meta["TILE_W"]))
            maxpool3d_kernel[grid](x, y, D, H, W, D_out, H_out, W_out, self.padding, KERNEL=self.kernel_size,
                                   STRIDE=self.stride, DILATION=self.dilation)
        return y
