"""Understand a task from its traced forward: families, floor, regime and fusion headroom.

``understand(graph)`` reads an ``OpGraph`` (``skillbase.toolchain.opgraph``) and
returns a ``TaskUnderstanding``:

- **families**, ranked. The primary family is decided by the most telling op,
  in this order: attention (a fused attention op, or a product -> softmax ->
  product chain), convolution, matrix product (each only when it carries at
  least a fifth of the FLOPs; with any other op around it, the family is
  ``conv_epilogue`` / ``matmul_epilogue``, otherwise the convolution's or
  product's own kind: ``conv_transpose``, ``depthwise_conv``, ``gemv``,
  ``batched_matmul``...), loss (a loss op, or several inputs reduced to a
  scalar), scan, softmax (an op, or max -> exp -> sum -> divide), norm (an op,
  or a reduction whose result rescales the tensor it reduced), pooling,
  argreduce, reduction (``fused_reduction`` when elementwise ops feed it),
  layout (copies only), then elementwise (one op) or fused_elementwise (a
  chain). The other families follow, broader ones first, then qualifiers
  (``layer_norm``, ``log_softmax``...), then the families of the remaining ops
  by the bytes they move.
- **bytes and FLOPs**: ``bytes`` is the fewest a fused kernel must move (every
  input and weight read once, every output written once, weights updated in
  place written once); ``flops`` counts every op by ``opcost``'s table.
- **fusion**: eager kernels, bytes moved op by op, intermediate bytes, and the
  traffic a full fusion removes.
- **regime**: ``launch`` when the fused floor is under 10 µs, else ``memory``
  or ``compute`` by which roofline term is larger, on the measured device when
  the caller has one, else on ``DEFAULT_ROOF`` (named in ``device``).
"""

from __future__ import annotations

from dataclasses import dataclass

from skillbase.models import FAMILIES, FusionInfo, Hardware, OpInfo, TaskUnderstanding, family_lineage
from skillbase.toolchain.opgraph import Op, OpGraph

MAX_OPS = 64
ANCHOR_SHARE = 0.2  # a product or convolution names the task when it does at least this share of the FLOPs
LAUNCH_FLOOR_US = 10.0
_TC_ROOTS = {"matmul", "conv", "attention", "matmul_epilogue"}
_SUM_LIKE = {"sum", "mean", "linalg_vector_norm", "norm", "var", "std", "var_mean", "std_mean", "nansum"}
_MAX_LIKE = {"amax", "max", "logsumexp"}
_STRUCTURE = {"triu", "tril"}  # masks that keep a product's kind (a triangular product is still a product)
_COMBINE = {"div", "mul", "sub"}


@dataclass(frozen=True)
class Roof:
    """Ceilings of one device: DRAM GB/s, fp32 CUDA-core TFLOP/s and tensor-core TFLOP/s per dtype."""

    name: str
    gbps: float
    fp32_tflops: float
    tensor_tflops: dict[str, float]

    def rate(self, dtype: str, tensor_cores: bool) -> float:
        """The FLOP rate a kernel of this dtype can reach (TFLOP/s)."""
        if tensor_cores and dtype in self.tensor_tflops:
            return self.tensor_tflops[dtype]
        return self.fp32_tflops


# fp32 products run on CUDA cores here: TF32 tensor cores round too coarsely for
# KernelBench's fp32 tolerance (1e-4), which a task keeps unless its META relaxes it.
DEFAULT_ROOF = Roof(
    "H100 SXM, nominal (3350 GB/s; 67 TFLOP/s fp32; 989 TFLOP/s fp16/bf16 tensor cores)",
    3350.0,
    67.0,
    {"fp16": 989.0, "bf16": 989.0, "mixed": 989.0, "fp8": 1979.0, "int8": 1979.0},
)


