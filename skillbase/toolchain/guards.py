"""Runtime instrumentation of candidate code, installed in the worker before the candidate imports.

- ``Integrity``: identities of torch, timer, builtin and toolchain functions and
  torch's global flags, snapshotted before candidate code runs and compared
  after each call. A candidate that patches any of them is rejected and its
  worker recycled.
- ``LaunchRecorder``: counts Triton kernel launches by wrapping the JIT launch
  path (compiled and interpreted), so a solution that launches no kernel of its
  own is caught without a profiler.
- ``ReferenceProbe``: a profile hook that sees any Python frame executing code
  from the task file, however the candidate got hold of it.
- ``OpTrace``: the aten operators a call runs, to tell a kernel from a PyTorch
  replay of the reference.
"""

from __future__ import annotations

import builtins
import contextlib
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# aten ops that allocate, view, copy or describe: not "computing the task".
_PLUMBING = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "zeros",
    "zeros_like",
    "new_zeros",
    "ones",
    "ones_like",
    "new_ones",
    "full",
    "full_like",
    "new_full",
    "fill",
    "fill_",
    "zero",
    "zero_",
    "detach",
    "alias",
    "view",
    "_unsafe_view",
    "reshape",
    "as_strided",
    "as_strided_",
    "t",
    "transpose",
    "permute",
    "expand",
    "unsqueeze",
    "squeeze",
    "select",
    "slice",
    "split",
    "split_with_sizes",
    "chunk",
    "narrow",
    "unbind",
    "clone",
    "contiguous",
    "copy",
    "copy_",
    "_to_copy",
    "to",
    "lift_fresh",
    "set",
    "set_",
    "resize",
    "resize_",
    "_local_scalar_dense",
    "item",
    "is_same_size",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "sym_storage_offset",
    "arange",
    "scalar_tensor",
    "_reshape_alias",
    "view_as_real",
    "view_as_complex",
    "flatten",
    "unflatten",
    "movedim",
    "expand_as",
    "view_as",
    "record_stream",
    "randn",
    "rand",
    "randint",
    "normal",
    "normal_",
    "uniform_",
    "random_",
    "bernoulli_",
    "cat",
    "stack",
    "pad",
    "constant_pad_nd",
    "index_select",
    "gather",
}


# ---------------------------------------------------------------------------
# Integrity of torch, timers and the toolchain itself
# ---------------------------------------------------------------------------


def _watched(torch: Any) -> list[tuple[str, Any, bool]]:
    """(label, namespace, public_only) of everything a candidate must leave alone."""
    import time

    import numpy
    import triton
    import triton.testing

    out: list[tuple[str, Any, bool]] = [
        ("builtins", builtins, False),
        ("time", time, False),
        ("torch", torch, True),
        ("torch.nn.functional", torch.nn.functional, True),
        ("torch.Tensor", torch.Tensor, False),
        ("torch._C.TensorBase", torch._C.TensorBase, False),
        ("torch.nn.Module", torch.nn.Module, False),
        ("torch.cuda", torch.cuda, True),
        ("torch.cuda.Event", torch.cuda.Event, False),
        ("torch.cuda.Stream", torch.cuda.Stream, False),
        ("torch.testing", torch.testing, True),
        ("torch.linalg", torch.linalg, True),
        ("torch.special", torch.special, True),
        ("torch.profiler", torch.profiler, True),
        ("numpy", numpy, True),
        ("triton", triton, True),
        ("triton.testing", triton.testing, True),
    ]
    from triton.runtime import autotuner, jit

    out += [("triton.JITFunction", jit.JITFunction, False), ("triton.Autotuner", autotuner.Autotuner, False)]
    with contextlib.suppress(Exception):
        from triton.runtime.interpreter import InterpretedFunction

        out.append(("triton.InterpretedFunction", InterpretedFunction, False))
    for name, mod in list(sys.modules.items()):
        if name.startswith("skillbase.toolchain") and mod is not None:
            out.append((name, mod, False))
    return out


def _flags(torch: Any) -> dict[str, Any]:
    """Global torch state a candidate could flip to change the reference or the baseline."""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    b = torch.backends
    flags = {
        "default_dtype": str(torch.get_default_dtype()),
        "matmul.allow_tf32": b.cuda.matmul.allow_tf32,
        "matmul.fp16_reduced": b.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "matmul.bf16_reduced": b.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "cudnn.allow_tf32": b.cudnn.allow_tf32,
        "cudnn.benchmark": b.cudnn.benchmark,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "dispatch_modes": len(_get_current_dispatch_mode_stack()),
        "function_modes": len(_get_current_function_mode_stack()),
        "sys.modules.torch": id(sys.modules.get("torch")),
        "profile_hook": sys.getprofile() is not None,
        "trace_hook": sys.gettrace() is not None,
    }
    impls = getattr(torch.library, "_impls", None)
    if impls is not None:
        flags["library_impls"] = len(impls)
    return flags


