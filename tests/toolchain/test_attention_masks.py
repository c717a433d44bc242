"""Every built-in causal-attention solution hides future keys however large their scores are.

A finite additive mask (a score minus 1e6) lets a future key through once its scaled score passes
the constant plus the row's own maximum: fp16 queries and keys in the thousands reach that. The H200
run of 2026-11-29 caught it in the wider-input check (one query row of 8 million outputs wrong); here
the inputs are built so that one future key's score is far past such a constant, and every solution
runs under Triton's interpreter (a subprocess: the interpreter is chosen when kernels are defined) and,
on a GPU, compiled.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skillbase.toolchain import tasks

from .solution_script import run_json

TASK, _ = tasks.resolve_task_path("causal_attention")
SOLUTIONS = list(tasks.solutions_of(TASK))

SCRIPT = r"""
import math, torch

paths = sys.argv[2:]
B, H, S, D = 1, 1, 160, 64
g = torch.Generator().manual_seed(3)
q, k, v = (torch.randn(B, H, S, D, generator=g).half() for _ in range(3))
# Key 100 scores 2 x 2000 x 2000 / sqrt(64) = 1e6 (1.44e6 in log2 units) against queries 3 and 130 and
# about 0 against every other key: query 3 must not see it (100 > 3), query 130 must see only it.
k[..., :2] = 0
k[0, 0, 100, :2] = 2000
q[0, 0, 3, :2] = 2000
q[0, 0, 130, :2] = 2000
# The exact answer: float64 softmax over the visible keys.
s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(D)
s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
ref = torch.softmax(s, dim=-1) @ v.double()
out = {}
for path in paths:
    got = load(path).ModelNew()(q.to(device), k.to(device), v.to(device)).double().cpu()
    err = (got - ref).abs().amax(dim=-1)[0, 0]
    out[path] = {"max_err": float(err.max()), "row": int(err.argmax()),
                 "row3_err": float(err[3]), "row130_err": float(err[130])}
print(json.dumps(out))
"""


def _errors(device: str) -> dict:
    paths = [str(TASK.parent / f"{s}.py") for s in SOLUTIONS]
    return {Path(p).stem: r for p, r in run_json(SCRIPT, device, *paths).items()}


@pytest.fixture(scope="module")
def errors_cpu():
    return _errors("cpu")


@pytest.fixture(scope="module")
def errors_cuda():
    return _errors("cuda")


@pytest.mark.parametrize("solution", SOLUTIONS)
def test_a_future_key_with_a_huge_score_stays_hidden(errors_cpu, solution):
    _check(errors_cpu[solution])


@pytest.mark.gpu
@pytest.mark.parametrize("solution", SOLUTIONS)
def test_a_future_key_with_a_huge_score_stays_hidden_compiled(errors_cuda, solution):
    _check(errors_cuda[solution])


def _check(r: dict) -> None:
    # Query 130 sees key 100 alone (its output is v[100]); query 3 must not see it at all.
    assert r["row130_err"] < 1e-2, r
    assert r["row3_err"] < 1e-2, r
    assert r["max_err"] < 1e-2, r
