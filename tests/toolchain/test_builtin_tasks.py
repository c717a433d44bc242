"""Every built-in task's every solution verifies through the worker under the Triton interpreter at the
task's small shape; CUDA C++ solutions compile with nvcc for sm_90 and report real registers.

All Triton solutions run as one batch over the warm CPU workers (two interpreters in parallel) while
the compile worker builds the CUDA ones, so the whole set stays within a few minutes on two cores.
"""

import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from skillbase.toolchain import tasks
from skillbase.toolchain.source import detect_language


def _pairs() -> list[tuple[str, str]]:
    out = []
    for name in tasks.builtin_names():
        path, _ = tasks.resolve_task_path(name)
        out += [(name, sol) for sol in tasks.solutions_of(path)]
    return out


PAIRS = _pairs()


def _is_cuda(task: str, sol: str) -> bool:
    path, _ = tasks.resolve_task_path(task)
    return detect_language((path.parent / f"{sol}.py").read_text()) == "cuda"


@pytest.fixture(scope="module")
def results(toolchain):
    infos = {name: toolchain.load_task(name) for name in {t for t, _ in PAIRS}}
    triton = [p for p in PAIRS if not _is_cuda(*p)]
    cuda = [p for p in PAIRS if _is_cuda(*p)] if shutil.which("nvcc") else []
    jobs = [(infos[t], toolchain.resolve_solution(infos[t], s)) for t, s in triton]

    def compile_all():
        return {(t, s): toolchain.compile(infos[t], toolchain.resolve_solution(infos[t], s), arch="sm_90")
                for t, s in cuda}

    with ThreadPoolExecutor(1) as pool:
        compiled = pool.submit(compile_all)
        reports = toolchain.benchmark_many(jobs, "cpu")
        out = dict(zip(triton, reports))
        out.update(compiled.result())
    return out


def test_every_builtin_task_has_a_triton_solution():
    names = tasks.builtin_names()
    if not names:
        pytest.skip("no built-in tasks installed")
    lacking = [n for n in names if not any(t == n and not _is_cuda(t, s) for t, s in PAIRS)]
    assert not lacking, f"built-in tasks without a Triton solution: {lacking}"


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first item builds the whole batch in its fixture
@pytest.mark.parametrize("task, sol", PAIRS, ids=[f"{t}/{s}" for t, s in PAIRS])
def test_builtin_solution(results, task, sol):
    if _is_cuda(task, sol) and shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    r = results[(task, sol)]
    if _is_cuda(task, sol):
        assert r.ok, [d.model_dump() for d in r.diagnostics]
        assert r.kernels and all(k.registers and k.registers > 0 for k in r.kernels)
        return
    assert r.verdict == "correct", r.message
    assert not r.correctness.failed_checks
    assert r.correctness.trials >= 5
