"""Automatic shape shrinking for the Triton interpreter: sizes in ints, tuples and lists are halved
(tied sizes together) until one forward fits, keeping what the reference needs to run; traced on the
meta device only, so these tests cost no memory."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from skillbase.errors import TaskError
from skillbase.toolchain import shrink, tasks

MIB = 2**20
GFLOP = 10**9


def task_file(tmp_path: Path, body: str, name: str = "task.py") -> Path:
    path = tmp_path / name
    path.write_text("import torch\nimport torch.nn as nn\n" + textwrap.dedent(body))
    return path


def moved(path: Path, shape: dict) -> int:
    tr = tasks.trace_reference(tasks.load_task_module(path, shape))
    return tr.input_bytes + tr.output_bytes + tr.param_bytes


def test_tied_sizes_in_a_tuple_and_an_int_are_halved_together(tmp_path):
    # predictions (B, W) * targets (B,) broadcasts only while W == B: neither can be halved alone.
    path = task_file(tmp_path, """
        class Model(nn.Module):
            def forward(self, predictions, targets):
                return torch.mean(torch.clamp(1 - predictions * targets, min=0))
        batch_size = 8192
        input_shape = (8192,)
        def get_inputs():
            return [torch.rand(batch_size, *input_shape), torch.randint(0, 2, (batch_size,)).float() * 2 - 1]
        def get_init_inputs():
            return []
        """)
    found = shrink.shrink_shape(path, 16 * MIB, 2 * GFLOP)
    assert isinstance(found.shape["input_shape"], tuple)
    assert found.shape["batch_size"] == found.shape["input_shape"][0] < 8192
    assert found.moved_bytes <= 16 * MIB and moved(path, found.shape) == found.moved_bytes
    # JSON turns the tuple into a list; applying it gives the tuple back.
    tm = tasks.load_task_module(path, {"input_shape": list(found.shape["input_shape"]), "batch_size": 4})
    assert tm.module.input_shape == found.shape["input_shape"]


def test_channels_stay_divisible_by_groups_and_small_ints_are_left_alone(tmp_path):
    path = task_file(tmp_path, """
        class Model(nn.Module):
            def __init__(self, cin, cout, k, groups):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, k, groups=groups)
            def forward(self, x):
                return self.conv(x)
        batch_size = 64
        in_channels = 48
        out_channels = 96
        kernel_size = 3
        groups = 12
        height = width = 256
        def get_inputs():
            return [torch.randn(batch_size, in_channels, height, width)]
        def get_init_inputs():
            return [in_channels, out_channels, kernel_size, groups]
        """)
    found = shrink.shrink_shape(path, 4 * MIB, 2 * GFLOP)
    s = {**dict(in_channels=48, out_channels=96), **found.shape}
    assert "kernel_size" not in found.shape and "groups" not in found.shape
    assert s["in_channels"] % 12 == 0 and s["out_channels"] % 12 == 0
    assert found.moved_bytes <= 4 * MIB


def test_sizes_in_a_list_of_layer_widths_shrink(tmp_path):
    path = task_file(tmp_path, """
        class Model(nn.Module):
            def __init__(self, sizes):
                super().__init__()
                self.layers = nn.Sequential(*[nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])
            def forward(self, x):
                return self.layers(x)
        batch_size = 128
        layer_sizes = [4096, 8192, 4096]
        def get_inputs():
            return [torch.randn(batch_size, layer_sizes[0])]
        def get_init_inputs():
            return [layer_sizes]
        """)
    found = shrink.shrink_shape(path, 8 * MIB, 2 * GFLOP)
    assert isinstance(found.shape["layer_sizes"], list) and max(found.shape["layer_sizes"]) < 8192
    assert found.moved_bytes <= 8 * MIB < found.original_bytes


def test_a_task_without_sizes_cannot_be_shrunk(tmp_path):
    path = task_file(tmp_path, """
        class Model(nn.Module):
            def forward(self, x):
                return x * 2
        def get_inputs():
            return [torch.randn(4096, 4096)]
        def get_init_inputs():
            return []
        """)
    with pytest.raises(TaskError, match="META\\['small'\\]"):
        shrink.shrink_shape(path, 1 * MIB, GFLOP)


def test_cpu_benchmarks_shrink_automatically_and_say_so(tmp_path):
    from skillbase.config import Settings
    from skillbase.toolchain import Toolchain

    path = task_file(tmp_path, """
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x)
        rows = 4096
        cols = 4096
        def get_inputs():
            return [torch.randn(rows, cols)]
        def get_init_inputs():
            return []
        """)
    with Toolchain(Settings.from_env(env={}, home=tmp_path / "home", cpu_shape_mb=1)) as tc:
        task = tc.load_task(str(path))
        shape, note = tc.cpu_shape(task)
        assert shape and moved(path, shape) <= 1 * MIB
        assert "shrunk automatically" in note and "limit 1 MiB" in note
        assert tc.cpu_shape(task) == (shape, note)  # cached by the task's content
        assert tc.shrunk.dir.is_dir()
