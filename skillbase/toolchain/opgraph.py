"""Trace what a task's ``Model.forward`` runs: its ATen ops, the tensors between them, and their cost.

A ``TorchDispatchMode`` sees every ATen op the forward dispatches after
composite ops are decomposed (``F.linear`` arrives as ``t`` + ``addmm``,
``F.instance_norm`` as ``native_batch_norm`` on a reshaped view). Each op is
recorded with the values it reads and writes, so the result is a dataflow
graph: a value is a model input, a weight (parameter or buffer), a constant
tensor the forward captured, or an op's output; views alias the value they
view, in-place ops write a new version of it.

Tracing runs on torch's ``meta`` device first (shapes and dtypes, no memory, no
arithmetic). Where that fails there are two fallbacks, tried in order:

1. the model built on the CPU (its ``__init__`` may need real numbers, e.g.
   ``.item()`` on a ``torch.linspace``), then moved to ``meta`` for the forward;
2. real CPU tensors at a shrunk shape (every batch-like global set to 1) for a
   forward that needs real numbers; FLOPs and the bytes of everything but the
   weights are then scaled back by the batch ratio, and the notes say so.

A forward that cannot be traced at all raises ``TraceFailed`` carrying every
attempt's reason. Costs per op follow ``skillbase.toolchain.opcost``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skillbase.toolchain import opcost

MAX_REAL_INPUT_BYTES = 1 << 30  # inputs the shrunk CPU fallback may allocate
_BATCH_NAME = re.compile(r"^(batch|batch_size|bs|b|n_batch|num_batches|batchsize)$", re.I)
_DTYPE_NAMES = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "int8": "int8",
}


class TraceFailed(Exception):
    """Raised when no way of tracing the forward worked; ``reasons`` says why each failed."""

    def __init__(self, reasons: list[str]):
        super().__init__("; ".join(reasons))
        self.reasons = reasons


@dataclass
class Value:
    """A tensor value of the dataflow graph."""

    id: int
    shape: tuple[int, ...]
    dtype: str
    nbytes: int  # footprint: elements actually stored (broadcast dims count once) x element size
    source: str  # input | param | const | op
    producer: int | None = None  # index of the op that wrote it
    consumers: list[int] = field(default_factory=list)
    root: int | None = None  # for a version written in place: the input or weight value it overwrote


@dataclass
class Op:
    """One ATen op as it ran."""

    index: int
    name: str  # 'aten.addmm'
    base: str  # 'addmm' (an in-place 'add_' is 'add')
    kind: str  # view, factory, elementwise, layout, matmul, conv, attention, softmax, norm, pooling, ...
    reads: list[int]
    writes: list[int]
    in_shapes: list[list[int]]
    out_shapes: list[list[int]]
    dtype: str
    flops: int = 0
    transcendentals: int = 0
    bytes: int = 0  # read + written as one eager kernel
    weight_bytes: int = 0  # the part of ``bytes`` that reads weights (not scaled with the batch)
    kernels: int = 1
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class OpGraph:
    """The forward as a sequence of ops over values."""

    ops: list[Op]
    values: dict[int, Value]
    inputs: list[int]
    params: list[int]
    outputs: list[int]
    traced: str  # meta | meta_after_cpu_init | cpu_shrunk
    input_shapes: list[list[int]]
    output_shapes: list[list[int]]
    output_dtypes: list[str]
    input_bytes: int
    output_bytes: int
    param_bytes: int
    dtype: str
    notes: list[str] = field(default_factory=list)

    @property
    def kernel_ops(self) -> list[Op]:
        """Ops that launch a kernel (views and bare allocations do not)."""
        return [o for o in self.ops if o.kernels]

    @property
    def flops(self) -> int:
        return sum(o.flops for o in self.ops)


def dtype_name(dtype) -> str:
    """'torch.float32' -> 'fp32'; other dtypes keep torch's name ('int64', 'bool')."""
    name = str(dtype).removeprefix("torch.")
    return _DTYPE_NAMES.get(name, name)


def footprint(t) -> int:
    """Bytes a tensor occupies: broadcast (stride-0) dims count once."""
    try:
        n = 1
        for size, stride in zip(t.shape, t.stride()):
            if stride != 0:
                n *= int(size)
        return n * t.element_size()
    except (RuntimeError, NotImplementedError, AttributeError):
        return int(t.numel()) * t.element_size()