def roof_of(hw: Hardware) -> Roof | None:
    """The roofline of a measured device (None without a measured bandwidth): measured bandwidth (best streaming probe) and
    matmul rates; a rate it did not measure keeps DEFAULT_ROOF's."""
    if not hw.peak_gbps:
        return None
    rates = {
        d: hw.peak_tflops.get(k) or hw.peak_tflops.get(alt, 0.0) or DEFAULT_ROOF.tensor_tflops[d]
        for d, k, alt in (
            ("fp16", "fp16", "bf16"),
            ("bf16", "bf16", "fp16"),
            ("mixed", "bf16", "fp16"),
            ("fp8", "fp8", "fp8"),
            ("int8", "int8", "int8"),
        )
    }
    return Roof(
        f"{hw.name} ({hw.arch}), measured: {hw.peak_gbps:.0f} GB/s",
        hw.peak_gbps,
        hw.peak_tflops.get("fp32") or DEFAULT_ROOF.fp32_tflops,
        rates,
    )


def understand(graph: OpGraph, roof: Roof = DEFAULT_ROOF) -> TaskUnderstanding:
    """Families, floor, fusion and regime of a traced forward."""
    primary, families = classify(graph)
    fusion = fusion_of(graph)
    flops = sum(o.flops for o in graph.ops)
    trans = sum(o.transcendentals for o in graph.ops)
    regime, floor_us = regime_of(flops, fusion.min_bytes, graph.dtype, primary, roof)
    kernel_ops = [o for o in graph.ops if o.kernels]
    u = TaskUnderstanding(
        family=primary,
        families=families,
        ops=[op_info(o) for o in kernel_ops[:MAX_OPS]],
        ops_total=len(kernel_ops),
        bytes=fusion.min_bytes,
        flops=flops,
        transcendentals=trans,
        intensity=round(flops / fusion.min_bytes, 4) if fusion.min_bytes else 0.0,
        regime=regime,
        device=roof.name,
        fusion=fusion,
        traced=graph.traced,
    )
    u.summary = _summary(graph, u, floor_us)
    return u


def failed(reasons: list[str], input_bytes: int = 0) -> TaskUnderstanding:
    """The description of a forward that could not be traced: family 'other', the reasons in the summary."""
    return TaskUnderstanding(
        family="other",
        families=["other"],
        bytes=input_bytes,
        traced="failed",
        fusion=FusionInfo(min_bytes=input_bytes),
        summary="The forward could not be traced, so its ops, FLOPs and family are unknown (family 'other'); "
        + "; ".join(reasons)
        + ". It can still be benchmarked.",
    )


def with_roof(u: TaskUnderstanding, dtype: str, roof: Roof) -> TaskUnderstanding:
    """The same understanding with its regime read from another device's roofline."""
    if u.traced == "failed":
        return u
    regime, _ = regime_of(u.flops, u.bytes, dtype, u.family, roof)
    return u.model_copy(update={"regime": regime, "device": roof.name})


def regime_of(flops: int, nbytes: int, dtype: str, family: str, roof: Roof) -> tuple[str, float]:
    """('launch' | 'memory' | 'compute', the fused floor in µs) on ``roof``."""
    tensor_cores = bool(set(family_lineage(family)) & _TC_ROOTS)
    mem_us = nbytes / (roof.gbps * 1e3)
    cmp_us = flops / (roof.rate(dtype, tensor_cores) * 1e6)
    floor = max(mem_us, cmp_us)
    if floor < LAUNCH_FLOOR_US:
        return "launch", floor
    return ("memory" if mem_us >= cmp_us else "compute"), floor


# ---------------------------------------------------------------------------
# Families
# ---------------------------------------------------------------------------


