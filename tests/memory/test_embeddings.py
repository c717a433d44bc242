"""Embeddings: the structural summary, the kernel excerpt, and the cache."""

import numpy as np

from skillbase.memory.documents import ATTEMPT_MAX_TOKENS, attempt_doc
from skillbase.memory.embeddings import kernel_excerpt, summarize_source
from memory_factories import MATMUL_SRC, SOFTMAX_SRC, attempt

CUDA_SRC = '''import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
// row sum with warp shuffles
__global__ void __launch_bounds__(256) row_sum(const float* __restrict__ x, float* y, int n) {
    __shared__ float partial[32];
    float4 v = reinterpret_cast<const float4*>(x)[threadIdx.x];
    float acc = v.x + v.y + v.z + v.w;
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, off);
    if (threadIdx.x == 0) atomicAdd(y + blockIdx.x, acc);
}
"""
ext = load_inline(name="row_sum", cpp_sources="", cuda_sources=cuda_src, functions=["run"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.run(x)
'''


def test_summary_names_the_structure():
    s = summarize_source(SOFTMAX_SRC, family="softmax")
    assert s.startswith("triton softmax kernel softmax_kernel:")
    for feature in ("1-D grid", "masked loads", "tl.sum reduction", "tl.max reduction", "1 kernel"):
        assert feature in s
    m = summarize_source(MATMUL_SRC)
    for feature in ("2-D grid", "loop inside the kernel", "tl.dot tensor cores", "fp32 accumulation"):
        assert feature in m
    c = summarize_source(CUDA_SRC)
    assert c.startswith("cuda kernel row_sum:")
    for feature in ("warp shuffles", "shared memory", "atomics", "16-byte vector access"):
        assert feature in c
    assert summarize_source("not a kernel at all (") .endswith("0 kernels")


def test_excerpt_keeps_the_kernel_body_only():
    e = kernel_excerpt(SOFTMAX_SRC)
    assert e.startswith("@triton.jit\ndef softmax_kernel(")
    assert "import" not in e and "One program per row" not in e and "class ModelNew" not in e
    assert "tl.store(" in e
    c = kernel_excerpt(CUDA_SRC)
    assert c.startswith("__global__") and "__shfl_xor_sync" in c and "row sum with warp" not in c


def test_attempt_text_puts_summary_before_code():
    doc = attempt_doc(attempt(0, techniques=("online-softmax",), notes="fused the two passes"))
    head, code = doc.text.split("\n", 1)
    assert "row_softmax (softmax:fp32:large), correct, 2.00x vs eager, memory-bound." in head
    assert "techniques: online-softmax." in head and "fused the two passes" in head
    assert code.startswith("@triton.jit") and doc.max_tokens == ATTEMPT_MAX_TOKENS
    assert doc.metadata["techniques"] == ["online-softmax"] and doc.metadata["speedup"] == 2.0


def test_embeddings_are_unit_vectors_and_cached(embedder, tmp_path):
    e = embedder.for_cache(tmp_path / "cache.sqlite3")
    before = e.computed
    v = e.embed(["online softmax reads the row once", "split-K for skinny matmuls"])
    assert v.shape == (2, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert e.computed == before + 2
    again = embedder.for_cache(tmp_path / "cache.sqlite3")  # another process's view of the same cache
    assert np.array_equal(again.embed(["split-K for skinny matmuls"])[0], v[1])
    assert again.computed == before + 2, "unchanged text is never embedded twice"
    short = e.embed(["split-K for skinny matmuls"], max_tokens=4)  # another token limit is another entry
    assert e.computed == before + 3 and not np.array_equal(short[0], v[1])
    similar = float(v[0] @ e.embed_one("single-pass softmax over a row"))
    unrelated = float(v[1] @ e.embed_one("single-pass softmax over a row"))
    assert similar > unrelated
