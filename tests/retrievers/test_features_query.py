"""Static analysis of candidates and query derivation from each input kind."""

from __future__ import annotations

import pytest

from retriever_factories import task_info
from skillbase.retrievers.features import analyze_source, code_features
from skillbase.retrievers.query import MAX_TEXT_CHARS, build_query
from skillbase.errors import InvalidInput
from skillbase.models import BenchReport, Hardware, Roofline

TRITON_MATMUL = '''import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BK": 32}, num_stages=3, num_warps=4)], key=["K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    rm = (pid // 8) * BM + tl.arange(0, BM)
    rn = (pid % 8) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        c = torch.empty((a.shape[0], b.shape[1]), device=a.device)
        matmul_kernel[(64,)](a, b, c, a.shape[0], b.shape[1], a.shape[1], BM=64, BN=64)
        return c
'''

TRITON_SOFTMAX_TWO_KERNELS = '''import torch
import triton
import triton.language as tl


@triton.jit
def row_max(x_ptr, m_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf"))
    tl.store(m_ptr + row, tl.max(x, axis=0))


@triton.jit
def normalize(x_ptr, m_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf"))
    e = tl.exp(x - tl.load(m_ptr + row))
    tl.store(y_ptr + row * n + cols, e / tl.sum(e, axis=0), mask=cols < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        m = torch.empty(x.shape[0], device=x.device)
        y = torch.empty_like(x)
        row_max[(x.shape[0],)](x, m, x.shape[1], BLOCK=4096)
        normalize[(x.shape[0],)](x, m, y, x.shape[1], BLOCK=4096)
        return y
'''

CUDA_REDUCTION = r'''import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = """
__global__ void row_sum(const float4* __restrict__ x, float* out, int n4) {
    __shared__ float partial[32];
    float acc = 0.f;
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
        float4 v = x[blockIdx.x * n4 + i];
        acc += v.x + v.y + v.z + v.w;
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(out + blockIdx.x, acc);
}
"""
module = load_inline(name="row_sum", cpp_sources="", cuda_sources=CUDA_SRC, functions=["row_sum"])
'''


def test_triton_matmul_features():
    a = analyze_source(TRITON_MATMUL)
    f = set(a.code.features)
    assert a.code.language == "triton" and a.code.parse_error is None
    assert {"k_loop", "tl_dot", "tensor_cores", "masked_access", "autotune"} <= f
    assert "atomics" not in f and "shared_memory" not in f
    assert a.code.kernels == ["matmul_kernel"]
    assert "tl.dot" in a.code.identifiers
    assert "matmul_kernel" in a.summary and "loop" in a.summary


def test_two_launches_make_a_multi_kernel_reduction():
    f = set(code_features(TRITON_SOFTMAX_TWO_KERNELS).features)
    assert {"multi_kernel", "reduction", "masked_access"} <= f
    assert "tl_dot" not in f and "k_loop" not in f


def test_cuda_source_features_come_from_the_inline_string():
    c = code_features(CUDA_REDUCTION)
    assert c.language == "cuda"
    assert {"shared_memory", "warp_shuffle", "atomics", "vectorized", "reduction"} <= set(c.features)
    assert "tl_dot" not in c.features


@pytest.mark.parametrize("bad", ["def broken(:\n    tl.dot(a, b)\n", "", "   \n", b"bytes".decode() + "\x00(("])
def test_code_that_does_not_parse_degrades_with_a_reason(bad):
    c = code_features(bad)
    assert c.parse_error  # said, never raised


def test_unparsable_triton_still_yields_pattern_features():
    c = code_features("import triton\n@triton.jit\ndef k(a, b):\n    acc = tl.dot(a, b\n")
    assert c.parse_error and "tl_dot" in c.features


def test_query_from_a_task_estimates_its_bottleneck():
    q = build_query(task=task_info("softmax_x", "softmax"), arch="sm_90")
    assert (q.family, q.dtype, q.bottleneck, q.bottleneck_from) == ("softmax", "fp32", "memory", "task")
    assert q.task_name == "softmax_x" and "softmax" in q.text and q.inputs == ("task",)


def test_query_from_a_report_takes_its_measured_bottleneck_and_arch():
    report = BenchReport(
        task="matmul_x", task_signature="matmul:fp16:large", solution_hash="ab" * 8, device="cuda:0",
        hardware=Hardware(kind="cuda", name="NVIDIA A100-SXM4-80GB", arch="sm_80"), verdict="correct", message="ok",
        roofline=Roofline(bytes_moved=1, flops=1, achieved_gbps=1.0, achieved_tflops=1.0, peak_gbps=None,
                          peak_tflops=None, pct_sol=42.0, bound="compute"),
    )
    q = build_query(report=report)
    assert (q.family, q.bottleneck, q.bottleneck_from, q.arch, q.pct_sol) == ("matmul", "compute", "report", "sm_80", 42.0)
    assert "42% of speed of light" in q.text


def test_query_from_source_and_words():
    q = build_query(text="my matmul is slow, should I raise num_stages?", source=TRITON_MATMUL)
    assert q.family == "matmul" and "tl_dot" in q.features
    assert "tensor-cores" in q.applied and "autotuning" in q.applied  # the code already does these
    assert "num_stages" in q.lexical and "tl.dot" in q.lexical


def test_empty_query_is_a_clear_error_and_huge_text_is_cut():
    with pytest.raises(InvalidInput, match="nothing to recall"):
        build_query(text="   ", source="")
    with pytest.raises(InvalidInput):
        build_query(text=123)
    with pytest.raises(InvalidInput, match="unknown architecture"):
        build_query(text="softmax", arch="hopper-ish")
    q = build_query(text="softmax " * 5000)
    assert len(q.words) == MAX_TEXT_CHARS and any("only its first" in n for n in q.notes)


def test_unparsable_source_gives_a_degraded_query():
    q = build_query(source="def broken(:\n  tl.load(x_ptr + offs, mask=m)\n", text="row softmax")
    assert q.code is not None and q.code.parse_error
    assert any("does not parse" in n for n in q.notes)
    assert q.family == "softmax"