# ---------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------


class _Builder:
    """Accumulates ops and values while the forward runs."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.values: dict[int, Value] = {}
        self.ids: dict[int, int] = {}  # id(tensor) -> value id
        self.keep: list[Any] = []  # tensors stay alive so that id() is never reused during the trace
        self.next_id = 0

    def value(self, t, source: str, producer: int | None = None) -> int:
        vid = self.next_id
        self.next_id += 1
        self.values[vid] = Value(
            vid, tuple(int(d) for d in t.shape), dtype_name(t.dtype), footprint(t), source, producer
        )
        self.ids[id(t)] = vid
        self.keep.append(t)
        return vid

    def lookup(self, t) -> int:
        vid = self.ids.get(id(t))
        return vid if vid is not None else self.value(t, "const")

    def record(self, func, args, kwargs, out) -> None:
        name = str(func.overloadpacket).replace("aten::", "aten.")
        base = func.overloadpacket.__name__
        inplace = _has_tag(func, "inplace") or (base.endswith("_") and not base.endswith("__"))
        if inplace and base.endswith("_") and not base.startswith("_"):
            base = base[:-1]
        flat_in = _tensors((args, tuple(kwargs.values())))
        flat_out = _tensors(out)
        mutated = _mutated_args(func, args, kwargs)
        index = len(self.ops)
        seen: set[int] = set()
        reads, read_tensors = [], []
        for t in flat_in:
            if id(t) in seen:
                continue
            seen.add(id(t))
            reads.append(self.lookup(t))
            read_tensors.append(t)
        is_view = func.is_view or base in opcost.VIEWS
        before = {t: self.ids[t] for t in mutated if t in self.ids}
        writes: list[int] = []
        if is_view:
            root = reads[0] if reads else None
            for o in flat_out:
                if root is not None:
                    self.ids[id(o)] = root
                    self.keep.append(o)
                else:
                    writes.append(self.value(o, "op", index))
        else:
            for o in flat_out:
                if id(o) in seen and id(o) not in mutated:
                    continue  # an op returning one of its inputs unchanged
                writes.append(self.value(o, "op", index))
            for t, old_vid in before.items():
                tensor = next((x for x in read_tensors if id(x) == t), None)
                if tensor is None:
                    continue
                if self.ids[t] == old_vid:  # written in place but not returned
                    writes.append(self.value(tensor, "op", index))
                old = self.values[old_vid]
                self.values[self.ids[t]].root = old.id if old.source != "op" else old.root
        for vid in reads:
            self.values[vid].consumers.append(index)
        op = Op(
            index=index,
            name=name,
            base=base,
            kind="view" if is_view else "other",
            reads=reads,
            writes=writes,
            in_shapes=[list(map(int, t.shape)) for t in flat_in],
            out_shapes=[list(map(int, o.shape)) for o in flat_out],
            dtype=dtype_name(flat_out[0].dtype if flat_out else (read_tensors[0].dtype if read_tensors else "")),
        )
        if is_view:
            op.kernels = 0
        else:
            _cost(op, func, args, kwargs, read_tensors, flat_out, self)
        self.ops.append(op)


def _tensors(obj) -> list:
    """The tensors in nested tuples, lists and dicts, in order (faster than pytree for op arguments)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _tensors(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in _tensors(x)]
    return []


def _mutated_args(func, args, kwargs) -> set[int]:
    """ids of the tensors an op writes in place (schema arguments marked ``(a!)``)."""
    import torch

    out: set[int] = set()
    try:
        schema_args = func._schema.arguments
    except AttributeError:
        return out
    for i, a in enumerate(schema_args):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = args[i] if i < len(args) else kwargs.get(a.name)
        for t in v if isinstance(v, (list, tuple)) else [v]:
            if isinstance(t, torch.Tensor):
                out.add(id(t))
    return out


def _named(func, args, kwargs) -> dict[str, Any]:
    """The op's arguments by their schema names."""
    out = dict(kwargs)
    try:
        for i, a in enumerate(func._schema.arguments):
            if i < len(args):
                out.setdefault(a.name, args[i])
    except AttributeError:
        pass
    return out