def op_family(op: Op) -> str | None:
    """The family one op would be on its own (None for views and allocations)."""
    k = op.kind
    if k == "matmul":
        out = op.out_shapes[0] if op.out_shapes else []
        if op.base in ("mv", "addmv", "dot", "vdot") or (len(out) >= 2 and (out[-1] == 1 or out[-2] == 1)):
            return "gemv"
        if op.base in ("bmm", "baddbmm") and op.in_shapes and op.in_shapes[-1] and _batch(op) > 1:
            return "batched_matmul"
        return "matmul"
    if k == "conv":
        if op.attrs.get("transposed"):
            return "conv_transpose"
        groups, x = op.attrs.get("groups", 1), op.in_shapes[0]
        if groups > 1 and len(x) > 1 and groups == x[1] and op.in_shapes[1][1] == 1:
            return "depthwise_conv"
        return "conv"
    return {
        "attention": "attention",
        "softmax": "softmax",
        "norm": "norm",
        "pooling": "pooling",
        "argreduce": "argreduce",
        "scan": "scan",
        "loss": "loss",
        "reduction": "reduction",
        "layout": "layout",
        "elementwise": "elementwise",
    }.get(k)


def _batch(op: Op) -> int:
    shapes = op.in_shapes
    a = shapes[1] if op.base == "baddbmm" and len(shapes) > 2 else shapes[0]
    return a[0] if len(a) == 3 else 1


def classify(graph: OpGraph) -> tuple[str, list[str]]:
    """(primary family, ranked families) of a traced forward."""
    ops = [o for o in graph.ops if o.kernels and o.kind != "factory"]
    if not ops:
        return "other", ["other"]
    total = sum(o.flops for o in ops) or 1
    attention = _attention_ops(graph, ops)
    primary, anchor = _primary(graph, ops, attention, total)
    return primary, _rank(primary, anchor, ops, graph)


def _primary(graph: OpGraph, ops: list[Op], attention: set[int], total: int) -> tuple[str, str | None]:
    kinds = {o.kind for o in ops}
    if attention:
        return "attention", None
    for kind, epilogue in (("conv", "conv_epilogue"), ("matmul", "matmul_epilogue")):
        anchors = [o for o in ops if o.kind == kind]
        if anchors and sum(o.flops for o in anchors) >= ANCHOR_SHARE * total:
            main = max(anchors, key=lambda o: o.flops)
            rest = [o for o in ops if o.kind != kind and o.base not in _STRUCTURE]
            return (epilogue if rest else op_family(main)), op_family(main)
    if "loss" in kinds or _reduces_inputs_to_scalar(graph, ops):
        return "loss", None
    if "scan" in kinds:
        return "scan", None
    if "softmax" in kinds or _manual_softmax(graph, ops):
        return "softmax", None
    if "norm" in kinds or _manual_norm(graph, ops):
        return "norm", None
    for kind in ("pooling", "argreduce"):
        if kind in kinds:
            return kind, None
    if "reduction" in kinds:
        fed = any(
            _producer(graph, vid) is not None
            and _producer(graph, vid).kind == "elementwise"
            and _producer(graph, vid).flops
            for o in ops
            if o.kind == "reduction"
            for vid in o.reads
        )
        return ("fused_reduction" if fed else "reduction"), None
    if kinds <= {"layout"}:
        return "layout", None
    if kinds <= {"elementwise", "layout"}:
        return ("elementwise" if len(ops) == 1 else "fused_elementwise"), None
    return "other", None


def _producer(graph: OpGraph, vid: int) -> Op | None:
    p = graph.values[vid].producer
    return graph.ops[p] if p is not None else None


def _upstream(graph: OpGraph, op: Op, through: set[str], limit: int = 12) -> list[Op]:
    """Ops feeding ``op``, walking back through ops of the ``through`` kinds."""
    seen, out, stack = set(), [], [(vid, 0) for vid in op.reads]
    while stack:
        vid, depth = stack.pop()
        p = _producer(graph, vid)
        if p is None or p.index in seen or depth > limit:
            continue
        seen.add(p.index)
        out.append(p)
        if p.kind in through:
            stack += [(v, depth + 1) for v in p.reads]
    return out


