"""Shrink a task's shape until the Triton interpreter can check it on the CPU.

KernelBench problems move gigabytes (4096 x 393216 floats is 6.4 GB per input);
the interpreter runs every program instance in Python on the host, so a
candidate is verified there at a smaller shape of the same problem. The shape
is a dict of overrides of the task module's globals (the same mechanism as
``META['small']``). Sizes live in integer globals (``batch_size = 4096``) and in
tuples or lists of integers (``input_shape = (32768,)``, ``layer_sizes = [400,
800]``). The largest size is halved first and the reference re-traced on the
meta device after each step; when halving it alone breaks the reference (two
sizes must stay equal to broadcast), every size holding the same value is
halved with it; when that breaks it too (channels no longer divisible by
groups, a pooled size reaching zero) the step is undone and that size left
alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillbase.errors import TaskError
from skillbase.toolchain import tasks

# A size: an int at least this large. Smaller ints are kernel sizes, strides,
# dims and group counts, which change what is computed.
MIN_SIZE_GLOBAL = 16
MAX_STEPS = 200

Slot = tuple[str, int | None]  # a global's name, and the index in it when it is a tuple or list


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


def size_slots(module_globals: dict[str, Any]) -> dict[Slot, int]:
    """Every size of a task module: public int globals, and the int entries of public tuples and lists
    of ints, that are at least MIN_SIZE_GLOBAL."""
    out: dict[Slot, int] = {}
    for name, value in module_globals.items():
        if name.startswith("_"):
            continue
        if type(value) is int and value >= MIN_SIZE_GLOBAL:
            out[(name, None)] = value
        elif isinstance(value, (tuple, list)) and value and all(type(x) is int for x in value):
            out.update({(name, i): x for i, x in enumerate(value) if x >= MIN_SIZE_GLOBAL})
    return out


def _with(shape: dict[str, Any], defaults: dict[str, Any], changes: dict[Slot, int]) -> dict[str, Any]:
    """``shape`` with the sizes in ``changes`` set (a tuple global stays a tuple)."""
    out = dict(shape)
    for (name, index), value in changes.items():
        if index is None:
            out[name] = value
        else:
            seq = list(out.get(name, defaults[name]))
            seq[index] = value
            out[name] = type(defaults[name])(seq)
    return out


def shrink_shape(path: Path, limit_bytes: int, limit_flops: int, start: dict[str, Any] | None = None) -> Shrunk:
    """Overrides of the task's sizes under which one forward moves at most ``limit_bytes``
    (inputs, outputs and parameters) and does at most ``limit_flops``.

    Raises TaskError when no such shape is found (nothing size-like left to halve).
    """
    shape = dict(start or {})
    tm = tasks.load_task_module(path, shape)
    tr = tasks.trace_reference(tm)
    original = _moved(tr)
    defaults = dict(vars(tm.module))
    sizes = size_slots(defaults)
    current = dict(sizes)
    frozen: set[Slot] = set()
    for _ in range(MAX_STEPS):
        if _moved(tr) <= limit_bytes and tr.flops <= limit_flops:
            return Shrunk(shape=shape, moved_bytes=_moved(tr), flops=tr.flops, original_bytes=original)
        live = {s: v for s, v in current.items() if s not in frozen and v > 1}
        if not live:
            break
        slot = max(live, key=lambda s: (live[s], s[0], -1 if s[1] is None else s[1]))
        tied = [s for s, v in live.items() if v == live[slot] and s != slot]
        for group in ([slot], [slot, *tied]) if tied else ([slot],):
            changes = {s: _halved(current[s]) for s in group}
            trial = _with(shape, defaults, changes)
            smaller = _trace_at(path, trial)
            if smaller is not None and (_moved(smaller) < _moved(tr) or smaller.flops < tr.flops):
                shape, tr = trial, smaller
                current.update(changes)
                break
        else:
            frozen.add(slot)  # the reference no longer runs there, or this size does not size it
    raise TaskError(
        f"task {str(path)!r}: no shape under {limit_bytes / 2**20:.0f} MiB and {limit_flops / 1e9:.1f} GFLOP "
        f"found by halving its sizes (reached {_moved(tr) / 2**20:.0f} MiB at {shape})",
        hint="add META['small'] = {...} with small sizes to the task, or run on a GPU",
    )
