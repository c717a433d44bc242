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
t = time.perf_counter()
m = ext.load_inline("sb_probe", cpp_sources=sys.argv[1], functions=["twice"])
print(json.dumps({"value": m.twice(21), "seconds": time.perf_counter() - t, "build_s": buildcache.spent()}))
"""


def load(tmp_path, source: str) -> dict:
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    out = subprocess.run([sys.executable, "-c", PROBE, source], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_process_loads_the_same_source_without_building(tmp_path):
    src = "int twice(int x) { return 2 * x; }"
    first = load(tmp_path, src)
    second = load(tmp_path, src)
    assert first["value"] == second["value"] == 42
    assert second["seconds"] < 5.0 < first["seconds"]
    folders = [p.name for p in (tmp_path / "ext").iterdir()]
    assert len(folders) == 1 and folders[0].startswith("sb_probe_")


def test_the_build_folder_follows_the_content_not_the_name():
    import torch

    from skillbase.toolchain.buildcache import build_key

    a = {"name": "ext", "cpp_sources": "int f();", "extra_cuda_cflags": ["-O3"]}
    assert build_key(torch, a) == build_key(torch, {**a, "verbose": True, "build_directory": "/x"})
    assert build_key(torch, a) != build_key(torch, {**a, "cpp_sources": "int g();"})
    assert build_key(torch, a) != build_key(torch, {**a, "extra_cuda_cflags": ["-O2"]})
