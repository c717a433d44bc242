"""The Toolchain facade on the CPU: verification under the interpreter, the result cache, batches."""

from skillbase.models import BenchReport

from .conftest import FIXTURES


def test_cpu_verification_reports_every_check_and_no_timing(toolchain, relu_task, solution):
    r = toolchain.benchmark(relu_task, solution("relu_triton.py"), "cpu", use_cache=False)
    assert r.verdict == "correct", r.message
    assert r.device == "cpu" and r.hardware.kind == "cpu" and r.language == "triton"
    assert r.timing is None and r.roofline is None and "needs a CUDA GPU" in r.timing_unavailable
    c = r.correctness
    assert c.passed and c.trials >= 5 and c.shapes_checked == [{"N": 3000}]
    names = {ch.name for ch in c.checks}
    assert {"inputs_unmodified", "no_output_alias", "fresh_result_each_call", "no_reference_call",
            "no_pytorch_fallback", "own_kernel_launched", "torch_untouched", "output_fully_written"} <= names
    skipped = {ch.name for ch in c.checks if ch.skipped}
    assert skipped == {"no_side_stream_escape", "physically_possible"}
    assert r.custom_kernels == ["relu_kernel"]
    assert "under the Triton interpreter" in r.message and "µs" not in r.message
    assert r.precision == "exact fp32 (CPU)"
    # Where the evaluation's time went, phase by phase, and the phases within the whole.
    phases = r.phases_s
    assert {"reference", "load_and_build", "first_trial", "trials", "inputs_rewritten", "wider_inputs",
            "checks_and_extra_shapes", "total"} <= phases.keys(), phases
    assert "timing" not in phases and "profiled_checks" not in phases  # the CPU times nothing
    assert all(v >= 0 for v in phases.values())
    within = ("total", "build", "first_call")  # the whole, and parts of load_and_build and first_trial
    assert sum(v for k, v in phases.items() if k not in within) <= phases["total"] + 0.01
    assert BenchReport.model_validate_json(r.model_dump_json()) == r


def test_the_first_calls_one_time_cost_is_booked_apart(toolchain, relu_task, solution):
    """What the candidate's first call spends once (Triton compiling and autotuning on a GPU; here a
    lazy one-second set-up) is reported as 'first_call', within 'first_trial'."""
    cand = solution("relu_triton.py")
    lazy = cand.source.replace(
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        if not getattr(self, 'ready', False):\n"
        "            import time\n"
        "            time.sleep(1.0)\n"
        "            self.ready = True\n")
    assert lazy != cand.source
    r = toolchain.benchmark(relu_task, cand.model_copy(update={"source": lazy}), "cpu", use_cache=False)
    assert r.verdict == "correct", r.message
    assert 0.9 <= r.phases_s["first_call"] <= r.phases_s["first_trial"], r.phases_s
    plain = toolchain.benchmark(relu_task, cand, "cpu", use_cache=False)
    assert plain.phases_s["first_call"] < 0.5, plain.phases_s


def test_result_cache_makes_a_repeat_cheap(toolchain, relu_task, solution):
    cand = solution("relu_triton.py")
    first = toolchain.benchmark(relu_task, cand, "cpu")
    again = toolchain.benchmark(relu_task, cand, "cpu")
    assert again.cached and again.verdict == first.verdict
    assert again.wall_s < 0.5
    changed = cand.model_copy(update={"source": cand.source + "\n# edited\n"})
    assert not toolchain.benchmark(relu_task, changed, "cpu").cached


def test_weights_and_dot_products_verify(toolchain):
    task = toolchain.load_task(str(FIXTURES / "linear_task.py"))
    r = toolchain.benchmark(task, toolchain.resolve_solution(task, str(FIXTURES / "linear_triton.py")), "cpu",
                            use_cache=False)
    assert r.verdict == "correct", r.message
    assert r.correctness.max_abs_error < 1e-4


def test_benchmark_many_keeps_order(toolchain, relu_task, solution):
    jobs = [(relu_task, solution("relu_triton.py")), (relu_task, solution("relu_wrong_dtype.py"))]
    reports = toolchain.benchmark_many(jobs, "cpu")
    assert [r.verdict for r in reports] == ["correct", "incorrect"]


