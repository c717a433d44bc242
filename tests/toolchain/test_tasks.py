"""Task loading: built-in names and paths, shapes applied as globals, metadata, the floor, bad tasks."""

import pytest

from skillbase.errors import LimitExceeded, NotFound, TaskError
from skillbase.toolchain import tasks

from .conftest import FIXTURES

MAX = 256_000


def test_meta_task_metadata_and_default_floor():
    t = tasks.describe(FIXTURES / "relu_task.py", builtin=False, max_bytes=MAX)
    assert t.name == "relu_task" and t.family == "elementwise" and t.dtype == "fp32"
    assert t.shape == {"N": 1 << 24}
    assert t.input_shapes == [[1 << 24]] and t.output_shapes == [[1 << 24]]
    assert t.bytes_moved == 2 * 4 * (1 << 24)  # default: inputs + outputs
    assert t.flops == 1 << 24  # one FLOP per element for a relu (toolchain/opcost.py)
    assert t.small_shape == {"N": 3000} and t.extra_shapes == [{"N": 12345}]
    assert t.tolerance.atol == 1e-4 and t.regime == "small"  # 128 MiB at a nominal 3.35 TB/s: 40 µs
    assert t.signature == "elementwise:fp32:small"
    assert len(t.source_hash) == 16


def test_plain_kernelbench_task_gets_family_and_flops_from_its_trace_and_shape_globals():
    t = tasks.describe(FIXTURES / "matmul_task.py", builtin=False, max_bytes=MAX)
    assert t.family == "matmul" and t.dtype == "fp32" and t.families == ["matmul"]
    assert t.tolerance.atol == 1e-4  # a traced family never relaxes the tolerance: no META, KernelBench's
    assert t.flops == 2 * 256 * 512 * 128
    assert t.bytes_moved == 4 * (256 * 128 + 128 * 512 + 256 * 512)
    assert t.shape == {"M": 256, "N": 512, "K": 128}
    assert t.small_shape is None


def test_weights_count_in_bytes_and_meta_callables_override():
    t = tasks.describe(FIXTURES / "linear_task.py", builtin=False, max_bytes=MAX)
    params = 4 * (256 * 128 + 128)
    assert t.bytes_moved == 4 * (64 * 256 + 64 * 128) + params
    assert t.flops == 2 * 64 * 256 * 128 + 8 * 64 * 128
    assert t.tolerance.atol == 1e-2  # fp32 matmul families allow TF32 rounding by default
    small = tasks.describe(FIXTURES / "linear_task.py", builtin=False, max_bytes=MAX, shape=t.small_shape)
    assert small.flops == 2 * 5 * 48 * 24 + 8 * 5 * 24  # the callable sees the shape in effect
    assert small.input_shapes == [[5, 48]]


def test_shapes_are_fresh_module_globals_and_do_not_leak():
    a = tasks.load_task_module(FIXTURES / "relu_task.py", {"N": 7})
    b = tasks.load_task_module(FIXTURES / "relu_task.py")
    assert a.get_inputs()[0].shape == (7,)
    assert b.module.N == 1 << 24
    with pytest.raises(TaskError, match="not globals"):
        tasks.load_task_module(FIXTURES / "relu_task.py", {"NOPE": 1})


def test_bad_tasks_raise_clear_errors(tmp_path):
    with pytest.raises(TaskError, match="lacks `Model`"):
        tasks.describe(FIXTURES / "bad_task_no_model.py", builtin=False, max_bytes=MAX)
    with pytest.raises(TaskError, match="does not import.*broken on purpose"):
        tasks.describe(FIXTURES / "bad_task_import.py", builtin=False, max_bytes=MAX)
    with pytest.raises(NotFound, match="no task named"):
        tasks.resolve_task_path("no_such_task_anywhere")
    big = tmp_path / "big_task.py"
    big.write_text("# " + "x" * 2000 + "\n")
    with pytest.raises(LimitExceeded, match="limit is 1000"):
        tasks.describe(big, builtin=False, max_bytes=1000)
    bad_family = tmp_path / "task.py"
    bad_family.write_text((FIXTURES / "relu_task.py").read_text().replace('"elementwise"', '"nonsense"'))
    with pytest.raises(TaskError, match="family 'nonsense'"):
        tasks.describe(bad_family, builtin=False, max_bytes=MAX)


def test_builtin_names_resolve_to_task_files():
    names = tasks.builtin_names()
    if not names:
        pytest.skip("no built-in tasks installed")
    path, builtin = tasks.resolve_task_path(names[0])
    assert builtin and path.name == "task.py" and path.parent.name == names[0]
    sols = tasks.solutions_of(path)
    assert "task" not in sols and all(p.endswith(".py") and p != str(path) for p in sols.values())


def test_regime_thresholds():
    assert tasks.regime_of(1_000, 0, "fp32") == "tiny"
    assert tasks.regime_of(100_000_000, 0, "fp32") == "small"
    assert tasks.regime_of(1_000_000_000, 0, "fp32") == "medium"
    assert tasks.regime_of(0, 2 * 8192**3, "bf16") == "large"