def _cost(op: Op, func, args, kwargs, ins: list, outs: list, builder: _Builder) -> None:
    """Fill in the op's kind, FLOPs, transcendentals, bytes and kernel count."""
    base = op.base
    a = _named(func, args, kwargs)
    out_numel = sum(int(o.numel()) for o in outs[:1])
    in_numel = int(ins[0].numel()) if ins else 0
    weight_reads = sum(footprint(t) for t, vid in zip(ins, op.reads) if builder.values[vid].source == "param")
    op.bytes = sum(footprint(t) for t in ins) + sum(footprint(o) for o in outs)
    op.weight_bytes = weight_reads
    flops = trans = 0
    if base in opcost.EMPTY:
        op.kind, op.kernels, op.bytes = "factory", 0, 0
    elif base in opcost.FACTORIES:
        op.kind = "factory"
        op.bytes = sum(footprint(o) for o in outs)
        if base in ("rand", "randn", "rand_like", "randn_like", "normal", "uniform", "bernoulli", "randint"):
            flops = 2 * out_numel
    elif base in opcost.MATMUL:
        op.kind = "matmul"
        flops = opcost.matmul_flops(base, op.in_shapes, op.out_shapes[0] if op.out_shapes else [])
    elif base in opcost.CONV:
        op.kind = "conv"
        transposed = bool(a.get("transposed", False))
        groups = int(a.get("groups", 1) or 1)
        bias = a.get("bias") is not None
        x, w = op.in_shapes[0], op.in_shapes[1]
        op.attrs = {"transposed": transposed, "groups": groups, "kernel": w[2:]}
        flops = opcost.conv_flops(x, w, op.out_shapes[0], transposed, groups, bias)
    elif base in opcost.ATTENTION:
        op.kind = "attention"
        causal = bool(a.get("is_causal", False))
        q, k, v = op.in_shapes[:3]
        flops, trans = opcost.attention_flops(q, k, v, causal)
    elif base in opcost.SOFTMAX:
        op.kind = "softmax"
        flops, trans = 5 * in_numel, in_numel
        if "log" in base:
            trans += out_numel // max(1, _dim_size(ins[0], a.get("dim", -1)))
            op.attrs["log"] = True
    elif base in opcost.NORMS:
        op.kind = "norm"
        flops, trans = _norm_cost(base, a, ins, op)
    elif base in opcost.POOLING:
        op.kind = "pooling"
        window = _pool_window(base, a, ins, outs)
        flops = out_numel * (window + (1 if "avg" in base else 0))
    elif base in opcost.ARGREDUCE:
        op.kind = "argreduce"
        flops = in_numel
    elif base in opcost.SCAN:
        op.kind = "scan"
        flops, trans = (4 * in_numel, 2 * in_numel) if "logcumsumexp" in base else (in_numel, 0)
    elif base in opcost.LOSS:
        op.kind = "loss"
        per, t_per = opcost.LOSS[base]
        n = ins[0].shape[0] if base.startswith("nll") and ins and ins[0].dim() > 1 else in_numel
        flops, trans = per * n, t_per * n
    elif base in opcost.REDUCTIONS or (_has_tag(func, "reduction") and base not in opcost.POINTWISE):
        op.kind = "reduction"
        flops, trans = _reduction_cost(base, a, in_numel, out_numel)
    elif base in opcost.LAYOUT:
        op.kind = "layout"
    elif base == "pow":
        op.kind = "elementwise"
        exponent = a.get("exponent", 2)
        per, t_per = opcost.pow_cost(exponent) if not _is_tensor(exponent) else (2, 2)
        flops, trans = per * out_numel, t_per * out_numel
    elif base in opcost.POINTWISE or _has_tag(func, "pointwise"):
        op.kind = "elementwise"
        per, t_per = opcost.POINTWISE.get(base, (1, 0))
        if base == "gelu" and a.get("approximate", "none") == "tanh":
            per = 9
        if base == "_to_copy":
            op.attrs["cast"] = True
        flops, trans = per * out_numel, t_per * out_numel
    else:
        op.kind = "other"
        op.attrs["no_cost_rule"] = True
    op.flops, op.transcendentals = int(flops), int(trans)


def _has_tag(func, tag: str) -> bool:
    """Whether an ATen op carries ``tag``; a tag this torch does not define (``inplace`` is newer than 2.11)
    is simply absent, and callers fall back on the op's name and schema."""
    import torch

    known = getattr(torch.Tag, tag, None)
    return known is not None and known in func.tags


def _is_tensor(x) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def _dim_size(t, dim) -> int:
    try:
        return int(t.shape[int(dim)])
    except (TypeError, IndexError, ValueError):
        return 1