class Integrity:
    """Identity snapshot of watched namespaces and flags; ``violations()`` lists what changed."""

    def __init__(self, torch: Any):
        self.torch = torch
        self.baseline = self._snapshot()
        self.flags = _flags(torch)

    def _snapshot(self) -> dict[str, int]:
        snap = {}
        for label, ns, public in _watched(self.torch):
            is_class = isinstance(ns, type)
            for k, v in list(vars(ns).items()):
                if public and k.startswith("_"):
                    continue
                if isinstance(v, types.ModuleType):
                    continue
                snap[f"{label}.{k}"] = id(v)
            if is_class:
                snap[f"{label}.__keys__"] = hash(tuple(sorted(vars(ns))))  # a new attribute can shadow a base's
        return snap

    def rebaseline(self) -> None:
        """Accept the current state (after the toolchain itself imported or configured more)."""
        self.baseline = self._snapshot()
        self.flags = _flags(self.torch)

    def violations(self) -> list[str]:
        """Names patched, deleted or flipped since the snapshot (new attributes are allowed)."""
        now = self._snapshot()
        bad = [k for k, v in self.baseline.items() if now.get(k) != v]
        flags = _flags(self.torch)
        for k, v in self.flags.items():
            if flags.get(k) != v:
                bad.append(f"flag {k}: {v!r} -> {flags.get(k)!r}")
        return bad


# ---------------------------------------------------------------------------
# Triton launches
# ---------------------------------------------------------------------------


@dataclass
class Launch:
    name: str
    file: str


@dataclass
class LaunchRecorder:
    """Wraps ``JITFunction.run`` (and the interpreter's) to record launches while ``active``."""

    launches: list[Launch] = field(default_factory=list)
    recording: bool = False

    def install(self) -> None:
        from triton.runtime.jit import JITFunction

        self._wrap(JITFunction)
        with contextlib.suppress(Exception):
            from triton.runtime.interpreter import InterpretedFunction

            self._wrap(InterpretedFunction)

    def _wrap(self, cls: type) -> None:
        original = cls.run
        if getattr(original, "_skillbase_wrapped", False):
            return
        recorder = self

        def run(self, *args, grid, warmup, **kwargs):
            if recorder.recording and not warmup:
                fn = getattr(self, "fn", None)
                code = getattr(fn, "__code__", None)
                recorder.launches.append(Launch(getattr(fn, "__name__", "?"), code.co_filename if code else "?"))
            # A kernel body cannot call Python on a GPU, so the reference probe (a profile hook)
            # is paused while a kernel runs; under the interpreter this saves most of its cost.
            hook = sys.getprofile()
            if hook is not None:
                sys.setprofile(None)
            try:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                if hook is not None:
                    sys.setprofile(hook)

        run._skillbase_wrapped = True  # type: ignore[attr-defined]
        cls.run = run

    @contextlib.contextmanager
    def active(self):
        self.recording = True
        try:
            yield self
        finally:
            self.recording = False

    def clear(self) -> None:
        self.launches.clear()

    def names_from(self, filename: str) -> list[str]:
        """Distinct kernel names launched from code in ``filename``, in first-launch order."""
        seen: dict[str, None] = {}
        for launch in self.launches:
            if Path(launch.file).name == Path(filename).name:
                seen.setdefault(launch.name)
        return list(seen)


# ---------------------------------------------------------------------------
# Calls into the reference
# ---------------------------------------------------------------------------


class ReferenceProbe:
    """Notices any Python frame running code from the task file while active."""

    def __init__(self, task_file: str):
        self.task_file = str(Path(task_file).resolve())
        self.hits: list[str] = []

    def _hook(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename == self.task_file:
            if len(self.hits) < 5:
                self.hits.append(f"{frame.f_code.co_name} (task line {frame.f_code.co_firstlineno})")

    @contextlib.contextmanager
    def active(self):
        old = sys.getprofile()
        sys.setprofile(self._hook)
        threading.setprofile(self._hook)
        try:
            yield self
        finally:
            sys.setprofile(old)
            threading.setprofile(None)  # type: ignore[arg-type]


def mro_reference(cls: type, reference: type) -> str | None:
    """Why ``cls`` inherits the reference, or None when it does not."""
    ref_code = getattr(getattr(reference, "forward", None), "__code__", None)
    for base in cls.__mro__[1:]:
        if base is reference:
            return "ModelNew subclasses the reference Model"
        if base.__name__ == "Model" and base.__module__ != cls.__module__:
            return f"ModelNew subclasses a class named Model from {base.__module__}"
        fwd = base.__dict__.get("forward")
        code = getattr(fwd, "__code__", None)
        if (
            code is not None
            and ref_code is not None
            and code.co_code == ref_code.co_code
            and code.co_consts == ref_code.co_consts
            and base.__module__ != "torch.nn.modules.module"
        ):
            return f"ModelNew inherits {base.__name__}.forward, identical to the reference's"
    return None


# ---------------------------------------------------------------------------
# aten ops of a call
# ---------------------------------------------------------------------------


# Plumbing ops that still move every byte: for a pure layout task they are the work itself.
_COPIES = {"clone", "copy", "copy_", "_to_copy", "cat", "stack", "constant_pad_nd", "index_select", "gather"}


def compute_ops(names: set[str]) -> set[str]:
    """The aten ops of a set that do arithmetic (allocation, views and copies removed)."""
    return {n for n in names if n.rstrip("_") not in _PLUMBING and n not in _PLUMBING}


def work_ops(names: set[str]) -> set[str]:
    """The ops that do a reference's work: its arithmetic, or its copies when it only moves data."""
    return compute_ops(names) or (set(names) & _COPIES)


def op_tracer():
    """A TorchDispatchMode recording, per aten op (overload packet), the most input elements it saw."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpTrace(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: dict[str, int] = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            numel = sum(a.numel() for a in args if isinstance(a, torch.Tensor))
            self.ops[name] = max(self.ops.get(name, 0), numel)
            return func(*args, **(kwargs or {}))

    return OpTrace()
