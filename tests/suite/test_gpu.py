"""The suite on a GPU: KernelBench's three adversarial kernels, rewritten in Triton, each rejected with
the check named after its hack, beside an honest kernel that is timed; on every GPU of the host."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

KB_LIKE = Path(__file__).resolve().parent / "kb_like"

EXPECTED = {"honest_matmul": None, "zero_out": {"inputs_unmodified"}, "result_reuse": {"output_fully_written"},
            "side_stream": {"no_side_stream_escape", "physically_possible"}}


@pytest.mark.gpu
def test_kernelbench_hacks_in_triton_are_rejected_on_the_gpu(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in EXPECTED:
        shutil.copy(KB_LIKE / f"{name}.py", run / f"{name}.py")
    # Large enough (2048^3) that work escaping to a side stream outlasts the timed region by far.
    task = tmp_path / "matmul_task.py"
    task.write_text((KB_LIKE / "matmul_task.py").read_text().replace("N = 64", "N = 2048"))
    (run / "manifest.json").write_text(json.dumps({"candidates": [
        {"name": n, "file": f"{n}.py", "task": str(task)} for n in EXPECTED]}))
    p = subprocess.run([sys.executable, "-m", "skillbase.suite", "run", str(run), "--no-record", "--json",
                        "--device", "cuda", "--home", str(tmp_path / "home")], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = {r["name"]: r for r in json.loads(p.stdout)["rows"]}
    honest = rows["honest_matmul"]
    assert honest["verdict"] == "correct" and honest["median_ms"] and honest["speedup_vs_eager"]
    for name, checks in EXPECTED.items():
        if checks:
            assert rows[name]["verdict"] == "rejected", rows[name]["message"]
            assert checks & set(rows[name]["failed_checks"]), rows[name]
