"""Shrink a task's shape until the Triton interpreter can check it on the CPU.

KernelBench problems move gigabytes (4096 x 393216 floats is 6.4 GB per input);
the interpreter runs every program instance in Python on the host, so a
candidate is verified there at a smaller shape of the same problem. The shape
is a dict of overrides of the task module's integer globals (the same mechanism
as ``META['small']``), found by halving size-like globals one at a time and
re-tracing the reference on the meta device after each step: a step after
which the reference no longer traces (channels no longer divisible by groups,
a pooled size that reaches zero) is undone and that global left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbase.errors import TaskError
from skillbase.toolchain import tasks

# A size-like global: an int at least this large. Smaller ints are kernel
# sizes, strides, dims and group counts, which change what is computed.
MIN_SIZE_GLOBAL = 16
MAX_STEPS = 200


@dataclass
class Shrunk:
    """The overrides found, and what the reference moves and computes at them."""

    shape: dict[str, Any]
    moved_bytes: int
    flops: int
    original_bytes: int


def _moved(tr: tasks.Trace) -> int:
    return tr.input_bytes + tr.output_bytes + tr.param_bytes


def _trace_at(path: Path, shape: dict[str, Any]) -> tasks.Trace | None:
    try:
        return tasks.trace_reference(tasks.load_task_module(path, shape))
    except TaskError:
        return None


def _halved(value: int) -> int:
    """Half of ``value``, keeping its power-of-two factor up to 16 where it had one
    (a size divisible by 8 usually has to stay divisible by something)."""
    half = value // 2
    for align in (16, 8, 4, 2):
        if value % (2 * align) == 0:
            return max(align, half - half % align)
    return max(1, half)


def shrink_shape(path: Path, limit_bytes: int, limit_flops: int, start: dict[str, Any] | None = None) -> Shrunk:
    """Overrides of the task's size globals under which one forward moves at most
    ``limit_bytes`` (inputs, outputs and parameters) and does at most ``limit_flops``.

    Raises TaskError when no such shape is found (nothing size-like left to halve).
    """
    shape = dict(start or {})
    tm = tasks.load_task_module(path, shape)
    tr = tasks.trace_reference(tm)
    original = _moved(tr)
    sizes = {k: v for k, v in vars(tm.module).items()
             if not k.startswith("_") and type(v) is int and v >= MIN_SIZE_GLOBAL}
    frozen: set[str] = set()
    for _ in range(MAX_STEPS):
        if _moved(tr) <= limit_bytes and tr.flops <= limit_flops:
            return Shrunk(shape=shape, moved_bytes=_moved(tr), flops=tr.flops, original_bytes=original)
        live = {k: v for k, v in sizes.items() if k not in frozen and shape.get(k, v) > 1}
        if not live:
            break
        name = max(live, key=lambda k: shape.get(k, sizes[k]))
        trial = {**shape, name: _halved(shape.get(name, sizes[name]))}
        if trial[name] == shape.get(name, sizes[name]):
            frozen.add(name)
            continue
        smaller = _trace_at(path, trial)
        if smaller is None or _moved(smaller) >= _moved(tr) and smaller.flops >= tr.flops:
            frozen.add(name)  # the reference no longer runs there, or this global does not size it
            continue
        shape, tr = trial, smaller
    raise TaskError(
        f"task {str(path)!r}: no shape under {limit_bytes / 2**20:.0f} MiB and {limit_flops / 1e9:.1f} GFLOP "
        f"found by halving its size globals (reached {_moved(tr) / 2**20:.0f} MiB at {shape})",
        hint="add META['small'] = {...} with small sizes to the task, or run on a GPU")
