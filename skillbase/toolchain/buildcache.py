"""CUDA C++ extension builds cached by content, across processes and sessions.

A candidate builds its kernels with ``torch.utils.cpp_extension.load_inline(name,
...)``; torch keys its build folder by ``name`` alone, so two candidates that
pick the same name rebuild over each other, and a cold build costs about a
minute (nvcc parsing torch's headers). Inside a worker, ``load_inline`` is
wrapped once at start-up: every call builds in a folder named by the hash of
everything that changes the result (sources, flags, torch and CUDA versions,
target architectures), under ``TORCH_EXTENSIONS_DIR`` (the store's cache), and
the module is named by that hash as well, so the same source is built once and
every later process, compile_kernel's included, loads the finished library,
whatever it loaded before. The time spent building is kept per
evaluation and reported apart from the evaluation's own time.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import shutil
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
    relevant["_versions"] = [
        torch.__version__,
        str(torch.version.cuda),
        os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
        os.environ.get("CXX", ""),
    ]
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _names_its_module(arguments: dict[str, Any]) -> bool:
    """Whether the sources declare their Python module under a literal name (``PYBIND11_MODULE(my_ext, m)``
    rather than ``TORCH_EXTENSION_NAME``): such a module only imports under the name it was given."""
    sources = []
    for key in ("cpp_sources", "cuda_sources"):
        value = arguments.get(key) or []
        sources += [value] if isinstance(value, str) else list(value)
    declared = re.findall(r"PYBIND11_MODULE\s*\(\s*(\w+)", "\n".join(sources))
    return any(name != "TORCH_EXTENSION_NAME" for name in declared)


def install(torch: Any) -> None:
    """Wrap ``torch.utils.cpp_extension.load_inline`` in this process (idempotent)."""
    import torch.utils.cpp_extension as ext

    original = ext.load_inline
    if getattr(original, "_skillbase_cached", False):
        return
    signature = inspect.signature(original)

    def default_root() -> Path:
        # torch's own root (its version folder under the user's cache); asking torch makes the folder it
        # names, which is removed again when empty so that no stray `skillbase` folder is left behind.
        made = Path(ext._get_build_directory("skillbase", False))
        try:
            made.rmdir()
        except OSError:
            pass
        return made.parent

    def load_inline(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        if bound.arguments.get("build_directory") is None:
            # Read per call: each evaluation has its own writable layer (layered_cache).
            env_root = os.environ.get("TORCH_EXTENSIONS_DIR")
            root = Path(env_root) if env_root else default_root()
            keyed = f"{bound.arguments['name']}_{build_key(torch, dict(bound.arguments))}"
            folder = root / keyed
            lower = os.environ.get("SKILLBASE_EXTENSIONS_LOWER")
            if lower and (Path(lower) / keyed).is_dir() and not folder.exists():
                # A build this candidate finished before, kept read-only: copied with its times, so ninja
                # finds it up to date and only loads it.
                shutil.copytree(Path(lower) / keyed, folder, symlinks=False)
            folder.mkdir(parents=True, exist_ok=True)
            bound.arguments["build_directory"] = str(folder)
            # The module takes the content-keyed name too. torch versions a name per process: a warm
            # worker that loaded another source under the same name builds this one as `name_v1`, whose
            # build file differs from the one every other process wrote, so ninja rebuilt it in full
            # (61 s on a GPU host, after compile_kernel had built the very same source).
            if not _names_its_module(bound.arguments):
                bound.arguments["name"] = keyed
        start = time.perf_counter()
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            _SPENT["build_s"] += time.perf_counter() - start

    load_inline._skillbase_cached = True
    load_inline.__doc__ = original.__doc__
    ext.load_inline = load_inline
