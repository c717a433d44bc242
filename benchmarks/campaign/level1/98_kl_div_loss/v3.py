"""KL divergence with reduction='batchmean' (kb:1/98), step 3: the hardware's approximate log2 on the GPU.

Step 2's term, t * log(t / p) where t > 0 (torch's t == 0 case, 0 or NaN,
written out), costs one division and one accurate log per element; the
accurate log is a polynomial of some twenty instructions, and at 2.7e8
elements the whole loop body (about 60 instructions per element) is close
to what the SMs can issue in the 0.72 ms the reading takes. Here, on the
GPU, the log is one special-function instruction, lg2.approx.f32 (without
flushing subnormals), scaled by ln 2: absolute error about 2^-22 on
log2(t / p), which is near 0 here since both are near-uniform
distributions; summed with weights t it stays orders of magnitude inside
the 1e-4 tolerance. The edge values keep torch's answers: a ratio of 0
gives -inf, +inf gives +inf, a negative ratio NaN. The Triton interpreter
cannot run inline PTX, so off the GPU the kernel keeps step 2's accurate
log (FAST_LOG is a compile-time switch).

Persistent grid-stride pass and float64 combine as in step 2. No atomics.

Floor: one read of both 16384 x 16384 inputs, 2 x 1.07 GB: 0.72 ms at
3.0 TB/s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096
PROGRAMS_PER_SM = 4


@triton.jit
def natural_log(x, FAST_LOG: tl.constexpr):
    if FAST_LOG:
        log2 = tl.inline_asm_elementwise("lg2.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
        return log2 * 0.6931471805599453  # ln 2
    else:
        return tl.log(x)


@triton.jit
def kl_partials_kernel(p_ptr, t_ptr, partial_ptr, numel, BLOCK: tl.constexpr, FAST_LOG: tl.constexpr):
    pid = tl.program_id(axis=0)
    stride = tl.num_programs(axis=0).to(tl.int64) * BLOCK
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(pid.to(tl.int64) * BLOCK, numel, stride):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < numel
        # Padding lanes load p = t = 1: their term is 1 * log(1 / 1) = 0.
        p = tl.load(p_ptr + offs, mask=mask, other=1.0, eviction_policy="evict_first").to(tl.float32)
        t = tl.load(t_ptr + offs, mask=mask, other=1.0, eviction_policy="evict_first").to(tl.float32)
        zero_target = tl.where((p > 0.0) & (p < float("inf")), 0.0, float("nan"))
        acc += tl.where(t == 0.0, zero_target, t * natural_log(t / p, FAST_LOG))
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def batchmean_of_partials_kernel(partial_ptr, out_ptr, n_partials, batch, P_BLOCK: tl.constexpr):
    offs = tl.arange(0, P_BLOCK)
    partials = tl.load(partial_ptr + offs, mask=offs < n_partials, other=0.0).to(tl.float64)
    tl.store(out_ptr, (tl.sum(partials, axis=0) / batch).to(out_ptr.dtype.element_ty))


def _num_programs(device: torch.device, numel: int) -> int:
    n = PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
    return max(1, min(n, triton.cdiv(numel, BLOCK)))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # The batch is the first dimension of the log-probabilities, i.e. of predictions.
        batch = predictions.shape[0] if predictions.dim() > 0 else 1
        p, t = torch.broadcast_tensors(predictions, targets)
        p, t = p.contiguous(), t.contiguous()
        numel = p.numel()
        out = torch.empty((), device=p.device, dtype=torch.result_type(predictions, targets))
        if numel == 0:
            return out.fill_(0.0 if batch else float("nan"))
        n_partials = _num_programs(p.device, numel)
        partials = torch.empty(n_partials, device=p.device, dtype=torch.float32)
        kl_partials_kernel[(n_partials,)](p, t, partials, numel, BLOCK=BLOCK, FAST_LOG=p.is_cuda, num_warps=8)
        batchmean_of_partials_kernel[(1,)](partials, out, n_partials, batch,
                                           P_BLOCK=triton.next_power_of_2(n_partials), num_warps=4)
        return out
