"""KernelBench-format tasks: find them, import them at a shape, and measure their floor.

A task module defines ``Model``, ``get_inputs()`` and ``get_init_inputs()`` and
optionally ``META`` (see docs/tasks.md). A *shape* is a dict of module-global
overrides; it is applied by updating the freshly imported module's globals, so
``get_inputs`` and the models see it. What the task computes is read from its
traced forward (``opgraph`` on torch's ``meta`` device, costing no memory and no
arithmetic; ``understand`` turns the trace into families, bytes, FLOPs and a
regime); ``META`` overrides the family, dtype, bytes and FLOPs, never required.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import sys
import types
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skillbase.errors import NotFound, TaskError
from skillbase.models import DTYPES, FAMILIES, QUALIFIER_FAMILIES, TaskInfo, TaskUnderstanding, Tolerance, content_hash
from skillbase.toolchain import opgraph, understand
from skillbase.toolchain.source import read_source

_DTYPE_NAMES = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "int8": "int8",
}

# Nominal H100 SXM ceilings, used only to name a task's regime (tiny..large)
# consistently across machines; measured peaks are used for every reported figure.
_NOMINAL_GBPS = 3350.0
_NOMINAL_TFLOPS = {"fp32": 495.0, "fp16": 989.0, "bf16": 989.0, "fp8": 1979.0, "int8": 1979.0, "mixed": 989.0}

_TC_FAMILIES = {"matmul", "matmul_epilogue", "attention", "conv"}


@dataclass
class TaskModule:
    """A task imported at one shape."""

    path: Path
    module: types.ModuleType
    shape: dict[str, Any]

    @property
    def Model(self):
        return self.module.Model

    def get_inputs(self):
        return self.module.get_inputs()

    def get_init_inputs(self):
        return self.module.get_init_inputs()

    @property
    def meta(self) -> dict:
        return getattr(self.module, "META", {}) or {}


def builtin_dir() -> Path:
    """Directory of the built-in tasks (``seeds/tasks``)."""
    from skillbase.seeds import TASKS_DIR

    return TASKS_DIR


def builtin_names(tasks_dir: Path | None = None) -> list[str]:
    """Names of the built-in tasks: every ``seeds/tasks/<name>/task.py``."""
    root = tasks_dir or builtin_dir()
    if not root.is_dir():
        return []
    return sorted(p.parent.name for p in root.glob("*/task.py"))


def resolve_task_path(name_or_path: str, tasks_dir: Path | None = None) -> tuple[Path, bool]:
    """Absolute path of a task given a built-in name or a file path, and whether it is built in."""
    root = tasks_dir or builtin_dir()
    try:
        candidate = root / name_or_path / "task.py"
        if "/" not in name_or_path and candidate.is_file():
            return candidate.resolve(), True
        p = Path(name_or_path).expanduser()
        if p.is_dir() and (p / "task.py").is_file():
            p = p / "task.py"
        if p.is_file():
            return p.resolve(), False
    except (OSError, ValueError):  # no name a file system takes (too long, a NUL byte): not a task file
        pass
    known = ", ".join(builtin_names(root)) or "none installed"
    raise NotFound(f"no task named {name_or_path!r}", hint=f"use a file path or a built-in name ({known})")


def import_module_at(path: Path, shape: dict[str, Any] | None = None, *, kind: str = "task") -> types.ModuleType:
    """Import ``path`` as a fresh module (never shared with earlier imports) and apply ``shape``.

    The module is registered in ``sys.modules`` only while it executes (dataclasses
    and pickling need that) and removed afterwards so that nothing leaks between
    evaluations.
    """
    name = f"_skillbase_{kind}_{content_hash(str(path))}_{os.urandom(4).hex()}"
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise TaskError(f"cannot import {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as e:
        raise TaskError(
            f"task {str(path)!r} does not import: {type(e).__name__}: {e}",
            hint=f"it needs the module {e.name!r}: install it (pip install {e.name}) where skillbase runs"
            if e.name
            else None,
        ) from e
    except (Exception, SystemExit, KeyboardInterrupt) as e:  # a module calling sys.exit() is a bad module
        raise TaskError(f"task {str(path)!r} does not import: {type(e).__name__}: {e}") from e
    finally:
        sys.modules.pop(name, None)
    if shape:
        apply_shape(module, shape, path)
    return module


def check_shape(module: types.ModuleType, shape: dict[str, Any], path: Path | str = "") -> None:
    """Raise TaskError unless every key of ``shape`` is already a global of the task."""
    if not isinstance(shape, dict):
        raise TaskError(f"task {str(path)!r}: a shape must be a dict of global overrides, got {shape!r}")
    unknown = [k for k in shape if k not in vars(module)]
    if unknown:
        raise TaskError(
            f"shape keys {unknown} are not globals of task {str(path)!r}",
            hint="a shape overrides module-level size variables such as M, N, batch_size",
        )


def apply_shape(module: types.ModuleType, shape: dict[str, Any], path: Path | str = "") -> None:
    """Override the module's shape globals; every key must already be a global of the task.

    An override keeps the type of the global it replaces where JSON lost it: a list given
    for a tuple global (``input_shape = (32768,)``) becomes a tuple again."""
    check_shape(module, shape, path)
    g = vars(module)
    g.update({k: tuple(v) if isinstance(v, list) and isinstance(g[k], tuple) else v for k, v in shape.items()})


def load_task_module(path: Path, shape: dict[str, Any] | None = None) -> TaskModule:
    """Import a task at a shape and check it has Model, get_inputs and get_init_inputs."""
    module = import_module_at(path, shape)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise TaskError(f"task {str(path)!r} lacks `{attr}`", hint="see docs/tasks.md for the task format")
    meta = getattr(module, "META", {}) or {}
    if not isinstance(meta, dict):
        raise TaskError(f"task {str(path)!r}: META must be a dict")
    return TaskModule(Path(path), module, dict(shape or {}))


def flatten_tensors(obj) -> list:
    """The tensors of a (possibly nested) tuple/list/dict output, in order."""
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in flatten_tensors(x)]
    if isinstance(obj, dict):
        return [t for k in sorted(obj) for t in flatten_tensors(obj[k])]
    return []


def shape_globals(tm: TaskModule) -> dict[str, Any]:
    """The shape globals in effect: the keys any declared shape touches, else every public numeric global."""
    meta = tm.meta
    keys: list[str] = list((meta.get("small") or {}).keys())
    for extra in meta.get("extra_shapes") or []:
        keys += [k for k in extra if k not in keys]
    g = vars(tm.module)
    if not keys:
        keys = [
            k for k, v in g.items() if not k.startswith("_") and isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
    return {k: g[k] for k in keys if k in g}


@dataclass
class Trace:
    """What one forward of the reference at a shape looks like, measured on the meta device."""

    input_shapes: list[list[int]]
    output_shapes: list[list[int]]
    input_bytes: int
    output_bytes: int
    param_bytes: int
    flops: int
    dtype: str
    output_dtypes: list[str]


def trace_reference(tm: TaskModule, *, fallbacks: bool = False) -> Trace:
    """Run the reference once on the meta device: shapes, bytes and FLOPs, no memory used. With
    ``fallbacks``, a model or forward that needs real numbers is traced as ``opgraph.trace`` does."""
    try:
        return _trace_of(_op_graph(tm, fallbacks=fallbacks))
    except opgraph.TraceFailed as e:
        raise TaskError(
            f"task {str(tm.path)!r} could not be traced: {e}",
            hint="build tensors with torch.randn(...) and no explicit .cuda()/.to(device): skillbase picks the device",
        ) from e


def _op_graph(tm: TaskModule, *, fallbacks: bool = True) -> opgraph.OpGraph:
    return opgraph.trace(tm, reload=lambda shape: load_task_module(tm.path, shape), fallbacks=fallbacks)


def _trace_of(g: opgraph.OpGraph) -> Trace:
    return Trace(
        input_shapes=g.input_shapes,
        output_shapes=g.output_shapes,
        input_bytes=g.input_bytes,
        output_bytes=g.output_bytes,
        param_bytes=g.param_bytes,
        flops=g.flops,
        dtype=g.dtype,
        output_dtypes=g.output_dtypes,
    )


def untraced(tm: TaskModule) -> Trace:
    """What can be known of a task whose forward does not trace: its inputs, built on the meta device."""
    import torch

    try:
        with torch.device("meta"):
            ins = [t for t in flatten_tensors(list(tm.get_inputs()))]
    except (Exception, SystemExit):  # noqa: BLE001 - the summary already says the task could not be traced
        ins = []
    floats = [t for t in ins if t.is_floating_point()]
    dtype = opgraph.dtype_name(floats[0].dtype) if floats and len({t.dtype for t in floats}) == 1 else "mixed"
    return Trace(
        input_shapes=[list(t.shape) for t in ins],
        output_shapes=[],
        param_bytes=0,
        flops=0,
        input_bytes=sum(t.numel() * t.element_size() for t in ins),
        output_bytes=0,
        dtype=dtype if dtype in DTYPES else "mixed",
        output_dtypes=[],
    )


@functools.lru_cache(maxsize=1)
def understanding_version() -> str:
    """A hash of the code that traces and understands tasks, and torch's version: part of every cache key."""
    import torch

    h = hashlib.sha256(torch.__version__.encode())
    for name in ("opcost.py", "opgraph.py", "understand.py", "tasks.py"):
        h.update((Path(__file__).parent / name).read_bytes())
    return h.hexdigest()[:12]


