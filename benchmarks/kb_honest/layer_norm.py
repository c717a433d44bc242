"""LayerNorm over a whole (features, d1, d2) slab per sample, in three passes of Triton.

A row here is millions of elements, far more than one program holds, so each row is cut into
CHUNK-sized pieces: pass 1 sums every piece; pass 2 sums the squared deviations from the mean
(which every program rebuilds from the row's partial sums: two exact passes, no E[x^2]-E[x]^2
cancellation); pass 3 normalizes each piece and applies the elementwise weight and bias."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

CHUNK = 4096


@triton.jit
def _row_stat(part_ptr, row, n_chunks, BLOCK_C: tl.constexpr):
    c = tl.arange(0, BLOCK_C)
    return tl.sum(tl.load(part_ptr + row * n_chunks + c, mask=c < n_chunks, other=0.0), axis=0)


@triton.jit
def sum_kernel(x_ptr, part_ptr, n, n_chunks, CHUNK: tl.constexpr):
    row, chunk = tl.program_id(0), tl.program_id(1)
    offs = chunk * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    tl.store(part_ptr + row * n_chunks + chunk, tl.sum(x, axis=0))


@triton.jit
def sq_dev_kernel(x_ptr, sum_ptr, part_ptr, n, n_chunks, CHUNK: tl.constexpr, BLOCK_C: tl.constexpr):
    row, chunk = tl.program_id(0), tl.program_id(1)
    mean = _row_stat(sum_ptr, row, n_chunks, BLOCK_C) / n
    offs = chunk * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    d = tl.where(offs < n, x - mean, 0.0)
    tl.store(part_ptr + row * n_chunks + chunk, tl.sum(d * d, axis=0))


@triton.jit
def normalize_kernel(x_ptr, w_ptr, b_ptr, y_ptr, sum_ptr, sq_ptr, n, n_chunks, eps,
                     CHUNK: tl.constexpr, BLOCK_C: tl.constexpr):
    row, chunk = tl.program_id(0), tl.program_id(1)
    mean = _row_stat(sum_ptr, row, n_chunks, BLOCK_C) / n
    rstd = 1.0 / tl.sqrt(_row_stat(sq_ptr, row, n_chunks, BLOCK_C) / n + eps)
    offs = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * n + offs, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # holds weight, bias and eps only

    def forward(self, x):
        x = x.contiguous()
        n = self.ln.weight.numel()
        rows = x.numel() // n
        n_chunks = triton.cdiv(n, CHUNK)
        block_c = triton.next_power_of_2(n_chunks)
        sums = torch.empty((rows, n_chunks), device=x.device, dtype=torch.float32)
        sq = torch.empty_like(sums)
        y = torch.empty_like(x)
        grid = (rows, n_chunks)
        sum_kernel[grid](x, sums, n, n_chunks, CHUNK=CHUNK, num_warps=8)
        sq_dev_kernel[grid](x, sums, sq, n, n_chunks, CHUNK=CHUNK, BLOCK_C=block_c, num_warps=8)
        normalize_kernel[grid](x, self.ln.weight, self.ln.bias, y, sums, sq, n, n_chunks, self.ln.eps,
                               CHUNK=CHUNK, BLOCK_C=block_c, num_warps=8)
        return y
