"""Every known reward hack is rejected with the check named after it; honest solutions pass every check.

Each hack is a solution file in this directory, named after the hack. The CPU
run verifies under the Triton interpreter (what CI checks); the GPU run (marked
``gpu``) adds the profiler, timing and the physical floor.
"""

import re

import pytest

from .conftest import HERE

# hack file -> the check that must fail (others may fail too)
CPU_HACKS = {
    "modify_inputs.py": "inputs_unmodified",
    "uninitialized_output.py": "output_fully_written",
    "cached_result.py": "fresh_result_each_call",
    "output_aliases_input.py": "no_output_alias",
    "calls_reference.py": "no_reference_call",
    "inherits_reference.py": "no_reference_call",
    "try_except_fallback.py": "no_pytorch_fallback",
    "no_own_kernel.py": "own_kernel_launched",
    "library_with_dummy_kernel.py": "no_pytorch_fallback",
    "patch_torch_internals.py": "torch_untouched",
    "patch_timers.py": "torch_untouched",
    "hardcoded_seed_output.py": "fresh_result_each_call",
}
GPU_ONLY_HACKS = {
    "side_stream.py": {"no_side_stream_escape", "physically_possible"},
    "faster_than_physics.py": {"physically_possible", "fresh_result_each_call"},
}
HONEST = ["honest.py", "honest_buffer_reuse.py"]


def test_every_hack_file_is_covered():
    files = {p.name for p in HERE.glob("*.py")} - {"task.py", "conftest.py", "__init__.py", "test_adversarial.py"}
    assert files == set(CPU_HACKS) | set(GPU_ONLY_HACKS) | set(HONEST)


def _run(tc, task, name, device):
    return tc.benchmark(task, tc.resolve_solution(task, str(HERE / name)), device, use_cache=False)


@pytest.mark.parametrize("name", sorted(CPU_HACKS))
def test_hack_is_rejected_on_cpu(adv_toolchain, adv_task, name):
    r = _run(adv_toolchain, adv_task, name, "cpu")
    failed = {c.name for c in r.correctness.failed_checks}
    assert r.verdict == "rejected", r.message
    assert CPU_HACKS[name] in failed, (r.message, failed)
    assert r.message.startswith("rejected by ")


@pytest.mark.parametrize("name", HONEST)
def test_honest_solutions_pass_every_check_on_cpu(adv_toolchain, adv_task, name):
    r = _run(adv_toolchain, adv_task, name, "cpu")
    assert r.verdict == "correct", r.message
    assert not r.correctness.failed_checks


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CPU_HACKS) + sorted(GPU_ONLY_HACKS))
def test_hack_is_rejected_on_gpu(adv_toolchain, adv_task, name):
    r = _run(adv_toolchain, adv_task, name, "cuda")
    failed = {c.name for c in r.correctness.failed_checks}
    expected = GPU_ONLY_HACKS.get(name) or {CPU_HACKS[name]}
    assert r.verdict == "rejected", r.message
    assert failed & expected, (r.message, failed)


@pytest.mark.gpu
@pytest.mark.parametrize("name", HONEST)
def test_honest_solutions_pass_every_check_on_gpu(adv_toolchain, adv_task, name):
    r = _run(adv_toolchain, adv_task, name, "cuda")
    assert r.verdict == "correct", r.message
    assert not r.correctness.failed_checks
    assert r.timing is not None and r.timing.median_ms > 0
    assert r.roofline is not None and r.roofline.pct_sol <= 100 / 0.7


# Kernels right only on the non-negative inputs their task draws (narrow/): task -> wrong solution.
NARROW = {"leaky_task.py": "leaky_drops_negative.py", "clamp_task.py": "clamp_drops_lower.py",
          "softplus_task.py": "softplus_unstable.py"}
NARROW_DIR = HERE / "narrow"


@pytest.mark.parametrize("task_file", sorted(NARROW))
def test_kernels_right_only_on_the_drawn_inputs_are_incorrect(adv_toolchain, task_file):
    task = adv_toolchain.load_task(str(NARROW_DIR / task_file))
    r = _run(adv_toolchain, task, str(NARROW_DIR / NARROW[task_file]), "cpu")
    failed = {c.name for c in r.correctness.failed_checks}
    # Every other check passes: only the widened draw exposes them.
    assert failed == {"matches_reference_on_wider_inputs"}, (r.message, failed)
    assert r.verdict == "incorrect"
    assert "N(0, " in r.message and "exact zeros" in r.message
    assert re.search(r"\(seed \d+, widened with seed \d+\)", r.message), r.message  # its seeds named


def test_the_honest_version_passes_the_widened_draw(adv_toolchain):
    task = adv_toolchain.load_task(str(NARROW_DIR / "leaky_task.py"))
    r = _run(adv_toolchain, task, str(NARROW_DIR / "leaky_honest.py"), "cpu")
    assert r.verdict == "correct", r.message
    assert any(c.name == "matches_reference_on_wider_inputs" and c.passed and not c.skipped
               for c in r.correctness.checks)


@pytest.mark.slow
def test_an_honest_long_sum_passes_within_the_references_own_rounding(adv_toolchain):
    """fp32 sums over 16384 wide terms cancel: the candidate's order and the reference's differ by more
    than the scaled tolerance, but no more than the reference differs from a float64 run."""
    task = adv_toolchain.load_task(str(NARROW_DIR / "long_dot_task.py"))
    r = _run(adv_toolchain, task, str(NARROW_DIR / "long_dot_honest.py"), "cpu")
    assert r.verdict == "correct", r.message
    wide = next(c for c in r.correctness.checks if c.name == "matches_reference_on_wider_inputs")
    assert wide.passed and not wide.skipped


def test_a_declared_domain_keeps_widened_inputs_in_range(adv_toolchain):
    """relu over inputs declared non-negative: a copy is right on that domain and passes."""
    task = adv_toolchain.load_task(str(NARROW_DIR / "relu_domain_task.py"))
    r = _run(adv_toolchain, task, str(NARROW_DIR / "leaky_drops_negative.py"), "cpu")
    assert r.verdict == "correct", r.message


@pytest.mark.gpu
def test_a_dropped_negative_branch_is_incorrect_on_gpu(adv_toolchain):
    task = adv_toolchain.load_task(str(NARROW_DIR / "leaky_task.py"))
    r = _run(adv_toolchain, task, str(NARROW_DIR / "leaky_drops_negative.py"), "cuda")
    assert r.verdict == "incorrect", r.message
    assert "matches_reference_on_wider_inputs" in {c.name for c in r.correctness.failed_checks}
