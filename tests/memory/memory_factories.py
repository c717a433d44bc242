"""Records for memory tests: realistic benchmark reports, attempts and lessons.

Imported by the tests and by the writer processes the concurrency and crash
tests start (which run this directory's scripts directly)."""

from __future__ import annotations

from skillbase.models import (
    Attempt, BenchReport, Check, CorrectnessReport, Experience, Hardware, Roofline, TimingStats, Tolerance,
    content_hash,
)

H100 = Hardware(kind="cuda", name="NVIDIA H100 80GB HBM3", arch="sm_90", sm_count=132, peak_gbps=3000.0)

SOFTMAX_SRC = '''import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    """One program per row; the whole row stays in registers."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
'''

MATMUL_SRC = '''import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        _, N = b.shape
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
        matmul_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, b, c, M, N, K, BM=64, BN=64, BK=32)
        return c
'''


def report(
    *, task: str = "row_softmax", signature: str = "softmax:fp32:large", source: str = SOFTMAX_SRC,
    ms: float | None = 0.5, verdict: str = "correct", bound: str = "memory", eager_ms: float = 1.0,
) -> BenchReport:
    """A benchmark report as the toolchain produces one on an H100."""
    timing = None
    if ms is not None:
        timing = TimingStats(median_ms=ms, q1_ms=ms * 0.99, q3_ms=ms * 1.01, min_ms=ms * 0.98, max_ms=ms * 1.05,
                             mean_ms=ms, cv=0.01, ci_rel=0.004, n=200,
                             method="cuda events, L2 flushed, 4 input sets rotated")
    return BenchReport(
        task=task, task_signature=signature, solution_hash=content_hash(source), language="triton", device="cuda:0",
        hardware=H100, verdict=verdict, message=f"{verdict}",
        correctness=CorrectnessReport(passed=verdict == "correct", trials=5, max_abs_error=1e-7,
                                      tolerance=Tolerance(atol=1e-5, rtol=1e-5),
                                      checks=[Check(name="inputs_unmodified", passed=True)]),
        timing=timing,
        speedup_vs_eager=eager_ms / ms if ms else None,
        roofline=Roofline(bytes_moved=2 * 4 * 4096 * 8192, flops=5 * 4096 * 8192, achieved_gbps=1800.0,
                          achieved_tflops=0.3, peak_gbps=3000.0, peak_tflops=60.0, floor_ms=0.09, pct_sol=60.0,
                          bound=bound) if ms else None,
        toolchain={"triton": "3.9.0", "torch": "2.13.0"},
    )


def attempt(
    n: int = 0, *, parent: str | None = None, techniques: tuple[str, ...] = (), ms: float | None = 0.5,
    verdict: str = "correct", task: str = "row_softmax", signature: str = "softmax:fp32:large",
    base: str = SOFTMAX_SRC, session: str | None = None, bound: str = "memory", notes: str = "",
) -> Attempt:
    """An attempt whose source differs by ``n`` (a comment line)."""
    source = base + f"\n# variant {n}\n"
    family, dtype, _ = signature.split(":")
    r = report(task=task, signature=signature, source=source, ms=ms, verdict=verdict, bound=bound)
    return Attempt(
        task=task, task_signature=signature, family=family, dtype=dtype, source=source, source_hash=content_hash(source),
        language="triton", parent_id=parent, techniques=list(techniques), bench_report=r, verdict=verdict,
        median_ms=ms if verdict == "correct" else None, speedup_vs_eager=r.speedup_vs_eager if verdict == "correct" else None,
        bottleneck=bound, hardware=H100.key, arch="sm_90", toolchain=r.toolchain, session=session, agent="test-agent",
        notes=notes,
    )


def lesson(text: str, *, techniques: tuple[str, ...] = ("online softmax",), gain: float | None = 1.5,
           before: str | None = None, after: str | None = None, family: str = "softmax",
           signature: str = "softmax:fp32:large", session: str | None = None) -> Experience:
    return Experience(
        title=text[:60], lesson=text, family=family, dtype=signature.split(":")[1], task_signature=signature,
        techniques=list(techniques), gain=gain, before_attempt=before, after_attempt=after, bottleneck="memory",
        arch="sm_90", conditions="fp32 rows of 4k-16k columns on H100", session=session, agent="test-agent",
    )