def understand_task(tm: TaskModule, source_hash: str, cache=None) -> tuple[Trace, TaskUnderstanding]:
    """The trace facts and the understanding of a task at its shape, from ``cache`` (a JsonCache keyed by the
    task's content hash and shape) when it has them. A forward that cannot be traced is described as family
    'other' with the reasons in the summary, never an error."""
    key = json.dumps(["understand", understanding_version(), source_hash, tm.shape], sort_keys=True, default=str)
    key = hashlib.sha256(key.encode()).hexdigest()[:32]
    hit = cache.get(key) if cache is not None else None
    if hit is not None:
        try:
            return Trace(**hit["trace"]), TaskUnderstanding.model_validate(hit["understanding"])
        except (KeyError, TypeError, ValueError):
            pass  # an unreadable entry is a miss
    try:
        graph = _op_graph(tm)
        tr, u = _trace_of(graph), understand.understand(graph)
    except opgraph.TraceFailed as e:
        tr = untraced(tm)
        u = understand.failed(e.reasons, tr.input_bytes)
    if cache is not None:
        cache.put(key, {"trace": asdict(tr), "understanding": u.model_dump(mode="json")})
    return tr, u


def default_tolerance(dtype: str, family: str) -> Tolerance:
    """Tolerances by dtype; fp32 tensor-core families allow TF32 rounding (Triton's tl.dot default).
    ``family`` is the one META declares ('other' without META): a traced family never relaxes a task."""
    if dtype == "fp32":
        return Tolerance(atol=1e-2, rtol=1e-2) if family in _TC_FAMILIES else Tolerance(atol=1e-4, rtol=1e-4)
    if dtype == "fp16":
        return Tolerance(atol=1e-2, rtol=1e-2)
    if dtype in ("bf16", "mixed"):
        return Tolerance(atol=2e-2, rtol=2e-2)
    return Tolerance(atol=1e-1, rtol=1e-1)


