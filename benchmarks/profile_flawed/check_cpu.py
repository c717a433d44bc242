"""Check every deliberately flawed Triton kernel against its task's reference under the Triton
interpreter, at the task's small shape (CPU only; set TRITON_INTERPRET=1 before running).

    TRITON_INTERPRET=1 python benchmarks/profile_flawed/check_cpu.py     # prints one line per kernel
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def check(name: str) -> str:
    """'ok' or what differs, for flaw ``name``."""
    import torch

    from skillbase.toolchain.tasks import import_module_at, load_task_module

    tm = load_task_module(HERE / name / "task.py", None)
    tm = load_task_module(HERE / name / "task.py", dict(tm.module.META["small"]))
    sol = import_module_at(HERE / name / "flawed.py", kind="solution")
    torch.manual_seed(0)
    inputs = tm.get_inputs()
    want = tm.Model(*tm.get_init_inputs())(*inputs)
    got = sol.ModelNew(*tm.get_init_inputs())(*inputs)
    meta = tm.module.META
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    if not torch.allclose(got, want, atol=max(meta["atol"], 1e-6), rtol=max(meta["rtol"], 1e-6)):
        return f"max abs error {(got - want).abs().max().item():.3g}"
    return "ok"


def main() -> int:
    flaws = json.loads((HERE / "flaws.json").read_text())
    bad = 0
    for name, spec in ((n, s) for n, s in flaws.items() if not n.startswith("_")):
        if spec["language"] != "triton":
            print(f"{name}: skipped (CUDA C++ runs on a GPU only)")
            continue
        verdict = check(name)
        bad += verdict != "ok"
        print(f"{name}: {verdict}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
