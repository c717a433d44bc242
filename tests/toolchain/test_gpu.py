"""GPU paths: timing, baselines, roofline, peaks, CUDA C++ candidates, sticky CUDA errors.

Skipped without a CUDA GPU (tests/conftest.py); the lead runs them on an H100.
"""

import pytest

from .conftest import FIXTURES

pytestmark = pytest.mark.gpu


def test_peaks_are_measured_once_and_cached(toolchain):
    hw = toolchain.hardware("cuda")
    assert hw.kind == "cuda" and hw.arch.startswith("sm_") and hw.l2_bytes
    assert hw.peak_gbps > 100 and {"bf16", "fp16", "tf32", "fp32"} <= set(hw.peak_tflops)
    # the bandwidth roof is the best of the streaming probes, the vendor's figure beside it
    assert {"copy", "sum", "fill", "add"} <= set(hw.bandwidth_probes_gbps)
    assert hw.peak_gbps == max(hw.bandwidth_probes_gbps.values()) >= hw.bandwidth_probes_gbps["copy"]
    assert ("H100" not in hw.name and "H200" not in hw.name) or hw.peak_gbps < hw.datasheet_gbps
    assert toolchain.hardware("cuda") == hw


def test_triton_candidate_is_timed_with_baselines_and_roofline(toolchain, relu_task, solution):
    r = toolchain.benchmark(relu_task, solution("relu_triton.py"), "cuda", use_cache=False)
    assert r.verdict == "correct", r.message
    assert r.device == "cuda:0" and r.timing_unavailable is None
    t = r.timing
    assert t.n >= 25 and t.q1_ms <= t.median_ms <= t.q3_ms and t.ci_rel < 0.05
    assert "L2 flushed" in t.method
    # max-autotune beside eager and the default mode, or said why not (its compile is bounded)
    assert {"eager", "torch_compile"} <= set(r.baselines)
    tuned = r.baselines.get("torch_compile_max_autotune")
    assert (r.speedup_vs_max_autotune == pytest.approx(tuned.median_ms / t.median_ms) if tuned else
            any(n.startswith("torch_compile_max_autotune baseline unavailable") for n in r.notes)), r.notes
    assert r.precision and "fp32 matmuls" in r.precision
    assert r.speedup_vs_eager == pytest.approx(r.baselines["eager"].median_ms / t.median_ms)
    assert r.roofline.bound == "memory" and 20 < r.roofline.pct_sol <= 100 / 0.7
    # an honest kernel above the measured roof says why, beside the figure
    assert r.roofline.pct_sol <= 100 or any("above the measured roof" in n for n in r.notes), r.notes
    assert r.correctness.shapes_checked == [{"N": 1 << 24}, {"N": 12345}]
    checks = {c.name: c for c in r.correctness.checks}
    assert not checks["no_side_stream_escape"].skipped and not checks["physically_possible"].skipped
    assert r.custom_kernels == ["relu_kernel"]


def test_our_median_agrees_with_do_bench(toolchain, relu_task, solution):
    import torch
    import triton.testing

    r = toolchain.benchmark(relu_task, solution("relu_triton.py"), "cuda", use_cache=False)
    from skillbase.toolchain.tasks import import_module_at

    mod = import_module_at(FIXTURES / "relu_triton.py", kind="solution")
    x = torch.randn(1 << 24, device="cuda")
    model = mod.ModelNew()
    ref = triton.testing.do_bench(lambda: model(x), return_mode="median")
    assert r.timing.median_ms == pytest.approx(ref, rel=0.10)


def test_cuda_cpp_candidate_runs_on_gpu(toolchain, relu_task, solution):
    r = toolchain.benchmark(relu_task, solution("relu_cuda.py"), "cuda", use_cache=False)
    assert r.verdict == "correct", r.message
    assert any("relu_kernel" in k for k in r.custom_kernels)