def regime_of(bytes_moved: int, flops: int, dtype: str) -> str:
    """tiny/small/medium/large by the floor time on a nominal H100 (<10 µs, <100 µs, <1 ms, more)."""
    floor_us = max(bytes_moved / (_NOMINAL_GBPS * 1e3), flops / (_NOMINAL_TFLOPS.get(dtype, 989.0) * 1e6))
    if floor_us < 10:
        return "tiny"
    if floor_us < 100:
        return "small"
    if floor_us < 1000:
        return "medium"
    return "large"


def _meta_number(meta: dict, key: str, path: Path) -> int | None:
    value = meta.get(key)
    if value is None:
        return None
    try:
        return int(value() if callable(value) else value)
    except Exception as e:
        raise TaskError(f"task {str(path)!r}: META[{key!r}] failed: {type(e).__name__}: {e}") from e


def task_name(path: Path, builtin: bool) -> str:
    """A built-in task's directory name; a file's stem (or its directory's name for ``task.py``)."""
    return path.parent.name if builtin or path.name == "task.py" else path.stem


def solutions_of(path: Path) -> dict[str, str]:
    """Sibling solution files of a ``task.py``: name -> absolute path."""
    if path.name != "task.py":
        return {}
    return {
        p.stem: str(p) for p in sorted(path.parent.glob("*.py")) if p.name != "task.py" and not p.name.startswith("_")
    }