def test_progress_is_reported(toolchain, relu_task, solution):
    seen = []
    toolchain.benchmark(relu_task, solution("relu_triton.py"), "cpu", use_cache=False,
                        progress=lambda f, m: seen.append((f, m)))
    assert seen and seen[0][1] == "loading task and solution"
    assert any("trial 5/5" in m for _, m in seen)
    assert all(0.0 <= f <= 1.0 for f, _ in seen)


def test_hardware_on_cpu(toolchain):
    hw = toolchain.hardware("cpu")
    assert hw.kind == "cpu" and hw.peak_gbps is None


def test_constant_inputs_are_flagged(toolchain, tmp_path):
    task_file = tmp_path / "zeros_task.py"
    task_file.write_text((FIXTURES / "relu_task.py").read_text().replace("torch.randn(N)", "torch.zeros(N)"))
    task = toolchain.load_task(str(task_file))
    r = toolchain.benchmark(task, toolchain.resolve_solution(task, str(FIXTURES / "relu_triton.py")), "cpu")
    assert r.verdict == "correct"
    assert any("constant" in n and "weakly tested" in n for n in r.notes)


def test_reference_weights_are_shared_when_names_and_shapes_match(toolchain):
    # The reference re-randomizes its weight after construction and the candidate starts
    # from zeros: only copying the reference's state makes them compute the same function.
    task = toolchain.load_task(str(FIXTURES / "scale_task.py"))
    r = toolchain.benchmark(task, toolchain.resolve_solution(task, str(FIXTURES / "scale_triton.py")), "cpu",
                            use_cache=False)
    assert r.verdict == "correct", r.message


def test_a_compiled_baseline_past_its_bound_is_cut_short_and_not_tried_again(toolchain):
    import time

    import pytest

    from skillbase.toolchain.evaluate import BaselineTimeout, _baseline_fn, _deadline

    start = time.perf_counter()
    with pytest.raises(BaselineTimeout, match="passed 0 s"):
        with _deadline(0.2, "its compile passed 0 s"):
            time.sleep(5)  # a compile that would stall a suite
    assert time.perf_counter() - start < 2
    with _deadline(0, "no bound"):
        time.sleep(0.01)
    with pytest.raises(ValueError, match="unknown baseline"):
        _baseline_fn(None, "nope", None)
    # The facade keeps the bound's verdict: the next candidate of the task does not wait for it again.
    keys = {"torch_compile_max_autotune": "k-max-autotune-test", "eager": "k-eager-test"}
    stats = {"median_ms": 1.0, "q1_ms": 0.9, "q3_ms": 1.1, "min_ms": 0.8, "max_ms": 1.3, "mean_ms": 1.0, "cv": 0.1,
             "ci_rel": 0.01, "n": 30,
             "method": "test"}
    first, _ = toolchain._baselines({"baselines": {"eager": stats},
                                     "baseline_unavailable": {"torch_compile_max_autotune": "its compile passed 1 s"}},
                                    {}, keys)
    assert set(first) == {"eager"}
    cached = {name: toolchain.baseline_cache.get(key) for name, key in keys.items()}
    assert cached["torch_compile_max_autotune"] == {"unavailable": "its compile passed 1 s"}
    later: dict = {}
    again, _ = toolchain._baselines(later, cached, keys)
    assert set(again) == {"eager"}
    assert later["baseline_notes"] == {"torch_compile_max_autotune": "not measured: its compile passed 1 s"}


def test_a_kernel_above_the_measured_roof_is_explained_with_the_datasheet_beside():
    from skillbase.models import Hardware
    from skillbase.toolchain.facade import over_the_roof
    from skillbase.toolchain.roofline import datasheet_gbps

    assert datasheet_gbps("NVIDIA H100 80GB HBM3") == 3350.0 and datasheet_gbps("NVIDIA H100 PCIe") == 2000.0
    assert datasheet_gbps("NVIDIA H200") == 4800.0 and datasheet_gbps("a card nobody listed") is None
    hw = Hardware(kind="cuda", name="NVIDIA H100 80GB HBM3", arch="sm_90", peak_gbps=2889.0, datasheet_gbps=3350.0)
    note = over_the_roof(104.2, hw)
    assert note.startswith("104% of speed of light") and "2889 GB/s" in note and "3350 GB/s" in note