def _downstream(graph: OpGraph, op: Op, through: set[str], limit: int = 12) -> list[Op]:
    """Ops fed by ``op``, walking forward through ops of the ``through`` kinds."""
    seen, out, stack = set(), [], [(vid, 0) for vid in op.writes]
    while stack:
        vid, depth = stack.pop()
        for c in graph.values[vid].consumers:
            user = graph.ops[c]
            if c in seen or depth > limit:
                continue
            seen.add(c)
            out.append(user)
            if user.kind in through:
                stack += [(v, depth + 1) for v in user.writes]
    return out


def _attention_ops(graph: OpGraph, ops: list[Op]) -> set[int]:
    """Indices of a fused attention op, or of softmaxes between two products (QK^T -> softmax -> PV)."""
    found = {o.index for o in ops if o.kind == "attention"}
    passthrough = {"elementwise", "layout", "view"}
    for s in (o for o in ops if o.kind == "softmax"):
        before = any(p.kind == "matmul" for p in _upstream(graph, s, passthrough))
        after = any(c.kind == "matmul" for c in _downstream(graph, s, passthrough))
        if before and after:
            found.add(s.index)
    # Scores normalized some other way (ReLU attention, linear attention): a batched
    # product whose output, through elementwise ops only, is an operand of another.
    for m in (o for o in ops if op_family(o) == "batched_matmul"):
        if any(op_family(c) == "batched_matmul" for c in _downstream(graph, m, passthrough | {"softmax"})):
            found.add(m.index)
    return found


def _reduces_inputs_to_scalar(graph: OpGraph, ops: list[Op]) -> bool:
    """Two or more inputs combined and reduced to one number: a loss written out by hand."""
    outs = [graph.values[v] for v in graph.outputs]
    used = [v for v in graph.inputs if graph.values[v].consumers]
    return (
        len(used) >= 2
        and all(len(v.shape) == 0 or _numel(v.shape) == 1 for v in outs)
        and any(o.kind in ("reduction", "norm") for o in ops)
    )


def _manual_softmax(graph: OpGraph, ops: list[Op]) -> bool:
    bases = {o.base for o in ops}
    return bool(bases & _MAX_LIKE) and "exp" in bases and bool(bases & {"sum"}) and bool(bases & {"div", "mul"})


def _manual_norm(graph: OpGraph, ops: list[Op]) -> bool:
    """A reduction whose result, through elementwise ops, rescales a tensor the size of what it reduced."""
    for r in (o for o in ops if o.kind == "reduction" and o.base in _SUM_LIKE | _MAX_LIKE):
        reduced = max((graph.values[v].nbytes for v in r.reads), default=0)
        for c in _downstream(graph, r, {"elementwise"}):
            if c.base in _COMBINE and any(
                graph.values[v].nbytes >= reduced > 0 for v in c.reads if graph.values[v].producer != r.index
            ):
                return True
    return False


def _norm_qualifier(graph: OpGraph, ops: list[Op]) -> str | None:
    for o in ops:
        if o.kind == "norm" and o.attrs.get("norm"):
            return o.attrs["norm"]
    bases = {o.base for o in ops}
    if bases & {"linalg_vector_norm", "norm"}:
        return "l2_norm" if not any(o.base == "abs" for o in ops) else "l1_norm"
    if "abs" in bases and bases & {"sum", "mean"}:
        return "l1_norm"
    if bases & {"pow", "square"} and bases & {"mean"} and bases & {"sqrt", "rsqrt"}:
        return "rms_norm"
    if bases & {"var", "var_mean", "std"}:
        return "layer_norm"
    return None