def describe(path: Path, *, builtin: bool, max_bytes: int, shape: dict[str, Any] | None = None, cache=None) -> TaskInfo:
    """Load a task file and build its TaskInfo (families, shapes, bytes, FLOPs, regime, what its forward runs)
    at ``shape`` (default: its own). ``cache`` (a JsonCache) keeps the traced part by content hash and shape."""
    source = read_source(path, max_bytes, what="task")
    tm = load_task_module(path, shape)
    meta = tm.meta
    tr, und = understand_task(tm, content_hash(source), cache)
    family = meta.get("family", und.family)
    if family not in FAMILIES or family in QUALIFIER_FAMILIES:
        raise TaskError(
            f"task {str(path)!r}: family {family!r} is not one of {sorted(set(FAMILIES) - QUALIFIER_FAMILIES)}"
        )
    dtype = meta.get("dtype", tr.dtype)
    if dtype not in DTYPES:
        raise TaskError(f"task {str(path)!r}: dtype {dtype!r} is not one of {list(DTYPES)}")
    bytes_moved = _meta_number(meta, "bytes", path)
    if bytes_moved is None:
        bytes_moved = und.bytes
    flops = _meta_number(meta, "flops", path)
    if flops is None:
        flops = und.flops
    # KernelBench's tolerances unless META declares a family that may use TF32 (or sets them).
    tol = default_tolerance(dtype, meta.get("family", "other"))
    if "atol" in meta or "rtol" in meta:
        tol = Tolerance(atol=float(meta.get("atol", tol.atol)), rtol=float(meta.get("rtol", tol.rtol)))
    small = meta.get("small")
    extra = list(meta.get("extra_shapes") or [])
    for s in ([small] if small else []) + extra:
        check_shape(tm.module, s, path)
    traced = [f for f in und.families if f != "other" or family == "other"]
    return TaskInfo(
        name=task_name(path, builtin),
        path=str(path),
        family=family,
        dtype=dtype,
        description=str(meta.get("description", "") or (tm.Model.__doc__ or "")).strip(),
        shape=shape_globals(tm),
        input_shapes=tr.input_shapes,
        output_shapes=tr.output_shapes,
        bytes_moved=int(bytes_moved),
        flops=int(flops),
        regime=regime_of(bytes_moved, flops, dtype),
        tolerance=tol,
        extra_shapes=extra,
        small_shape=dict(small) if small else None,
        solutions=solutions_of(path),
        source_hash=content_hash(source),
        builtin=builtin,
        families=list(dict.fromkeys([family, *traced])),
        understanding=und,
    )
