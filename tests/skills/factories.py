"""Small, valid skills and example files the skill tests build on."""

from __future__ import annotations

from pathlib import Path

from skillbase.models import AppliesWhen, Provenance, Skill
from skillbase.skills.markdown import write_skill_dir

BODY = """## When to use it
- An elementwise kernel that launches once per op.

## The idea
Do the whole chain in one pass so intermediates never touch DRAM.

## Steps
1. Load once.
2. Compute everything in registers.
3. Store once.

## Example
```python
y = tl.load(x_ptr + offs, mask=mask) * 2.0
tl.store(y_ptr + offs, y, mask=mask)
```

## How to check it worked
- `skillbase bench examples/task.py examples/after.py`: GB/s near measured peak.
"""

TASK = '''"""y = 2x over N fp32 values."""
import torch
import torch.nn as nn

N = 1 << 20


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []


META = {"family": "elementwise", "dtype": "fp32", "description": "2x", "small": {"N": 1000}}
'''


def solution(factor: str = "2.0") -> str:
    """A Triton ModelNew computing ``x * factor`` (2.0 is correct; anything else is not)."""
    return f'''"""Scale by a constant in one Triton kernel."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * {factor}, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
'''


CUDA_BROKEN = '''"""A CUDA example with a syntax error in its kernel."""
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x
    if (i < n) y[i] = 2.0f * x[i];
}
torch::Tensor run(torch::Tensor x) { auto y = torch::empty_like(x); return y; }
"""
ext = load_inline(name="scale_broken", cpp_sources="torch::Tensor run(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["run"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.run(x)
'''


def make_skill(name: str = "scale-in-one-pass", **overrides) -> Skill:
    """A skill that passes lint, with a runnable Triton example in ``files``."""
    fields = dict(
        name=name,
        description="Scales a tensor in one Triton pass. Use it when an elementwise chain launches one kernel per op.",
        techniques=["elementwise-fusion"],
        applies_when=AppliesWhen(families=["elementwise"], bottlenecks=["memory"], dtypes=["fp32"]),
        languages=["triton"],
        expected_effect="One read and one write of the tensor.",
        pitfalls=["Forgetting the mask on the tail."],
        examples=[{"task": "examples/task.py", "solution": "examples/after.py"}],
        status="approved",
        provenance=Provenance(author="tests", source="curator"),
        body=BODY,
        files={"examples/task.py": TASK, "examples/after.py": solution()},
    )
    fields.update(overrides)
    return Skill(**fields)


def write_skill(root: Path, skill: Skill) -> Path:
    """Write the skill's folder under ``root``; returns the folder."""
    return write_skill_dir(skill, root / skill.name)
