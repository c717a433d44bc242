"""The process Nsight Compute profiles: one candidate's forward inside an NVTX range.

    python -m skillbase.toolchain.profile_runner REQUEST.json RESULT.json

REQUEST: ``{"task_path", "shape", "solution_path", "mode": "ncu" | "torch", "warmup"}``.
The task is imported at its shape, ModelNew built from the task's init inputs,
inputs drawn on the GPU, and the forward called ``warmup`` times outside any range
(Triton compiles and autotunes there, unprofiled). Then one call runs inside the
NVTX range ncu filters on (mode "ncu"), or under the torch profiler (mode "torch",
when ncu cannot run), whose kernel list with durations is written to RESULT.
The application's stdout is sent to stderr, so ncu's CSV on stdout stays clean.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def run(req: dict) -> dict:
    """Build, warm up and run the candidate once in the profiled region; returns what was seen."""
    import torch

    from skillbase.toolchain.ncu import NVTX_RANGE
    from skillbase.toolchain.tasks import import_module_at, load_task_module

    tm = load_task_module(Path(req["task_path"]), req.get("shape"))
    module = import_module_at(Path(req["solution_path"]), kind="solution")
    dev = torch.device("cuda")
    with torch.device(dev), torch.no_grad():
        torch.manual_seed(0)
        model = module.ModelNew(*tm.get_init_inputs())
        if isinstance(model, torch.nn.Module):
            model = model.to(dev)
        torch.manual_seed(1)
        inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in tm.get_inputs()]
        for _ in range(int(req.get("warmup", 3))):
            model(*inputs)
        torch.cuda.synchronize()
        if req.get("mode") == "torch":
            return {"kernels": _torch_kernels(torch, lambda: model(*inputs))}
        torch.cuda.nvtx.range_push(NVTX_RANGE)
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    return {"kernels": []}


def _torch_kernels(torch, fn) -> list[dict]:
    from skillbase.toolchain.profiling import profile_call
    from skillbase.toolchain.timing import Clock

    prof = profile_call(torch, fn, Clock(torch))
    return [{"name": a.name, "duration_us": a.dur_us} for a in prof.activities if a.kind == "kernel"]


def main(argv: list[str]) -> int:
    req_path, out_path = argv
    os.dup2(2, 1)  # the candidate's prints must not mix with ncu's CSV on stdout
    result = run(json.loads(Path(req_path).read_text()))
    Path(out_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
