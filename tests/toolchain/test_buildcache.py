"""CUDA C++ (load_inline) builds are cached by content across processes: the second process
that loads the same source does not build again. Checked with a C++-only extension, which
needs no GPU and goes through the same load_inline path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, sys, time, torch
from skillbase.toolchain import buildcache
buildcache.install(torch)
import torch.utils.cpp_extension as ext
for earlier in sys.argv[2:]:  # what a warm worker loaded before, under the same name
    ext.load_inline("sb_probe", cpp_sources=earlier, functions=["twice"])
before = buildcache.spent()
t = time.perf_counter()
m = ext.load_inline("sb_probe", cpp_sources=sys.argv[1], functions=["twice"])
print(json.dumps({"value": m.twice(21), "seconds": time.perf_counter() - t, "build_s": buildcache.spent() - before}))
"""


def load(tmp_path, source: str, *earlier: str) -> dict:
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    out = subprocess.run([sys.executable, "-c", PROBE, source, *earlier], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_compile_kernels_build_is_loaded_by_a_later_process_without_building(tmp_path, monkeypatch):
    """compile_kernel's full build (on a GPU host) imports the solution through the same content-keyed
    load_inline as the workers: the evaluation that follows loads the library, it does not build again."""
    import time
    from pathlib import Path

    from skillbase.toolchain.compile import CompileJob, full_extension_build

    src = "int twice(int x) { return 2 * x; }"
    solution = tmp_path / "solution.py"
    solution.write_text("import torch.utils.cpp_extension as ext\n"
                        f"m = ext.load_inline('sb_probe', cpp_sources={src!r}, functions=['twice'])\n"
                        "assert m.twice(21) == 42\n")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    job = CompileJob(solution.read_text(), solution, "solution.py", "sm_90", tmp_path)
    t = time.perf_counter()
    ok, log = full_extension_build(job, solution, timeout=300)
    built_s = time.perf_counter() - t
    assert ok, log[-2000:]
    second = load(tmp_path, src)  # another process, as a GPU worker's evaluation would be
    assert second["value"] == 42 and second["build_s"] < 5.0 < built_s
    folders = [p.name for p in (tmp_path / "ext").iterdir()]
    assert len(folders) == 1 and folders[0].startswith("sb_probe_")  # the content-keyed folder, one build
    # A warm worker that loaded another source under the same name first: torch would version this
    # load as sb_probe_v1, write another build file and build it all again (61 s on a GPU host).
    warm = load(tmp_path, src, "int twice(int x) { return x + x; }")
    assert warm["value"] == 42 and warm["build_s"] < 5.0 < built_s, warm


def test_a_module_declared_under_a_literal_name_keeps_that_name():
    from skillbase.toolchain.buildcache import _names_its_module

    assert not _names_its_module({"cpp_sources": "int f();", "functions": ["f"]})
    assert not _names_its_module({"cpp_sources": ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}"]})
    assert _names_its_module({"cpp_sources": "int f();", "cuda_sources": "PYBIND11_MODULE( my_ext , m) {}"})


def test_the_build_folder_follows_the_content_not_the_name():
    import torch

    from skillbase.toolchain.buildcache import build_key

    a = {"name": "ext", "cpp_sources": "int f();", "extra_cuda_cflags": ["-O3"]}
    assert build_key(torch, a) == build_key(torch, {**a, "verbose": True, "build_directory": "/x"})
    assert build_key(torch, a) != build_key(torch, {**a, "cpp_sources": "int g();"})
    assert build_key(torch, a) != build_key(torch, {**a, "extra_cuda_cflags": ["-O2"]})
