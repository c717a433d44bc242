"""Memory benchmark: the concurrency, crash and scale bars of skillbase's memory.

    python benchmarks/memory_bench.py                                 # the full bar (takes a while)
    python benchmarks/memory_bench.py --attempts 5000 --experiences 1000 --per-writer 50 --reps 1
    python benchmarks/memory_bench.py --only scale --out /tmp/memory.json   # also writes /tmp/memory.md

Concurrency: W processes each record N attempts with a lesson (one call per
record, as an agent would) into one fresh store; afterwards every process
checks that all W*N of each are in the ledger, the index and the graph, and
finds a sample of every writer's lessons by meaning. Repeated --reps times, on
the embedded chroma and on a `chroma run` server.

Crash: a writer recording batches (one transaction each) is killed with
SIGKILL at a random moment, --kills times; after each kill a fresh process
checks every committed record is there, no half batch is visible, and the
index caught up by itself.

Scale: a synthetic but realistic corpus (14 kernel families, ~400 tasks,
lineages of 3-15 steps, Triton and CUDA sources of 1.5-5 KB, gains drawn per
family and technique) is ingested in batches; reported are ingest records/s
(embedding included) next to the embedding model alone on a sample of the same
texts, filtered top-10 query latency, graph query latency, snapshot load,
cold open and disk use.

``generate(n_attempts, n_experiences, seed)`` is importable for other
benchmarks that need a large realistic store.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from skillbase.config import Settings  # noqa: E402
from skillbase.models import (  # noqa: E402
    Attempt, BenchReport, Check, CorrectnessReport, Experience, Hardware, Roofline, TimingStats, Tolerance,
    content_hash, new_id,
)

# ---------------------------------------------------------------------------
# A realistic synthetic corpus
# ---------------------------------------------------------------------------

HARDWARE = {
    "sm_90": Hardware(kind="cuda", name="NVIDIA H100 80GB HBM3", arch="sm_90", sm_count=132, peak_gbps=3000.0,
                      peak_tflops={"bf16": 790.0, "fp32": 60.0}),
    "sm_80": Hardware(kind="cuda", name="NVIDIA A100-SXM4-80GB", arch="sm_80", sm_count=108, peak_gbps=1800.0,
                      peak_tflops={"bf16": 290.0, "fp32": 19.0}),
    "sm_89": Hardware(kind="cuda", name="NVIDIA L40S", arch="sm_89", sm_count=142, peak_gbps=800.0,
                      peak_tflops={"bf16": 360.0, "fp32": 90.0}),
}
ARCH_WEIGHTS = {"sm_90": 0.7, "sm_80": 0.2, "sm_89": 0.1}

FAMILY_PLAN = {
    # family: (kind of kernel, typical bound, techniques that apply)
    "elementwise": ("pointwise", "memory", ["vectorized-access", "block-size-tuning", "num-warps-tuning", "cache-hints",
                                            "grid-stride-loop", "masking", "index-precompute", "autotuning"]),
    "fused_elementwise": ("pointwise", "memory", ["elementwise-fusion", "vectorized-access", "fast-math", "block-size-tuning",
                                                  "recompute", "cache-hints", "launch-overhead-reduction"]),
    "softmax": ("row", "memory", ["online-softmax", "one-pass-row-reduction", "vectorized-access", "num-warps-tuning",
                                  "fast-math", "block-size-tuning", "persistent-kernel", "cache-hints"]),
    "norm": ("row", "memory", ["welford", "one-pass-row-reduction", "vectorized-access", "num-warps-tuning",
                               "epilogue-fusion", "split-reduction", "block-size-tuning"]),
    "reduction": ("row", "memory", ["block-reduction", "split-reduction", "two-pass-reduction", "atomics",
                                    "vectorized-access", "loop-unrolling", "persistent-kernel"]),
    "scan": ("row", "latency", ["block-reduction", "two-pass-reduction", "loop-unrolling", "num-warps-tuning",
                                "persistent-kernel"]),
    "loss": ("row", "memory", ["online-softmax", "algebraic-simplification", "one-pass-row-reduction",
                               "split-reduction", "fast-math", "recompute"]),
    "matmul": ("tile", "compute", ["tensor-cores", "smem-tiling", "program-swizzle", "software-pipelining",
                                   "autotuning", "split-k", "persistent-kernel", "tma", "warp-specialization",
                                   "register-tiling", "mixed-precision"]),
    "matmul_epilogue": ("tile", "compute", ["epilogue-fusion", "tensor-cores", "program-swizzle", "software-pipelining",
                                            "autotuning", "mixed-precision", "fast-math"]),
    "attention": ("tile", "compute", ["flash-attention", "causal-block-skipping", "tensor-cores", "software-pipelining",
                                      "online-softmax", "warp-specialization", "tma", "fast-math"]),
    "conv": ("tile", "compute", ["im2col", "tensor-cores", "layout-change", "smem-tiling", "autotuning",
                                 "library-call", "mixed-precision"]),
    "layout": ("tile", "memory", ["smem-transpose", "coalesced-access", "bank-conflict-avoidance", "vectorized-access",
                                  "block-size-tuning", "layout-change"]),
    "pooling": ("tile", "memory", ["coalesced-access", "vectorized-access", "layout-change", "block-size-tuning",
                                   "masking"]),
    "other": ("pointwise", "latency", ["launch-overhead-reduction", "cuda-graphs", "persistent-kernel",
                                       "block-size-tuning", "library-call"]),
}
FAILURES = ["incorrect", "compile_error", "runtime_error", "rejected", "timeout"]
AGENTS = ["claude-sonnet-4-5", "claude-opus-4-1", "reference-agent", "human"]
REASONS = {
    "memory": ["the row was read from DRAM twice", "stores were not coalesced across the warp",
               "each program moved too few bytes to hide latency", "loads were 4 bytes instead of 16",
               "the intermediate tensor round-tripped through HBM"],
    "compute": ["the inner product ran on CUDA cores instead of tensor cores", "tiles were too small to reuse operands",
                "the K loop stalled on global loads", "L2 reuse between neighbouring tiles was poor",
                "the grid left SMs idle in the last wave"],
    "latency": ["too few programs were in flight", "the launch cost dominated the tiny kernel",
                "a serial dependency chain limited throughput", "occupancy was capped by registers"],
}


def _triton_source(rng: random.Random, family: str, kind: str, techniques: list[str], variant: int) -> str:
    block = rng.choice([128, 256, 512, 1024, 2048, 4096])
    warps = rng.choice([2, 4, 8, 16])
    lines = [
        '"""Candidate for {f} (variant {v}). Generated for the memory benchmark."""'.format(f=family, v=variant),
        "import torch", "import triton", "import triton.language as tl", "",
    ]
    if "autotuning" in techniques:
        cfgs = ", ".join(f"triton.Config({{'BLOCK': {b}}}, num_warps={w})" for b, w in
                         rng.sample([(128, 2), (256, 4), (512, 4), (1024, 8), (2048, 8), (4096, 16)], 4))
        lines += [f"@triton.autotune(configs=[{cfgs}], key=['n_cols'])"]
    lines += ["@triton.jit"]
    hint = "    offs = tl.max_contiguous(tl.multiple_of(offs, 16), 16)" if "vectorized-access" in techniques else ""
    evict = ", eviction_policy='evict_first'" if "cache-hints" in techniques else ""
    if kind == "pointwise":
        op = rng.choice(["tl.maximum(x, 0.0)", "x * tl.sigmoid(1.702 * x)", "0.5 * x * (1 + tl.erf(x * 0.7071))",
                         "tl.where(x > 0, x, 0.01 * x)", "x * scale + bias"])
        lines += [
            "def kernel(x_ptr, y_ptr, n_elements, scale, bias, BLOCK: tl.constexpr):",
            "    # one program per BLOCK contiguous elements; the tail is masked",
            "    pid = tl.program_id(axis=0)",
            "    offs = pid * BLOCK + tl.arange(0, BLOCK)", hint,
            "    mask = offs < n_elements",
            f"    x = tl.load(x_ptr + offs, mask=mask, other=0.0{evict})",
            f"    y = {op}",
            "    tl.store(y_ptr + offs, y, mask=mask)",
        ]
        launch = "kernel[(triton.cdiv(n, BLOCK),)](x, y, n, 1.0, 0.0, BLOCK=BLOCK)"
    elif kind == "row":
        online = "online-softmax" in techniques or "welford" in techniques
        lines += [
            "def kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):",
            "    # one program per row",
            "    row = tl.program_id(0)",
            "    base = x_ptr + row * stride",
        ]
        if online:
            lines += [
                "    m = tl.full([BLOCK], -float('inf'), tl.float32)",
                "    s = tl.zeros([BLOCK], dtype=tl.float32)",
                "    for start in range(0, n_cols, BLOCK):",
                "        offs = start + tl.arange(0, BLOCK)",
                f"        x = tl.load(base + offs, mask=offs < n_cols, other=-float('inf'){evict}).to(tl.float32)",
                "        m_new = tl.maximum(m, x)",
                "        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)",
                "        m = m_new",
                "    row_max = tl.max(m, 0)",
                "    total = tl.sum(s * tl.exp(m - row_max), 0)",
            ]
        else:
            lines += [
                "    offs = tl.arange(0, BLOCK)", hint,
                f"    x = tl.load(base + offs, mask=offs < n_cols, other=-float('inf'){evict}).to(tl.float32)",
                "    row_max = tl.max(x, axis=0)",
                "    total = tl.sum(tl.exp(x - row_max), axis=0)",
            ]
        lines += [
            "    for start in range(0, n_cols, BLOCK):",
            "        offs = start + tl.arange(0, BLOCK)",
            "        x = tl.load(base + offs, mask=offs < n_cols, other=0.0).to(tl.float32)",
            "        tl.store(y_ptr + row * stride + offs, tl.exp(x - row_max) / total, mask=offs < n_cols)",
        ]
        launch = "kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=BLOCK)"
    else:
        bm, bn, bk = rng.choice([(64, 64, 32), (128, 128, 32), (128, 256, 64), (64, 128, 64)])
        lines += [
            "def kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,",
            "           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):",
            "    pid = tl.program_id(axis=0)",
        ]
        if "program-swizzle" in techniques:
            lines += [
                "    num_m = tl.cdiv(M, BM)",
                "    num_n = tl.cdiv(N, BN)",
                "    group = GROUP_M * num_n",
                "    first_m = (pid // group) * GROUP_M",
                "    size_m = min(num_m - first_m, GROUP_M)",
                "    pid_m = first_m + (pid % group) % size_m",
                "    pid_n = (pid % group) // size_m",
            ]
        else:
            lines += ["    pid_m = pid // tl.cdiv(N, BN)", "    pid_n = pid % tl.cdiv(N, BN)"]
        dot = "acc += tl.dot(a, b)" if "tensor-cores" in techniques or rng.random() < 0.5 else \
            "acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)"
        lines += [
            "    rm = pid_m * BM + tl.arange(0, BM)",
            "    rn = pid_n * BN + tl.arange(0, BN)",
            "    rk = tl.arange(0, BK)",
            "    acc = tl.zeros((BM, BN), dtype=tl.float32)",
            "    for k in range(0, tl.cdiv(K, BK)):",
            "        a = tl.load(a_ptr + rm[:, None] * sam + (k * BK + rk)[None, :] * sak,",
            "                    mask=(rm[:, None] < M) & ((k * BK + rk)[None, :] < K), other=0.0)",
            "        b = tl.load(b_ptr + (k * BK + rk)[:, None] * sbk + rn[None, :] * sbn,",
            "                    mask=((k * BK + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)",
            f"        {dot}",
        ]
        if "epilogue-fusion" in techniques:
            lines += ["    acc = acc * tl.sigmoid(1.702 * acc)  # fused GELU-like epilogue"]
        lines += [
            "    c = acc.to(c_ptr.dtype.element_ty)",
            "    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))",
        ]
        launch = (f"kernel[(triton.cdiv(M, {bm}) * triton.cdiv(N, {bn}),)](a, b, c, M, N, K, *a.stride(), *b.stride(), "
                  f"*c.stride(), BM={bm}, BN={bn}, BK={bk}, GROUP_M=8, num_warps={warps}, num_stages={rng.choice([2, 3, 4])})")
    lines += [
        "", "",
        "class ModelNew(torch.nn.Module):",
        f'    """{family}: {", ".join(techniques) or "baseline"}."""',
        "",
        "    def __init__(self, *args):",
        "        super().__init__()",
        "",
        "    def forward(self, *inputs):",
        "        x = inputs[0].contiguous()",
        "        a, b = (inputs + (inputs[0],))[:2]",
        "        M, K = a.shape[0], a.shape[-1]",
        "        N = b.shape[-1]",
        "        n = x.numel()",
        "        y = torch.empty_like(x)",
        "        c = torch.empty((M, N), device=a.device, dtype=a.dtype)",
        f"        BLOCK = {block}",
        f"        {launch}",
        "        return y if y.numel() else c",
    ]
    pad = rng.randint(0, 40)  # realistic length spread: comments and helper code vary a lot
    lines += ["", ""] + [f"# tuning note {i}: measured configuration {rng.randint(1, 99)} for shape bucket {i % 7}"
                         for i in range(pad)]
    return "\n".join(line for line in lines if line is not None) + "\n"


def _cuda_source(rng: random.Random, family: str, techniques: list[str], variant: int) -> str:
    threads = rng.choice([128, 256, 512])
    body = ["    int i = blockIdx.x * blockDim.x + threadIdx.x;"]
    if "vectorized-access" in techniques:
        body += ["    float4 v = reinterpret_cast<const float4*>(x)[i];",
                 "    v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);",
                 "    if (i < n / 4) reinterpret_cast<float4*>(y)[i] = v;"]
    else:
        body += ["    if (i < n) y[i] = fmaxf(x[i], 0.f);"]
    if "block-reduction" in techniques or "smem-tiling" in techniques:
        body += ["    __shared__ float tile[32][33];  // padded against bank conflicts",
                 "    float acc = 0.f;",
                 "    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, off);"]
    src = "\n".join([
        f"// {family} kernel, variant {variant}",
        "#include <cuda_runtime.h>",
        f"__global__ void __launch_bounds__({threads}) {family}_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {{",
        *body,
        "}",
        "torch::Tensor run(torch::Tensor x) {",
        "    auto y = torch::empty_like(x);",
        f"    int threads = {threads};",
        "    int blocks = (x.numel() + threads - 1) / threads;",
        f"    {family}_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());",
        "    return y;",
        "}",
    ])
    return "\n".join([
        "import torch",
        "from torch.utils.cpp_extension import load_inline",
        "",
        f'cuda_src = r"""\n{src}\n"""',
        'cpp_src = "torch::Tensor run(torch::Tensor x);"',
        f'ext = load_inline(name="{family}_{variant}", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["run"])',
        "",
        "",
        "class ModelNew(torch.nn.Module):",
        "    def forward(self, x):",
        "        return ext.run(x.contiguous())",
    ]) + "\n" + "\n".join(f"# build note {i}: -O3 --use_fast_math variant {rng.randint(1, 9)}" for i in range(rng.randint(0, 30))) + "\n"


class Corpus:
    """Deterministic generator of tasks, lineages and lessons."""

    def __init__(self, seed: int = 0, n_tasks: int = 400):
        self.rng = random.Random(seed)
        self.seed = seed
        fams = list(FAMILY_PLAN)
        self.tasks = []
        for i in range(n_tasks):
            fam = fams[i % len(fams)]
            dtype = self.rng.choice(["fp32", "fp16", "bf16"] if FAMILY_PLAN[fam][0] == "tile" else ["fp32", "fp16", "bf16", "fp32"])
            regime = self.rng.choice(["small", "medium", "large", "large"])
            self.tasks.append((f"{fam}_{i:03d}", fam, dtype, regime))
        # The "truth" the graph should recover: a mean log-gain per family and technique.
        self.effect = {(f, t): self.rng.gauss(0.15, 0.25) for f, plan in FAMILY_PLAN.items() for t in plan[2]}

    def _report(self, task, sig, source, ms, verdict, bound, arch, eager_ms) -> BenchReport:
        timing = None
        if ms is not None:
            timing = TimingStats(median_ms=ms, q1_ms=ms * 0.99, q3_ms=ms * 1.012, min_ms=ms * 0.985, max_ms=ms * 1.06,
                                 mean_ms=ms * 1.003, cv=0.012, ci_rel=0.006, n=self.rng.randint(50, 400),
                                 method="cuda events, L2 flushed, 4 input sets rotated")
        hw = HARDWARE[arch]
        return BenchReport(
            task=task, task_signature=sig, solution_hash=content_hash(source), language="triton", device="cuda:0",
            hardware=hw, verdict=verdict, message=verdict,
            correctness=CorrectnessReport(passed=verdict == "correct", trials=5, max_abs_error=2e-7 if verdict == "correct" else 0.3,
                                          tolerance=Tolerance(atol=1e-5, rtol=1e-5),
                                          checks=[Check(name=n, passed=True) for n in ("inputs_unmodified", "no_alias", "own_kernels")]),
            timing=timing, speedup_vs_eager=eager_ms / ms if ms else None,
            speedup_vs_compile=eager_ms * 0.8 / ms if ms else None,
            roofline=Roofline(bytes_moved=2 ** 27, flops=2 ** 30, achieved_gbps=min(2900.0, 2 ** 27 / ms / 1e6),
                              achieved_tflops=2 ** 30 / ms / 1e9, peak_gbps=hw.peak_gbps, peak_tflops=hw.peak_tflops["fp32"],
                              floor_ms=eager_ms * 0.1, pct_sol=min(99.0, 100 * eager_ms * 0.1 / ms), bound=bound) if ms else None,
            toolchain={"triton": "3.9.0", "torch": "2.13.0", "cuda": "13.0"}, wall_s=round(self.rng.uniform(2, 40), 2),
        )

    def sessions(self) -> Iterator[list[Attempt]]:
        """Lineages: one task, one GPU, 3-15 attempts, some branching."""
        n = 0
        while True:
            task, fam, dtype, regime = self.rng.choice(self.tasks)
            sig = f"{fam}:{dtype}:{regime}"
            kind, bound, techs = FAMILY_PLAN[fam]
            arch = self.rng.choices(list(ARCH_WEIGHTS), weights=list(ARCH_WEIGHTS.values()))[0]
            session, agent = new_id("ses"), self.rng.choice(AGENTS)
            eager = self.rng.uniform(0.05, 8.0)
            chain: list[Attempt] = []
            cuda = self.rng.random() < 0.2
            for step in range(self.rng.randint(3, 15)):
                n += 1
                good = [a for a in chain if a.verdict == "correct"]
                parent = (self.rng.choice(good) if self.rng.random() < 0.2 else good[-1]) if good else None
                step_techs = self.rng.sample(techs, self.rng.choice([1, 1, 2])) if step else []
                claimed = sorted(set(step_techs) | set(parent.techniques if parent else []))
                base_ms = parent.median_ms if parent else eager * self.rng.uniform(0.8, 2.5)
                fail = self.rng.random() < 0.22 and step > 0
                verdict = self.rng.choice(FAILURES) if fail else "correct"
                ms = None
                if verdict == "correct":
                    log_gain = sum(self.effect[fam, t] for t in step_techs) + self.rng.gauss(0, 0.15)
                    ms = round(base_ms / math.exp(log_gain), 5)
                src = _cuda_source(self.rng, fam, claimed, n) if cuda else _triton_source(self.rng, fam, kind, claimed, n)
                report = self._report(task, sig, src, ms, verdict, bound, arch, eager)
                a = Attempt(
                    task=task, task_signature=sig, family=fam, dtype=dtype, source=src, source_hash=content_hash(src),
                    language="cuda" if cuda else "triton", parent_id=parent.id if parent else None, techniques=claimed,
                    bench_report=report, verdict=verdict, median_ms=ms, speedup_vs_eager=report.speedup_vs_eager,
                    speedup_vs_compile=report.speedup_vs_compile, pct_sol=report.roofline.pct_sol if ms else None,
                    bottleneck=bound if ms else "unknown", hardware=HARDWARE[arch].key, arch=arch,
                    toolchain=report.toolchain, session=session, agent=agent,
                    notes=self.rng.choice(["", "", f"tried {', '.join(step_techs)}", "retry after a mask bug"]),
                )
                chain.append(a)
            yield chain

    def lesson(self, fam: str, dtype: str, regime: str, techs: list[str], gain: float | None, arch: str,
               before: str | None = None, after: str | None = None, task: str | None = None) -> Experience:
        bound = FAMILY_PLAN[fam][1]
        why = self.rng.choice(REASONS[bound])
        t = " and ".join(x.replace("-", " ") for x in techs)
        if gain is not None and gain > 1.02:
            text = self.rng.choice([
                f"On {fam} ({dtype}, {regime} shapes), {t} gave {gain:.2f}x on {arch} because {why}.",
                f"{t.capitalize()} paid off for {regime} {dtype} {fam}: {gain:.2f}x; before it, {why}.",
                f"For {fam} kernels that are {bound}-bound, apply {t}: {why}, and fixing it gave {gain:.2f}x on {arch}.",
            ])
        else:
            text = self.rng.choice([
                f"{t.capitalize()} did not help {fam} ({dtype}, {regime}) on {arch}; the real problem was that {why}.",
                f"Skip {t} for {regime} {fam}: no gain ({(gain or 1.0):.2f}x) on {arch} since {why}.",
            ])
        return Experience(
            title=text[:70], lesson=text, task=task, task_signature=f"{fam}:{dtype}:{regime}", family=fam, dtype=dtype,
            before_attempt=before, after_attempt=after, techniques=techs, gain=gain, bottleneck=bound, arch=arch,
            hardware=HARDWARE[arch].key, conditions=f"{dtype} {regime} shapes on {HARDWARE[arch].name}",
            source="measured" if after else self.rng.choice(["curated", "distilled", "agent"]),
        )


def generate(n_attempts: int, n_experiences: int, seed: int = 0, batch: int = 500) -> Iterator[tuple[list[Attempt], list[Experience]]]:
    """Batches of (attempts, experiences), parents always in an earlier or the
    same batch; experiences spread evenly over the attempts."""
    corpus = Corpus(seed)
    sessions = corpus.sessions()
    pending: list[Attempt] = []
    made_a = made_e = 0
    by_id: dict[str, Attempt] = {}
    while made_a < n_attempts:
        while len(pending) < batch:
            pending += next(sessions)
        take = pending[: min(batch, n_attempts - made_a)]
        pending = pending[len(take):]
        # A lineage cut at the batch edge keeps its tail for the next batch,
        # but a tail whose parent was never emitted becomes a root.
        take = [a if a.parent_id is None or a.parent_id in by_id or any(p.id == a.parent_id for p in take)
                else a.model_copy(update={"parent_id": None}) for a in take]
        made_a += len(take)
        want_e = round(n_experiences * made_a / n_attempts) - made_e
        exps = []
        for a in take:
            by_id[a.id] = a
        for _ in range(want_e):
            a = corpus.rng.choice(take)
            parent = by_id.get(a.parent_id) if a.parent_id else None
            fam, dtype, regime = a.task_signature.split(":")
            if parent is not None and a.verdict == "correct" and parent.median_ms and corpus.rng.random() < 0.6:
                step = [t for t in a.techniques if t not in parent.techniques] or a.techniques
                exps.append(corpus.lesson(fam, dtype, regime, step, parent.median_ms / a.median_ms, a.arch,
                                          parent.id, a.id, a.task))
            else:
                techs = corpus.rng.sample(FAMILY_PLAN[fam][2], corpus.rng.choice([1, 2]))
                gain = round(math.exp(sum(corpus.effect[fam, t] for t in techs) + corpus.rng.gauss(0, 0.2)), 3)
                exps.append(corpus.lesson(fam, dtype, regime, techs, gain if corpus.rng.random() < 0.8 else None,
                                          a.arch or "sm_90"))
        made_e += len(exps)
        if len(by_id) > 20_000:  # parents of later attempts are recent; keep memory bounded
            for k in list(by_id)[: len(by_id) - 10_000]:
                del by_id[k]
        yield take, exps


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation."""
    if not values:
        return float("nan")
    v = sorted(values)
    k = (len(v) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def disk(home: Path) -> dict[str, int]:
    """Bytes on disk per part of a store home."""
    return {"ledger": du(home / "ledger.sqlite3") + du(home / "ledger.sqlite3-wal"), "chroma": du(home / "chroma"),
            "graph_snapshot": du(home / "graph.json"), "embedding_cache": du(home / "cache"), "total": du(home)}


def start_chroma_server(workdir: Path) -> tuple[subprocess.Popen, str]:
    exe = Path(sys.executable).parent / "chroma"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(workdir / "chroma-server.log", "wb")
    proc = subprocess.Popen([str(exe), "run", "--path", str(workdir / "chroma-server"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as r:
                r.read()
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("chroma server did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def self_cmd(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------
# Concurrency
# ---------------------------------------------------------------------------


def writer_main(a: argparse.Namespace) -> None:
    """One writer process of the concurrency bar."""
    from skillbase.memory.documents import experience_text
    from skillbase.memory.store import Store

    settings = Settings.from_env(env={}, home=Path(a.home), chroma_url=a.url or None)
    store = Store.open(settings)
    out = Path(a.dir)
    pairs = []
    for atts, exps in generate(a.n, a.n, seed=1000 + a.writer, batch=a.n):
        pairs = list(zip(atts, exps))
    t0 = time.monotonic()
    for att, exp in pairs:
        store.record_attempt(att)
        store.record_experience(exp.model_copy(update={"session": f"writer-{a.writer}"}))
    wrote = time.monotonic() - t0
    # Each lesson is looked up by the text the index holds for it: the
    # templated synthetic lessons repeat up to 3 times word for word, and by
    # their lesson line alone a near twin (another gain, dtype or regime) can
    # outrank them, which says nothing about whether the record is indexed.
    (out / f"ids-{a.writer}.json").write_text(json.dumps({"attempts": [p[0].id for p in pairs],
                                                          "experiences": [p[1].id for p in pairs],
                                                          "lessons": [experience_text(store.ledger.validate_experience(p[1]))
                                                                      for p in pairs]}))
    (out / f"done-{a.writer}").write_text("ok")
    while len(list(out.glob("done-*"))) < a.writers:
        time.sleep(0.2)
    t1 = time.monotonic()
    store.sync()
    rng = random.Random(a.writer)
    found = sampled = 0
    for w in range(a.writers):
        ids = json.loads((out / f"ids-{w}.json").read_text())
        for i in rng.sample(range(len(ids["experiences"])), min(a.sample, len(ids["experiences"]))):
            hits = store.search("experiences", ids["lessons"][i], k=5)
            found += any(h.id == ids["experiences"][i] for h in hits)
            sampled += 1
    stats = store.stats()
    graph = store.graph.counts()
    (out / f"result-{a.writer}.json").write_text(json.dumps({
        "writer": a.writer, "write_s": wrote, "verify_s": time.monotonic() - t1, "counts": stats.counts,
        "index_counts": stats.index_counts, "index_lag": stats.index_lag, "graph_attempts": graph.get("attempt", 0),
        "graph_experiences": graph.get("experience", 0), "sampled": sampled, "found": found,
        "query": "embedded text",
    }))
    store.close()


def run_concurrency(args, workdir: Path, url: str | None, reps_to_run=None, into: dict | None = None) -> dict:
    """Repetitions of the concurrency bar on one backend (``reps_to_run``:
    which repetitions, all by default), appended to ``into`` when given."""
    result = into or {"backend": "server" if url else "embedded", "writers": args.writers,
                      "per_writer": args.per_writer, "reps": []}
    reps = result["reps"]
    for rep in (reps_to_run if reps_to_run is not None else range(args.reps)):
        home, out = workdir / f"conc-{'server' if url else 'embedded'}-{rep}", workdir / f"conc-out-{rep}-{bool(url)}"
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        t0 = time.monotonic()
        procs = [subprocess.Popen(self_cmd("--role", "writer", "--home", str(home), "--url", url or "", "--writer", str(w),
                                           "--n", str(args.per_writer), "--writers", str(args.writers), "--dir", str(out),
                                           "--sample", str(args.sample)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for w in range(args.writers)]
        outputs = [p.communicate()[1].decode(errors="replace") for p in procs]
        errors = [err[-2000:] for p, err in zip(procs, outputs) if p.returncode != 0]
        bad = [p.returncode for p in procs if p.returncode != 0]
        wall = time.monotonic() - t0
        total = args.writers * args.per_writer
        results = [json.loads((out / f"result-{w}.json").read_text()) for w in range(args.writers)
                   if (out / f"result-{w}.json").exists()]
        expected = {k: [] for k in ("attempts", "experiences")}
        for w in range(args.writers):
            ids = json.loads((out / f"ids-{w}.json").read_text())
            for k in expected:
                expected[k] += ids[k]
        from skillbase.memory.ledger import Ledger

        led = Ledger.open(home / "ledger.sqlite3")
        present_a = len(led.get_attempts(expected["attempts"]))
        present_e = len(led.get_experiences(expected["experiences"]))
        led.close()
        ok = (not bad and len(results) == args.writers and present_a == total and present_e == total
              and all(r["counts"]["attempts"] == total and r["index_counts"]["attempts"] == total
                      and r["index_counts"]["experiences"] == total and r["index_lag"] == 0
                      and r["graph_attempts"] == total and r["graph_experiences"] == total
                      and r["found"] == r["sampled"] for r in results))
        rep_result = {
            "rep": rep, "ok": ok, "wall_s": round(wall, 1), "attempts_expected": total, "attempts_in_ledger": present_a,
            "experiences_in_ledger": present_e, "lost": 2 * total - present_a - present_e,
            "write_phase_s": round(max(r["write_s"] for r in results), 1) if results else None,
            "records_per_s": round(2 * total / max(r["write_s"] for r in results), 1) if results else None,
            "searched": sum(r["sampled"] for r in results), "found": sum(r["found"] for r in results),
            "search_query": results[0].get("query", "lesson line") if results else None,
            "index_counts_per_process": [r["index_counts"] for r in results],
            "graph_attempts_per_process": [r["graph_attempts"] for r in results],
            "errors": errors,
        }
        log(f"concurrency {'server' if url else 'embedded'} rep {rep}: ok={ok} lost={rep_result['lost']} "
            f"wall {wall:.0f} s, {rep_result['records_per_s']} records/s during writing, "
            f"found {rep_result['found']}/{rep_result['searched']} lessons by meaning")
        reps.append(rep_result)
        shutil.rmtree(out, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    result.update(all_ok=all(r["ok"] for r in reps), total_lost=sum(r["lost"] for r in reps))
    return result


# ---------------------------------------------------------------------------
# Crash
# ---------------------------------------------------------------------------


def crasher_main(a: argparse.Namespace) -> None:
    from skillbase.memory.store import Store

    store = Store.open(Settings.from_env(env={}, home=Path(a.home), chroma_url=a.url or None))
    for atts, exps in generate(10**9, 10**9, seed=a.writer, batch=a.n):
        stored = store.record_attempts(atts)
        print("committed attempt", *[x.id for x in stored], flush=True)
        stored = store.record_experiences(exps)
        print("committed experience", *[x.id for x in stored], flush=True)


def run_crash(args, workdir: Path) -> dict:
    from skillbase.memory.store import Store

    home = workdir / "crash"
    shutil.rmtree(home, ignore_errors=True)
    rounds = []
    rng = random.Random(7)
    for k in range(args.kills):
        proc = subprocess.Popen(self_cmd("--role", "crasher", "--home", str(home), "--url", "", "--writer", str(k),
                                         "--n", "50"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        committed = {"attempt": [], "experience": []}
        lines = 0
        target = rng.randint(2, 6)
        while lines < target:
            line = proc.stdout.readline()
            if not line:
                break
            _, kind, *ids = line.split()
            committed[kind] += ids
            lines += 1
        delay = rng.uniform(0.0, 2.0)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for line in proc.stdout.read().splitlines():
            _, kind, *ids = line.split()
            committed[kind] += ids
        t0 = time.monotonic()
        store = Store.open(Settings.from_env(env={}, home=home))
        reopen = time.monotonic() - t0
        stats = store.stats()
        c = stats.counts
        r = {
            "kill": k, "killed_after_s_into_batch": round(delay, 2), "attempts": c["attempts"], "experiences": c["experiences"],
            "committed_present": len(store.ledger.get_attempts(committed["attempt"])) == len(committed["attempt"])
            and len(store.ledger.get_experiences(committed["experience"])) == len(committed["experience"]),
            "no_half_batch": c["attempts"] % 50 == 0 and c["experiences"] % 50 == 0,
            "index_caught_up": stats.index_lag == 0 and stats.index_counts["attempts"] == c["attempts"]
            and stats.index_counts["experiences"] == c["experiences"],
            "graph_matches": store.graph.counts().get("attempt", 0) == c["attempts"],
            "reopen_s": round(reopen, 2), "index_rebuilds": store.vectors.rebuilds,
        }
        r["ok"] = r["committed_present"] and r["no_half_batch"] and r["index_caught_up"] and r["graph_matches"]
        store.close()
        log(f"crash {k}: {r}")
        rounds.append(r)
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    return {"kills": rounds, "all_ok": all(r["ok"] for r in rounds)}


# ---------------------------------------------------------------------------
# Scale
# ---------------------------------------------------------------------------


def run_scale(args, workdir: Path, on_checkpoint=None) -> dict:
    """Ingest the synthetic corpus in batches; at each checkpoint (and at the
    end) measure everything on the store as it stands and hand the figures
    to ``on_checkpoint``, so a run cut short still reports its largest size."""
    from skillbase.memory.embeddings import Embedder
    from skillbase.memory.store import Store

    home = workdir / "scale"
    shutil.rmtree(home, ignore_errors=True)
    settings = Settings.from_env(env={}, home=home)
    embedder = Embedder(threads=args.threads)
    store = Store.open(settings, embedder=embedder)
    marks = sorted({int(x) for x in (args.checkpoints or "").split(",") if x.strip()} | {args.attempts})
    res: dict = {"attempts": args.attempts, "experiences": args.experiences, "embed_threads": embedder._m.threads,
                 "checkpoints": []}
    st = {"sample_docs": [], "gen_s": 0.0, "ingest_s": 0.0, "n_a": 0, "n_e": 0, "src_bytes": 0,
          "enc_s0": 0.0, "computed0": 0}
    rng = random.Random(3)
    batches = generate(args.attempts, args.experiences, seed=args.seed, batch=args.batch)
    while True:
        t0 = time.monotonic()
        try:
            atts, exps = next(batches)
        except StopIteration:
            break
        st["gen_s"] += time.monotonic() - t0
        t0 = time.monotonic()
        store.record_attempts(atts)
        if exps:
            store.record_experiences(exps)
        st["ingest_s"] += time.monotonic() - t0
        st["n_a"] += len(atts)
        st["n_e"] += len(exps)
        st["src_bytes"] += sum(len(a.source) for a in atts)
        _sample_texts(store, st["sample_docs"], rng, atts, exps)
        if st["n_a"] % (args.batch * 20) == 0:
            log(f"ingested {st['n_a']} attempts + {st['n_e']} experiences: "
                f"{(st['n_a'] + st['n_e']) / st['ingest_s']:.1f} records/s so far")
        if marks and st["n_a"] >= marks[0]:
            marks.pop(0)
            cp = _measure_scale(store, embedder, st, args, rng, home)
            res["checkpoints"].append(cp)
            res.update(cp)
            if on_checkpoint is not None:
                on_checkpoint(res)
    store.close()
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    return res


def _sample_texts(store, sample_docs: list, rng: random.Random, atts, exps) -> None:
    # The texts the model-alone ceiling is measured on: drawn from the very
    # records ingested, as the store embedded them (same token limits).
    from skillbase.memory.documents import attempt_doc, experience_doc

    for a in rng.sample(atts, min(len(atts), 12)):
        sample_docs.append(attempt_doc(store.ledger.validate_attempt(a)))
    for e in rng.sample(exps, min(len(exps), 3)):
        sample_docs.append(experience_doc(store.ledger.validate_experience(e)))


def _measure_scale(store, embedder, st: dict, args, rng: random.Random, home: Path) -> dict:
    """Every scale figure for the store as it stands now."""
    from skillbase.memory.embeddings import Embedder
    from skillbase.memory.indexer import embed_docs

    n_a, n_e, ingest_s = st["n_a"], st["n_e"], st["ingest_s"]
    log(f"checkpoint at {n_a} attempts + {n_e} experiences ({ingest_s:.0f} s of ingest)")
    # Model time and texts spent by ingest only (earlier checkpoints' query
    # embeddings ran on the same model and are taken out).
    enc_s = embedder.encode_seconds - st["enc_s0"]
    computed = embedder.computed - st["computed0"]
    t0 = time.monotonic()
    store.sync()
    store.graph.save(store.settings.graph_path)
    cp: dict = {
        "completed_attempts": n_a, "completed_experiences": n_e,
        "ingest_s": round(ingest_s, 1), "generate_s": round(st["gen_s"], 1),
        "ingest_records_per_s": round((n_a + n_e) / ingest_s, 1),
        "ingest_embedding_s": round(enc_s, 1),
        "model_during_ingest_texts_per_s": round(computed / max(enc_s, 1e-9), 1),
        "embeddings_computed": computed, "mean_source_bytes": round(st["src_bytes"] / max(n_a, 1)),
        "graph_catch_up_and_snapshot_s": round(time.monotonic() - t0, 1),
        "load_average": round(os.getloadavg()[0], 1),
    }
    # The ceiling: the model alone, no cache, same thread count and batch,
    # on texts drawn from the ones ingested, measured now in this run.
    alone = Embedder(threads=args.threads)
    sample = rng.sample(st["sample_docs"], min(args.model_sample, len(st["sample_docs"])))
    alone.embed(["warm up"])
    t0 = time.monotonic()
    embed_docs(alone, sample)
    model_s = time.monotonic() - t0
    mix_a = sum(d.collection == "attempts" for d in sample) / max(len(sample), 1)
    cp["model_alone_texts_per_s"] = round(len(sample) / model_s, 1)
    cp["model_alone_sample"] = len(sample)
    cp["model_alone_note"] = (f"{len(sample)} texts drawn from the ingested records ({mix_a:.0%} attempts, the rest "
                              f"lessons, each at its own word-piece limit), batch 64, {alone._m.threads} thread(s), {alone.runtime}")
    cp["ingest_vs_model"] = round(cp["ingest_records_per_s"] / cp["model_alone_texts_per_s"], 3)
    short = [f"{t.replace('-', ' ')} helped {f} kernels" for f, plan in FAMILY_PLAN.items() for t in plan[2]] * 8
    t0 = time.monotonic()
    alone._m.encode(short[:512], None)
    cp["model_alone_short_texts_per_s"] = round(512 / (time.monotonic() - t0), 1)
    alone._m.st = alone._m.encoder = None  # free the second copy of the weights
    log(f"model alone: {cp['model_alone_texts_per_s']} texts/s on the same texts "
        f"({cp['model_alone_short_texts_per_s']} on short ones); ingest {cp['ingest_records_per_s']} records/s "
        f"= {cp['ingest_vs_model']:.0%} of it")
    cp.update(query_bench(store, args))
    cp.update(cold_open(home))
    cp["disk_bytes"] = disk(home)
    st["enc_s0"] += embedder.encode_seconds - st["enc_s0"] - enc_s
    st["computed0"] += embedder.computed - st["computed0"] - computed
    log(f"checkpoint done: disk {cp['disk_bytes']['total'] / 2**20:.0f} MiB")
    return cp


def measure_existing(args, home: Path) -> dict:
    """The query, cold-open and disk figures of a store built earlier (for
    example the 100k-attempt store of benchmarks/retrieval_eval.py)."""
    from skillbase.memory.embeddings import Embedder
    from skillbase.memory.store import Store
    from skillbase.config import Settings

    if not (home / "ledger.sqlite3").exists():
        raise SystemExit(f"--home {home}: no store there (ledger.sqlite3 missing)")
    embedder = Embedder(threads=args.threads)
    embedder.embed(["warm up"])
    store = Store.open(Settings.from_env(env={}, home=home), embedder=embedder)
    try:
        out: dict = {"home": str(home),
                     "counts": {k: v for k, v in store.ledger.counts().items() if k in ("attempts", "experiences", "skills")},
                     "load_average": round(os.getloadavg()[0], 1)}
        out.update(query_bench(store, args))
    finally:
        store.close()
    out.update(cold_open(home))
    out["disk_bytes"] = disk(home)
    return out


def query_bench(store, args) -> dict:
    """Filtered top-10 searches and graph queries, p50/p95 in ms."""
    from skillbase.memory.vectors import OVERFETCH

    rng = random.Random(11)
    fams = list(FAMILY_PLAN)
    corpus = Corpus(99)
    queries = []
    for i in range(args.queries):
        fam = rng.choice(fams)
        bound = FAMILY_PLAN[fam][1]
        t = rng.choice(FAMILY_PLAN[fam][2])
        text = rng.choice([
            f"my {fam} kernel is {bound}-bound at {rng.randint(20, 70)}% of peak; what should I try next?",
            f"{t.replace('-', ' ')} for {fam}: did it help and when?",
            _triton_source(corpus.rng, fam, FAMILY_PLAN[fam][0], [t], i)[:1500],
        ])
        where = rng.choice([
            {"family": fam},
            {"$and": [{"family": fam}, {"arch": "sm_90"}]},
            {"$and": [{"family": fam}, {"verdict": "correct"}]},
            {"techniques": {"$contains": t}},
        ])
        coll = "attempts" if i % 2 == 0 else "experiences"
        if coll == "experiences" and "verdict" in json.dumps(where):
            where = {"$and": [{"family": fam}, {"gain": {"$gte": 1.1}}]}
        queries.append((coll, text, where))
    for coll, text, where in queries[:5]:
        store.search(coll, text, k=10, where=where)  # warm: HNSW segments loaded, caches hot
    search_ms, chroma_ms, embed_ms = [], [], []
    fallbacks = 0
    for coll, text, where in queries:
        t0 = time.perf_counter()
        store.search(coll, text, k=10, where=where)  # first: its query embedding is not cached yet
        t1 = time.perf_counter()
        emb = store.embedder._m.encode([text], 256)[0]  # the model, bypassing the cache
        t2 = time.perf_counter()
        with store.vectors.session():
            store.vectors.ready()
            hits = store.vectors.query(coll, emb, 10, where)
        t3 = time.perf_counter()
        search_ms.append((t1 - t0) * 1000)
        embed_ms.append((t2 - t1) * 1000)
        chroma_ms.append((t3 - t2) * 1000)
        fallbacks += len(hits) < 10
    g = store.graph
    classes = sorted({t[1] + ":" + t[2] + ":" + t[3] for t in Corpus(args.seed).tasks})
    value_ms, lineage_ms, exp_ms = [], [], []
    techs = [t.name for t in store.list_techniques()]
    for i in range(args.queries):
        sig = rng.choice(classes)
        fam = sig.split(":")[0]
        bn = rng.choice(["memory", "compute", "latency", None])
        arch = rng.choice(["sm_90", "sm_80", None])
        t0 = time.perf_counter()
        g.technique_values(task_class=sig if i % 2 else None, family=fam, bottleneck=bn, arch=arch)
        t1 = time.perf_counter()
        g.best_lineages(family=fam, k=5)
        t2 = time.perf_counter()
        g.experiences_for_technique(rng.choice(techs), k=10)
        t3 = time.perf_counter()
        value_ms.append((t1 - t0) * 1000)
        lineage_ms.append((t2 - t1) * 1000)
        exp_ms.append((t3 - t2) * 1000)
    r = lambda xs: {"p50_ms": round(pct(xs, 0.5), 2), "p95_ms": round(pct(xs, 0.95), 2), "n": len(xs)}  # noqa: E731
    out = {
        "vector_query_filtered_top10": r(chroma_ms),
        "search_end_to_end_top10": r(search_ms),
        "query_embedding": r(embed_ms),
        "filtered_queries_below_k": fallbacks,
        "overfetch": list(OVERFETCH),
        "graph_technique_values": r(value_ms),
        "graph_best_lineages": r(lineage_ms),
        "graph_experiences_for_technique": r(exp_ms),
        "graph_counts": {k: v for k, v in g.counts().items() if not k.startswith("edge:")},
    }
    log(f"queries: {json.dumps({k: v for k, v in out.items() if isinstance(v, dict) and 'p95_ms' in v})}")
    return out


_COLD = r"""
import time, sys, json
t0 = time.monotonic()
from pathlib import Path
from skillbase.config import Settings
from skillbase.memory.store import Store
t1 = time.monotonic()
store = Store.open(Settings.from_env(env={}, home=Path(sys.argv[1])))
t2 = time.monotonic()
store.search("attempts", "softmax kernel that reads the row twice", k=10, where={"family": "softmax"})
t3 = time.monotonic()
g = store.graph
t4 = time.monotonic()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "first_search_s": t3 - t2, "graph_load_s": t4 - t3,
                  "graph_seq": g.seq, "snapshot_seq": g.snapshot_seq}))
"""


def cold_open(home: Path) -> dict:
    """A fresh process: import, Store.open, first search, graph snapshot load."""
    runs = []
    for _ in range(3):
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-c", _COLD, str(home)], capture_output=True, text=True, cwd=ROOT)
        wall = time.monotonic() - t0
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-3000:])
        d = json.loads(out.stdout.strip().splitlines()[-1])
        d["process_wall_s"] = wall
        runs.append(d)
    best = min(runs, key=lambda d: d["open_s"])
    med = lambda k: round(statistics.median(d[k] for d in runs), 2)  # noqa: E731
    res = {"cold_open": {k: med(k) for k in ("import_s", "open_s", "first_search_s", "graph_load_s", "process_wall_s")},
           "cold_open_runs": 3, "graph_loaded_from_snapshot": best["snapshot_seq"] == best["graph_seq"]}
    log(f"cold open (median of 3 fresh processes): {res['cold_open']}")
    return res


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def markdown(r: dict) -> str:
    lines = [f"## Memory benchmark ({r['when']}, {r['machine']})", "",
             f"Command: `{r['command']}`", ""]
    for c in r.get("concurrency", []):
        lines += [f"### Concurrency, {c['backend']} chroma: {c['writers']} processes x {c['per_writer']} attempts "
                  f"with lessons, {len(c['reps'])} repetitions", "",
                  "| rep | ok | lost | wall s | records/s while writing | lessons found by meaning |", "|---|---|---|---|---|---|"]
        for rep in c["reps"]:
            lines.append(f"| {rep['rep']} | {rep['ok']} | {rep['lost']} | {rep['wall_s']} | {rep['records_per_s']} | "
                         f"{rep['found']}/{rep['searched']} |")
        lines.append("")
    if "crash" in r:
        lines += ["### Crash (SIGKILL of a writer mid-batch, batches of 50)", "",
                  "| kill | attempts | committed present | no half batch | index caught up | graph matches | reopen s |",
                  "|---|---|---|---|---|---|---|"]
        for k in r["crash"]["kills"]:
            lines.append(f"| {k['kill']} | {k['attempts']} | {k['committed_present']} | {k['no_half_batch']} | "
                         f"{k['index_caught_up']} | {k['graph_matches']} | {k['reopen_s']} |")
        lines.append("")
    if "scale" in r:
        s = r["scale"]
        mb = {k: round(v / 2**20, 1) for k, v in s["disk_bytes"].items()}
        done = (s.get("completed_attempts", s["attempts"]), s.get("completed_experiences", s["experiences"]))
        target = "" if done == (s["attempts"], s["experiences"]) else f" (of {s['attempts']} + {s['experiences']} planned)"
        lines += [f"### Scale: {done[0]} attempts + {done[1]} experiences{target}", "",
                  "| measure | value | target |", "|---|---|---|",
                  f"| ingest incl. embedding and indexing | {s['ingest_records_per_s']} records/s ({s['ingest_s']} s) | |",
                  f"| time inside the embedding model during ingest | {s.get('ingest_embedding_s', 'n/a')} s of "
                  f"{s['ingest_s']} s ({s.get('model_during_ingest_texts_per_s', 'n/a')} texts/s while in it) | |",
                  f"| embedding model alone, same texts, same run | {s['model_alone_texts_per_s']} texts/s | ceiling |",
                  f"| ingest / model-alone ceiling | {s.get('ingest_vs_model', 'n/a')} | |",
                  f"| embedding model alone, short texts (5-8 words) | {s.get('model_alone_short_texts_per_s', 'n/a')} texts/s | |",
                  *_query_rows(s), f"| disk (MiB) | {mb} | |", ""]
    if "measure" in r:
        m = r["measure"]
        mb = {k: round(v / 2**20, 1) for k, v in m["disk_bytes"].items()}
        lines += [f"### Queries on an existing store: {m['counts']}", "", f"Store: `{m['home']}`.", "",
                  "| measure | value | target |", "|---|---|---|", *_query_rows(m), f"| disk (MiB) | {mb} | |", ""]
    return "\n".join(lines)


def _query_rows(s: dict) -> list[str]:
    return [f"| filtered top-10 vector query (chroma + filter) | p50 {s['vector_query_filtered_top10']['p50_ms']} ms, "
            f"p95 {s['vector_query_filtered_top10']['p95_ms']} ms | p95 <= 50 ms |",
            f"| search end to end (query embedding included) | p50 {s['search_end_to_end_top10']['p50_ms']} ms, "
            f"p95 {s['search_end_to_end_top10']['p95_ms']} ms | |",
            f"| graph technique_values | p50 {s['graph_technique_values']['p50_ms']} ms, "
            f"p95 {s['graph_technique_values']['p95_ms']} ms | p95 <= 10 ms |",
            f"| graph best_lineages | p95 {s['graph_best_lineages']['p95_ms']} ms | |",
            f"| graph experiences_for_technique | p95 {s['graph_experiences_for_technique']['p95_ms']} ms | |",
            f"| cold open (Store.open in a fresh process, imports excluded) | {s['cold_open']['open_s']} s "
            f"(imports {s['cold_open']['import_s']} s) | <= 3 s |",
            f"| first filtered search in that process (imports chromadb, loads the HNSW index) | "
            f"{s['cold_open']['first_search_s']} s | |",
            f"| graph snapshot load + catch-up | {s['cold_open']['graph_load_s']} s | |"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--role", default="main", choices=["main", "writer", "crasher"], help=argparse.SUPPRESS)
    p.add_argument("--home"), p.add_argument("--url", default=""), p.add_argument("--writer", type=int, default=0)
    p.add_argument("--n", type=int, default=0), p.add_argument("--dir")
    p.add_argument("--only", default="concurrency,crash,scale",
                   help="comma-separated sections to run: concurrency, crash, scale, measure (needs --home)")
    p.add_argument("--attempts", type=int, default=100_000)
    p.add_argument("--experiences", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=500, help="records per ingest call in the scale run")
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--per-writer", type=int, default=500)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--sample", type=int, default=25, help="lessons per writer each process searches for")
    p.add_argument("--kills", type=int, default=3)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--model-sample", type=int, default=2000)
    p.add_argument("--checkpoints", default="10000,50000",
                   help="attempt counts at which the scale run measures everything and writes --out (also at the end)")
    p.add_argument("--threads", type=int, default=None, help="torch threads for embedding (default: the library's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-server", action="store_true", help="skip the chroma-server concurrency run")
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true", help="keep the stores built")
    p.add_argument("--out", default=None, help="write results as JSON here, and markdown next to it (.md)")
    p.add_argument("--render", nargs="+", default=None, help="print the markdown of saved result files (merged)")
    a = p.parse_args()
    if a.render:
        merged: dict = {}
        for f in a.render:
            part = json.loads(Path(f).read_text())
            merged.update({k: v for k, v in part.items() if k not in merged or k in ("concurrency", "crash", "scale")})
        print(markdown(merged))
        return None
    if a.role == "writer":
        return writer_main(a)
    if a.role == "crasher":
        return crasher_main(a)
    sections = set(a.only.split(","))
    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="memory-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict = {"when": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(["python", *sys.argv]),
                     "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average at start "
                                f"{os.getloadavg()[0]:.1f}", "python": platform.python_version()}

    def write() -> None:
        results["load_average_at_end"] = round(os.getloadavg()[0], 1)
        if a.out:
            Path(a.out).write_text(json.dumps(results, indent=1))
            Path(a.out).with_suffix(".md").write_text(markdown(results) + "\n")

    try:
        if "crash" in sections:
            results["crash"] = run_crash(a, workdir)
            write()
        if "concurrency" in sections:
            # Embedded and server repetitions alternate, and every one is
            # written out as it ends, so a run cut short reports both.
            proc, url = (None, None) if a.no_server else start_chroma_server(workdir)
            results["concurrency"] = []
            try:
                for rep in range(a.reps):
                    for i, u in enumerate([None] if proc is None else [None, url]):
                        if len(results["concurrency"]) <= i:
                            results["concurrency"].append(None)
                        results["concurrency"][i] = run_concurrency(a, workdir, u, [rep], results["concurrency"][i])
                        write()
            finally:
                if proc is not None:
                    stop(proc)
        if "measure" in sections:
            results["measure"] = measure_existing(a, Path(a.home))
            write()
        if "scale" in sections:
            def checkpoint(partial: dict) -> None:
                results["scale"] = partial
                write()
            results["scale"] = run_scale(a, workdir, on_checkpoint=checkpoint)
    finally:
        write()
        if not a.keep and not a.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(markdown(results))


if __name__ == "__main__":
    main()
