"""CUDA C++ extension builds cached by content, across processes and sessions.

A candidate builds its kernels with ``torch.utils.cpp_extension.load_inline(name,
...)``; torch keys its build folder by ``name`` alone, so two candidates that
pick the same name rebuild over each other, and a cold build costs about a
minute (nvcc parsing torch's headers). Inside a worker, ``load_inline`` is
wrapped once at start-up: every call builds in a folder named by the hash of
everything that changes the result (sources, flags, torch and CUDA versions,
target architectures), under ``TORCH_EXTENSIONS_DIR`` (the store's cache), so
the same source is built once and every later process, compile_kernel's
included, loads the finished library. The time spent building is kept per
evaluation and reported apart from the evaluation's own time.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import time
from pathlib import Path
from typing import Any

_SPENT = {"build_s": 0.0}


def spent() -> float:
    """Seconds spent inside load_inline since the last ``reset``."""
    return _SPENT["build_s"]


def reset() -> None:
    _SPENT["build_s"] = 0.0


def build_key(torch: Any, bound: dict[str, Any]) -> str:
    """A hash of what decides a build's output."""
    relevant = {k: v for k, v in bound.items() if k not in ("build_directory", "verbose")}
    relevant["_versions"] = [torch.__version__, str(torch.version.cuda),
                             os.environ.get("TORCH_CUDA_ARCH_LIST", ""), os.environ.get("CXX", "")]
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]


def install(torch: Any) -> None:
    """Wrap ``torch.utils.cpp_extension.load_inline`` in this process (idempotent)."""
    import torch.utils.cpp_extension as ext

    original = ext.load_inline
    if getattr(original, "_skillbase_cached", False):
        return
    signature = inspect.signature(original)
    env_root = os.environ.get("TORCH_EXTENSIONS_DIR")
    root = Path(env_root) if env_root else Path(ext._get_build_directory("skillbase", False)).parent

    def load_inline(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        if bound.arguments.get("build_directory") is None:
            folder = root / f"{bound.arguments['name']}_{build_key(torch, dict(bound.arguments))}"
            folder.mkdir(parents=True, exist_ok=True)
            bound.arguments["build_directory"] = str(folder)
        start = time.perf_counter()
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            _SPENT["build_s"] += time.perf_counter() - start

    load_inline._skillbase_cached = True
    load_inline.__doc__ = original.__doc__
    ext.load_inline = load_inline