def _rank(primary: str, anchor: str | None, ops: list[Op], graph: OpGraph) -> list[str]:
    out: list[str] = []
    log_softmax = any(o.kind == "softmax" and o.attrs.get("log") for o in ops)

    def add(f: str | None) -> None:
        if not f or f in out:
            return
        out.append(f)
        # A qualifier follows the family it refines.
        if f == "norm":
            add(_norm_qualifier(graph, ops))
        elif f == "softmax" and log_softmax:
            add("log_softmax")

    for f in family_lineage(primary) + family_lineage(anchor):
        add(f)
    by_bytes: dict[str, int] = {}
    for o in ops:
        f = op_family(o)
        if f:
            by_bytes[f] = by_bytes.get(f, 0) + o.bytes
    for f in sorted(by_bytes, key=lambda f: -by_bytes[f]):
        for g in family_lineage(f):
            add(g)
    return [f for f in out if f in FAMILIES]


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# ---------------------------------------------------------------------------
# Bytes, fusion and the summary
# ---------------------------------------------------------------------------


def fusion_of(graph: OpGraph) -> FusionInfo:
    """Eager kernels and bytes, the fused minimum, and what fusing removes."""
    ops = graph.ops
    read_external = {vid for o in ops if o.kernels for vid in o.reads if graph.values[vid].source != "op"}
    # A forward that returns an input untouched still reads it.
    read_external |= {vid for vid in graph.outputs if graph.values[vid].source != "op"}
    # Inputs and weights an op overwrites in place (running statistics, counters) are written back once.
    mutated = {v.root for v in graph.values.values() if v.root is not None}
    outputs = set(graph.outputs)
    min_bytes = (
        sum(graph.values[v].nbytes for v in read_external | mutated)
        + sum(graph.values[v].nbytes for v in outputs)
        + sum(graph.values[v].nbytes for v in mutated)
    )
    intermediate = sum(
        v.nbytes for v in graph.values.values() if v.source == "op" and v.consumers and v.id not in outputs
    )
    eager = sum(o.bytes for o in ops if o.kernels)
    return FusionInfo(
        eager_kernels=sum(o.kernels for o in ops),
        eager_bytes=eager,
        min_bytes=min_bytes,
        intermediate_bytes=intermediate,
        removable_bytes=max(0, eager - min_bytes),
    )


def op_info(op: Op) -> OpInfo:
    """The public record of one op."""
    return OpInfo(
        op=op.name,
        kind=op.kind,
        family=op_family(op),
        inputs=op.in_shapes[:4],
        output=op.out_shapes[0] if op.out_shapes else [],
        dtype=op.dtype,
        flops=op.flops,
        transcendentals=op.transcendentals,
        bytes=op.bytes,
    )


def _summary(graph: OpGraph, u: TaskUnderstanding, floor_us: float) -> str:
    ops = [o for o in graph.ops if o.kernels]
    names = [o.name.removeprefix("aten.") for o in ops]
    shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
    where = {
        "meta": "on the meta device",
        "meta_after_cpu_init": "on the meta device after a CPU init",
        "cpu_shrunk": "on CPU tensors at a shrunk shape",
    }[graph.traced]
    f = u.fusion
    text = (
        f"Traced {where}: {shown or 'no kernel ops'}. Family {u.family}"
        + (f" (also {', '.join(u.families[1:6])})" if len(u.families) > 1 else "")
        + ". "
        f"{f.eager_kernels} eager kernels move {f.eager_bytes / 1e6:.1f} MB; one fused kernel must move "
        f"{f.min_bytes / 1e6:.1f} MB ({f.removable_bytes / 1e6:.1f} MB of intermediate traffic removable). "
        f"{u.flops / 1e9:.3f} GFLOP ({u.transcendentals / 1e9:.3f} G transcendental), "
        f"{u.intensity:.2f} FLOP/B: {u.regime}-bound on {u.device} (fused floor {floor_us:.1f} µs)."
    )
    uncounted = sorted({o.name for o in ops if o.attrs.get("no_cost_rule")})
    if uncounted:
        text += f" No cost rule for {', '.join(uncounted[:6])}: counted as 0 FLOPs."
    if graph.notes:
        text += " " + " ".join(n.rstrip(".") + "." for n in graph.notes)
    return text
