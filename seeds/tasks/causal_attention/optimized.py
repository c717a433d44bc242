"""Causal attention, optimized: skip blocks above the diagonal, masks only on it, exp2, heaviest blocks first, autotuned.

- Causal block skipping: a query block only visits key blocks up to its own
  diagonal; blocks entirely above it are never loaded or computed, about half
  of all blocks at long sequence lengths.
- Two stages per program: the key blocks strictly below the diagonal need no
  mask at all (every key there precedes every query of the block, and lies
  inside the sequence), only the BLOCK_M / BLOCK_N blocks on the diagonal
  apply the causal mask.
- exp2 with the softmax scale and log2(e) folded into one multiplier: the
  SFU evaluates 2^x natively.
- Query blocks are launched longest first (the last blocks of the sequence do
  the most work), so the short ones fill the tail of the grid instead of the
  long ones running alone at the end. Heads vary fastest in launch order.
- Tile sizes, warps and pipeline depth are autotuned on (S, HEAD_DIM).
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _prune_configs(configs, named_args, **kwargs):
    """Drop configs whose fp32 accumulator needs more than 64 registers per thread (they
    spill at HEAD_DIM=128); off the GPU (the Triton interpreter) keep only the first."""
    head_dim = kwargs["HEAD_DIM"]
    fits = [c for c in configs if c.kwargs["BLOCK_M"] * head_dim <= 64 * 32 * c.num_warps]
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in named_args.values())
    return fits if on_gpu else fits[:1]


@triton.jit
def _attend(acc, l_i, m_i, q, k_head, v_head, S, offs_m, lo, hi, qk_scale,
            BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, ON_DIAGONAL: tl.constexpr):
    offs_n = lo + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kt_ptrs = k_head + offs_n[None, :] * HEAD_DIM + offs_d[:, None]  # K^T block: [HEAD_DIM, BLOCK_N]
    v_ptrs = v_head + offs_n[:, None] * HEAD_DIM + offs_d[None, :]  # V block: [BLOCK_N, HEAD_DIM]
    for start_n in range(lo, hi, BLOCK_N):
        if ON_DIAGONAL:
            # Diagonal blocks can reach past the end of the sequence: load
            # zeros there. The causal mask hides those keys, since each lies
            # after every valid query.
            in_seq = (start_n + tl.arange(0, BLOCK_N)) < S
            kt = tl.load(kt_ptrs, mask=in_seq[None, :], other=0.0)
            qk = tl.dot(q, kt)
            causal = offs_m[:, None] >= (start_n + tl.arange(0, BLOCK_N))[None, :]
            # -inf, not a large finite constant: scores have no bound (fp16 inputs in the thousands
            # score past 1e6), and a finite mask lets such a future key through. Every row sees key
            # `diag` in its first diagonal block, so its max is finite from there on.
            qk = tl.where(causal, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, axis=1))
            qk -= m_new[:, None]
        else:
            # Below the diagonal every key precedes every query of the block
            # and lies inside the sequence: no mask at all.
            kt = tl.load(kt_ptrs)
            qk = tl.dot(q, kt)
            m_new = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)
            qk = qk * qk_scale - m_new[:, None]
        p = tl.exp2(qk)
        # Rescale what was accumulated under the old max (0 on the first block).
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if ON_DIAGONAL:
            v = tl.load(v_ptrs, mask=in_seq[:, None], other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
        kt_ptrs += BLOCK_N * HEAD_DIM
        v_ptrs += BLOCK_N * HEAD_DIM
    return acc, l_i, m_i


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 32}, num_warps=4, num_stages=4),
    ],
    key=["S", "HEAD_DIM"],
    prune_configs_by={"early_config_prune": _prune_configs},
)
@triton.jit
def causal_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, qk_scale,
                            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(axis=0)
    # Longest first: program 0 of axis 1 takes the last query block.
    start_m = tl.num_programs(axis=1) - 1 - tl.program_id(axis=1)
    head = bh.to(tl.int64) * S * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    # Query rows past S load zeros; their results are never stored.
    q = tl.load(q_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    diag = start_m * BLOCK_M
    # Stage 1: key blocks strictly below the diagonal, unmasked.
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptr + head, v_ptr + head, S, offs_m, 0, diag, qk_scale,
                            BLOCK_N, HEAD_DIM, False)
    # Stage 2: the BLOCK_M / BLOCK_N key blocks on the diagonal, masked.
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_ptr + head, v_ptr + head, S, offs_m, diag, diag + BLOCK_M,
                            qk_scale, BLOCK_N, HEAD_DIM, True)

    out = acc / l_i[:, None]
    tl.store(o_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=offs_m[:, None] < S)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        B, H, S, D = q.shape
        out = torch.empty_like(q)
        qk_scale = 1.0 / math.sqrt(D) * 1.4426950408889634  # softmax scale and log2(e) in one multiplier
        grid = lambda meta: (B * H, triton.cdiv(S, meta["BLOCK_M"]))
        causal_attention_kernel[grid](q, k, v, out, S, qk_scale, HEAD_DIM=D)
        return out