def test_compile_kernels_cuda_build_is_reused_by_the_benchmark(toolchain, relu_task, solution):
    """compile_kernel builds the extension on a GPU host; benchmark_kernel then loads it, no second build."""
    cand = solution("relu_cuda.py")
    cand = cand.model_copy(update={"source": cand.source.replace("relu_kernel", "relu_kernel_reuse")})
    compiled = toolchain.compile(relu_task, cand, "sm_90", use_cache=False)
    assert compiled.ok, compiled.diagnostics
    r = toolchain.benchmark(relu_task, cand, "cuda", use_cache=False)
    assert r.verdict == "correct", r.message
    assert (r.phases_s or {}).get("build", 0.0) < 5.0, r.phases_s


def test_illegal_memory_access_costs_one_worker(toolchain, relu_task, solution):
    r = toolchain.benchmark(relu_task, solution("relu_illegal_access.py"), "cuda", use_cache=False)
    assert r.verdict in ("runtime_error", "crashed"), r.message
    again = toolchain.benchmark(relu_task, solution("relu_triton.py"), "cuda", use_cache=False)
    assert again.verdict == "correct"


def test_benchmark_many_spreads_over_gpus(toolchain, relu_task, solution):
    jobs = [(relu_task, solution("relu_triton.py")), (relu_task, solution("relu_wrong_dtype.py"))] * 2
    reports = toolchain.benchmark_many(jobs, "cuda")
    assert [r.verdict for r in reports] == ["correct", "incorrect"] * 2


def test_verification_kernels_compiled_agree_with_the_pytorch_forms():
    """The one-pass compare and fingerprint kernels, compiled for this GPU, give what the PyTorch forms give."""
    import torch

    from skillbase.toolchain import verify

    def both(fn, *a):
        saved = verify._fast
        verify._fast = lambda torch, t: None
        try:
            slow = fn(*a)
        finally:
            verify._fast = saved
        return fn(*a), slow

    g = torch.Generator(device="cuda").manual_seed(3)
    n = 3 * verify.FAST_MIN_NUMEL + 17
    r = torch.randn(n, device="cuda", generator=g)
    o = r + 1e-4 * torch.randn(n, device="cuda", generator=g)
    o[[11, n - 1]] = float("nan")
    o.view(torch.int32)[[5, 2 * verify.FAST_MIN_NUMEL]] = -1
    for pb in (None, verify.GPU_POISON_BYTE):
        for atol in (1e-2, 1e-6):
            fast, slow = both(verify.compare, torch, o, r, atol, 1e-3, pb)
            assert (fast.ok, fast.mismatched, fast.nonfinite, fast.unwritten, fast.worst_index, fast.max_abs) == \
                   (slow.ok, slow.mismatched, slow.nonfinite, slow.unwritten, slow.worst_index, slow.max_abs)
            assert fast.rel_norm == pytest.approx(slow.rel_norm, rel=1e-9)
    i = torch.randint(-9, 9, (n,), device="cuda", generator=g)
    j = i.clone()
    j[[7, n - 2]] += 1
    fast, slow = both(verify.compare, torch, j, i, 0.0, 0.0, verify.GPU_POISON_BYTE)
    assert (fast.mismatched, fast.worst_index) == (slow.mismatched, slow.worst_index) == (2, 7)
    # An error just above atol, where float32 would round atol up to it: compiled, the kernel reads it in float64.
    z = torch.zeros(n, device="cuda")
    e = z.clone()
    e[7] = 1e-5
    d = float(e[7])
    atol = d - 0.4 * float(torch.tensor(d).nextafter(torch.tensor(1.0)) - torch.tensor(d))
    fast, slow = both(verify.compare, torch, e, z, atol, 0.0, None)
    assert fast.mismatched == slow.mismatched == 1
    for t in (r, o, i, r.half(), r.bfloat16(), i > 0):
        fast, slow = both(verify.fingerprint, torch, t)
        assert fast == slow
    assert verify.fast_path_status() == ""  # the kernels ran: no fallback was taken
