"""Run a script over built-in solution files in a subprocess and read back the JSON it prints last.

Under the Triton interpreter for ``device="cpu"`` (chosen when kernels are defined, hence the
subprocess), compiled on the GPU for ``"cuda"``. The script gets ``PRELUDE``: ``load(path, name)``
imports a file as a module, and ``device`` is its first argument.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = r"""
import importlib.util, json, sys

def load(path, name="solution"):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

device = sys.argv[1]
"""


def run_json(script: str, device: str, *args: str, timeout: float = 600):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, "-c", PRELUDE + script, device, *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