def _norm_cost(base: str, a: dict, ins: list, op: Op) -> tuple[int, int]:
    x = ins[0]
    n = int(x.numel())
    if "rms" in base:
        rows = n // max(1, int(x.shape[-1])) if x.dim() else 1
        op.attrs["norm"] = "rms_norm"
        return 4 * n, rows
    if "layer_norm" in base:
        shape = a.get("normalized_shape", [x.shape[-1]])
        rows = n // max(1, opcost.numel(shape))
        op.attrs["norm"] = "layer_norm"
        return 8 * n, rows
    if "group_norm" in base:
        groups = int(a.get("group", 1) or 1)
        op.attrs["norm"] = "group_norm"
        return 8 * n, int(x.shape[0]) * groups
    # Batch norm; KernelBench's instance norm arrives as a batch norm over a (1, N*C, ...) view.
    training = bool(a.get("training", "no_training" not in base and "no_update" not in base))
    channels = int(x.shape[1]) if x.dim() > 1 else 1
    op.attrs["norm"] = "instance_norm" if x.dim() > 2 and int(x.shape[0]) == 1 and channels > 1 else "batch_norm"
    return (8 if training else 4) * n, channels


def _pool_window(base: str, a: dict, ins: list, outs: list) -> int:
    if base.startswith("adaptive") or base.startswith("_adaptive"):
        return max(1, int(ins[0].numel()) // max(1, int(outs[0].numel())))
    kernel = a.get("kernel_size", 1)
    spatial = max(1, ins[0].dim() - 2)
    if isinstance(kernel, int):
        kernel = [kernel] * spatial
    return opcost.numel(list(kernel) or [1])


def _reduction_cost(base: str, a: dict, n_in: int, n_out: int) -> tuple[int, int]:
    per, t_per = opcost.REDUCTIONS.get(base, (1, 0))
    if base in ("linalg_vector_norm", "norm"):
        p = a.get("ord" if base.startswith("linalg") else "p", 2)
        p = 2 if p is None or p == "fro" else p
        if p in (1, 2, float("inf"), -float("inf")):
            return 2 * n_in, n_out if p == 2 else 0
        return 4 * n_in, 2 * n_in + n_out
    if base == "logsumexp":
        return 4 * n_in + n_out, n_in + n_out
    return per * n_in, t_per * n_in


# ---------------------------------------------------------------------------
# Tracing
# ---------------------------------------------------------------------------


def _recorder(builder: _Builder):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            builder.record(func, args, kwargs, out)
            return out

    return Recorder()


def _flat_tensors(obj) -> list:
    import torch
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def _run(tm, *, init_device: str, run_device: str) -> tuple[_Builder, Any, list, list]:
    """Build the model on ``init_device``, run its forward on ``run_device`` under the recorder."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        with torch.device(init_device):
            model = tm.Model(*tm.get_init_inputs())
        if run_device != init_device:
            model = model.to(run_device)
        with torch.device(run_device):
            inputs = list(tm.get_inputs())
        builder = _Builder()
        ins = _flat_tensors(inputs)
        for t in ins:
            builder.value(t, "input")
        params = list(model.parameters()) + list(model.buffers())
        for t in params:
            if id(t) not in builder.ids:
                builder.value(t, "param")
        with torch.device(run_device), _recorder(builder):
            out = model(*inputs)
    return builder, out, ins, params


def _graph(builder: _Builder, out, ins: list, params: list, traced: str) -> OpGraph:
    outs = _flat_tensors(out)
    if not outs:
        raise TraceFailed(["Model.forward returns no tensor"])
    floats = [t for t in ins + params if t.is_floating_point()]
    dtype = dtype_name(floats[0].dtype) if floats else "mixed"
    if dtype not in ("fp32", "fp16", "bf16", "fp8", "int8") or len({t.dtype for t in floats}) > 1:
        dtype = "mixed"
    return OpGraph(
        ops=builder.ops,
        values=builder.values,
        inputs=[builder.ids[id(t)] for t in ins if id(t) in builder.ids],
        params=[builder.ids[id(t)] for t in params if id(t) in builder.ids],
        outputs=[builder.lookup(o) for o in outs],
        traced=traced,
        input_shapes=[list(map(int, t.shape)) for t in ins],
        output_shapes=[list(map(int, t.shape)) for t in outs],
        output_dtypes=[str(t.dtype).removeprefix("torch.") for t in outs],
        input_bytes=sum(int(t.numel()) * t.element_size() for t in ins),
        output_bytes=sum(int(t.numel()) * t.element_size() for t in outs),
        param_bytes=sum(int(t.numel()) * t.element_size() for t in params),
        dtype=dtype,
    )


def trace(tm, reload: Callable[[dict], Any] | None = None, *, fallbacks: bool = True) -> OpGraph:
    """The op graph of one forward of task module ``tm`` (see the module docstring for the fallbacks;
    ``fallbacks=False``: the meta device only). ``reload(shape)`` imports the task afresh at a shape;
    without it there is no shrunk-shape fallback."""
    reasons = []
    init_failed = False
    try:
        return _graph(*_run(tm, init_device="meta", run_device="meta"), traced="meta")
    except TraceFailed:
        raise
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure of user code: try the next way
        reasons.append(f"on the meta device: {type(e).__name__}: {_short(e)}")
        init_failed = _failed_in_init(e)
    if not fallbacks:
        raise TraceFailed(reasons)
    if init_failed:
        try:
            g = _graph(*_run(tm, init_device="cpu", run_device="meta"), traced="meta_after_cpu_init")
            g.notes.append(
                "built on the CPU (its __init__ needs real numbers), traced on the meta device; " + reasons[0]
            )
            return g
        except TraceFailed:
            raise
        except (Exception, SystemExit) as e:  # noqa: BLE001
            reasons.append(f"built on the CPU, run on meta: {type(e).__name__}: {_short(e)}")
    if reload is None:
        raise TraceFailed(reasons)
    try:
        return _trace_shrunk(tm, reload, reasons)
    except TraceFailed as e:
        reasons += e.reasons
    except (Exception, SystemExit) as e:  # noqa: BLE001
        reasons.append(f"on CPU tensors at a shrunk shape: {type(e).__name__}: {_short(e)}")
    raise TraceFailed(reasons)


def _failed_in_init(e: BaseException) -> bool:
    """Whether the traceback passes through a Model's ``__init__`` (not its forward)."""
    tb = e.__traceback__
    names = []
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return "__init__" in names and "forward" not in names


def _short(e: BaseException) -> str:
    return str(e).strip().splitlines()[0][:200] if str(e).strip() else ""


def _trace_shrunk(tm, reload: Callable[[dict], Any], reasons: list[str]) -> OpGraph:
    """Real CPU tensors with every batch-like global set to 1; costs scaled back by the batch ratio."""
    import torch

    g = vars(tm.module)
    batch = {
        k: v for k, v in g.items() if _BATCH_NAME.match(k) and isinstance(v, int) and not isinstance(v, bool) and v > 1
    }
    shape = {**tm.shape, **{k: 1 for k in batch}}
    small = reload(shape)
    with torch.device("meta"):
        need = sum(footprint(t) for t in _flat_tensors(list(small.get_inputs())))
    if need > MAX_REAL_INPUT_BYTES:
        raise TraceFailed(
            [
                f"its inputs at the shrunk shape {shape} take {need / 2**20:.0f} MiB, over the "
                f"{MAX_REAL_INPUT_BYTES / 2**20:.0f} MiB a CPU trace may allocate"
            ]
        )
    builder, out, ins, params = _run(small, init_device="cpu", run_device="cpu")
    graph = _graph(builder, out, ins, params, traced="cpu_shrunk")
    ratio = max(batch.values()) if batch else 1
    if ratio > 1:
        for op in graph.ops:
            op.flops *= ratio
            op.transcendentals *= ratio
            op.bytes = op.weight_bytes + (op.bytes - op.weight_bytes) * ratio
        for v in graph.values.values():
            if v.source != "param":
                v.nbytes *= ratio
        for shapes in (graph.input_shapes, graph.output_shapes):
            for s in shapes:
                if s and s[0] == 1:
                    s[0] = ratio
        graph.input_bytes *= ratio
        graph.output_bytes *= ratio
    where = ", ".join(f"{k}=1" for k in batch) or "its own shape"
    graph.notes.append(
        f"traced on CPU tensors at {where}"
        + (f"; FLOPs and activation bytes scaled x{ratio}" if ratio > 1 else "")
        + "; "
        + "; ".join(reasons)
    )
    return graph
