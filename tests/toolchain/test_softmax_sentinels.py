"""Every built-in softmax and cross-entropy solution handles rows whose values all lie far below zero.

Masked positions are often filled with float32's lowest value (``torch.finfo(torch.float32).min``)
rather than -inf; a fully masked row then holds only that value, and PyTorch's softmax gives it equal
weights (its max is subtracted first). A kernel whose running max starts at a finite sentinel such as
-1e30 sees every such value as far below its max, sums nothing and divides by zero; a cross-entropy
written as max + log(sum) - x[target] rounds log(sum) away for such a row. The rows here are:
all float32-lowest, all -1e35, a few ordinary values among float32-lowest ones, and an ordinary row,
at a width that takes each solution's in-register path and at one that takes its streaming path.
Triton solutions run under the interpreter (a subprocess), every solution compiled on a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillbase.toolchain import tasks
from skillbase.toolchain.source import detect_language

from .solution_script import run_json

TASKS = ("row_softmax", "softmax_kb", "cross_entropy")


def _solutions(cuda_too: bool) -> list[tuple[str, str]]:
    out = []
    for name in TASKS:
        path, _ = tasks.resolve_task_path(name)
        for sol, file in tasks.solutions_of(path).items():
            if cuda_too or detect_language(Path(file).read_text()) != "cuda":
                out.append((name, sol))
    return out


SCRIPT = r"""
import torch

jobs = json.loads(sys.argv[2])
lowest = torch.finfo(torch.float32).min
g = torch.Generator().manual_seed(5)
out = {}
for task_file, sol_file, key in jobs:
    task = load(task_file, "task")
    errs = []
    for width in (1001, 40_000):  # in registers, and past every solution's in-register limit
        x = torch.randn(4, width, generator=g)
        x[0] = lowest
        x[1] = -1e35
        x[2] = lowest
        x[2, :7] = torch.randn(7, generator=g)
        args = [x]
        if task_file.endswith("cross_entropy/task.py"):
            args.append(torch.tensor([3, 11, 2, 0]))
        ref = task.Model()(*[a.double() if a.is_floating_point() else a for a in args])
        got = load(sol_file, "solution").ModelNew()(*[a.to(device) for a in args]).double().cpu()
        if got.dim() == 0:
            errs.append({"width": width, "got": float(got), "ref": float(ref), "err": abs(float(got - ref))})
        else:
            err = (got - ref).abs().amax(dim=-1)
            errs.append({"width": width, "rows": [float(e) for e in err]})
    out[key] = errs
print(json.dumps(out))
"""


def _errors(device: str, pairs: list[tuple[str, str]]) -> dict:
    jobs = []
    for task, sol in pairs:
        path, _ = tasks.resolve_task_path(task)
        jobs.append([str(path), str(path.parent / f"{sol}.py"), f"{task}/{sol}"])
    return run_json(SCRIPT, device, json.dumps(jobs), timeout=900)


CPU_PAIRS = _solutions(cuda_too=False)
GPU_PAIRS = _solutions(cuda_too=True)


@pytest.fixture(scope="module")
def errors_cpu():
    return _errors("cpu", CPU_PAIRS)


@pytest.fixture(scope="module")
def errors_cuda():
    return _errors("cuda", GPU_PAIRS)


def _check(results: list[dict]) -> None:
    for r in results:
        if "rows" in r:
            # Softmax: rows 0-2 are the far-negative ones; every row within 1e-5 of float64 softmax.
            assert all(e == e and e < 1e-5 for e in r["rows"]), r
        else:
            # Mean cross-entropy over the four rows, against float64.
            assert r["err"] == r["err"] and r["err"] < 1e-3 * max(1.0, abs(r["ref"])), r


@pytest.mark.timeout(900)
@pytest.mark.parametrize("task, sol", CPU_PAIRS, ids=[f"{t}/{s}" for t, s in CPU_PAIRS])
def test_rows_far_below_zero(errors_cpu, task, sol):
    _check(errors_cpu[f"{task}/{sol}"])


@pytest.mark.gpu
@pytest.mark.parametrize("task, sol", GPU_PAIRS, ids=[f"{t}/{s}" for t, s in GPU_PAIRS])
def test_rows_far_below_zero_compiled(errors_cuda, task, sol):
    _check(errors_cuda[f"{task}/{sol}"])
