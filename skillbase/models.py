"""Records shared by every layer of skillbase.

These pydantic models are the contracts between the toolchain, the memory, the
retrievers, the skill library and the public faces (API, CLI, MCP). They are
plain data: no I/O, no behaviour beyond validation and small derived values.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# ---------------------------------------------------------------------------
# Vocabularies
# ---------------------------------------------------------------------------

Language = Literal["triton", "cuda"]
"""Candidate kernel languages: Triton, or CUDA C++ through torch's load_inline."""

Bottleneck = Literal["memory", "compute", "latency", "launch", "unknown"]
"""What limits a kernel: DRAM bandwidth, arithmetic throughput, latency or
occupancy (too little work in flight), or launch overhead (many tiny launches)."""

Verdict = Literal[
    "correct",  # every trial matched the reference and every anti-cheat check passed
    "incorrect",  # ran, but an output differed from the reference
    "rejected",  # an anti-cheat check failed (see CorrectnessReport.checks)
    "compile_error",  # the kernel did not compile
    "runtime_error",  # raised while running (not a crash)
    "timeout",  # exceeded the worker's time limit; the worker was killed
    "crashed",  # the worker process died (segfault, illegal memory access, OOM kill)
    "invalid",  # the task or solution file is malformed (no ModelNew, does not import, too big)
]

SkillStatus = Literal["draft", "approved", "deprecated"]

FAMILIES: dict[str, str] = {
    "elementwise": "one op per element (activations, casts, scaling)",
    "fused_elementwise": "a chain of elementwise ops fused into one pass",
    "softmax": "row-wise softmax / log-softmax",
    "norm": "layernorm, rmsnorm, groupnorm: per-row statistics then a scale",
    "reduction": "sum / mean / max / argmax over one or more dims",
    "scan": "prefix sums and cumulative ops",
    "matmul": "dense matrix products (GEMM, batched GEMM)",
    "matmul_epilogue": "a matrix product followed by bias, activation or residual",
    "layout": "transpose, permute, reshape copies, strided layout changes",
    "loss": "cross-entropy and other losses reducing logits against targets",
    "attention": "scaled dot-product attention, causal or not",
    "conv": "convolutions",
    "pooling": "max / average pooling",
    "other": "anything that fits none of the above",
    # Kinds found by tracing a task's forward (skillbase.toolchain.understand).
    "gemv": "matrix-vector products: one side of the product is a vector (memory-bound)",
    "batched_matmul": "a batch of independent matrix products (bmm)",
    "conv_transpose": "transposed (fractionally strided) convolutions",
    "depthwise_conv": "depthwise convolutions: one filter per channel, no sum over channels",
    "conv_epilogue": "a convolution with elementwise, norm, pooling or reduction ops fused around it",
    "argreduce": "argmax / argmin: the index of an extremum over a dim",
    "fused_reduction": "a reduction fed by elementwise producers, fused into one pass",
    # Qualifiers: they refine a family in TaskInfo.families and are never a primary family.
    "batch_norm": "normalization over the batch and spatial dims, per channel",
    "layer_norm": "normalization over the last dims, per row",
    "group_norm": "normalization over groups of channels",
    "instance_norm": "normalization over the spatial dims, per sample and channel",
    "rms_norm": "scaling by the root mean square, per row",
    "l1_norm": "division by a sum of absolute values",
    "l2_norm": "division by a Euclidean (Frobenius) norm",
    "log_softmax": "log of a softmax",
}

FAMILY_PARENTS: dict[str, tuple[str, ...]] = {
    "gemv": ("matmul",),
    "batched_matmul": ("matmul",),
    "conv_transpose": ("conv",),
    "depthwise_conv": ("conv",),
    # A convolution's epilogue is fused like a GEMM's (implicit GEMM makes it one).
    "conv_epilogue": ("conv", "matmul_epilogue"),
    "argreduce": ("reduction",),
    "fused_reduction": ("reduction",),
    "batch_norm": ("norm",),
    "layer_norm": ("norm",),
    "group_norm": ("norm",),
    "instance_norm": ("norm",),
    "rms_norm": ("norm",),
    "l1_norm": ("norm",),
    "l2_norm": ("norm",),
    "log_softmax": ("softmax",),
}
"""The broader families a family belongs to: what is written for the broader one applies to it."""

QUALIFIER_FAMILIES = frozenset(
    {"batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm", "l1_norm", "l2_norm", "log_softmax"}
)


def family_lineage(family: str | None) -> tuple[str, ...]:
    """``family`` then every broader family it belongs to, nearest first:
    ``'conv_epilogue'`` -> ('conv_epilogue', 'conv', 'matmul_epilogue')."""
    if not family:
        return ()
    out = [family]
    for f in out:
        out += [p for p in FAMILY_PARENTS.get(f, ()) if p not in out]
    return tuple(out)


DTYPES: tuple[str, ...] = ("fp32", "fp16", "bf16", "fp8", "int8", "mixed")

CODE_FEATURES: dict[str, str] = {
    "k_loop": "a loop over a reduction dimension inside the kernel",
    "tl_dot": "uses tl.dot (tensor cores through Triton)",
    "tensor_cores": "uses tensor-core instructions (tl.dot, wmma, mma, wgmma)",
    "atomics": "uses atomic operations",
    "masked_access": "loads or stores under a mask (tail handling)",
    "vectorized": "16-byte vector accesses (float4, tl.max_contiguous hints, 128-bit loads)",
    "shared_memory": "explicit shared memory (__shared__, extern shared)",
    "reduction": "reduces inside the kernel (tl.sum, tl.max, warp shuffles)",
    "warp_shuffle": "warp-level shuffles (__shfl_*)",
    "async_copy": "asynchronous global-to-shared copies (cp.async, TMA)",
    "tma": "Hopper tensor memory accelerator (tensor descriptors, cp.async.bulk.tensor)",
    "autotune": "triton.autotune or an explicit search over launch configurations",
    "persistent": "a persistent grid: programs loop over tiles",
    "multi_kernel": "launches more than one kernel per forward",
    "library_call": "calls torch / cuBLAS / cuDNN ops for part of the work",
    "fp32_accumulate": "accumulates in fp32 while inputs are lower precision",
    "online_reduction": "a single-pass online statistic (online softmax, Welford)",
    "cuda_graphs": "captures launches in a CUDA graph",
    "program_swizzle": "grouped / swizzled program ordering for L2 reuse",
}


def utcnow() -> datetime:
    """Current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


def new_id(prefix: str) -> str:
    """A time-sortable unique id such as ``att_0193f0c2a1b4_5e1f9a2c``."""
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}_{os.urandom(4).hex()}"


def content_hash(*parts: str) -> str:
    """sha256 of the given strings (joined with a separator), hex, 16 chars."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\x00")
    return h.hexdigest()[:16]


class Record(BaseModel):
    """Base for every record: forbids unknown fields so typos fail loudly."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# ---------------------------------------------------------------------------
# Hardware
# ---------------------------------------------------------------------------


class Hardware(Record):
    """The device a figure was measured on, with its measured ceilings."""

    kind: Literal["cuda", "cpu"]
    name: str = Field(description="device name as the driver reports it, e.g. 'NVIDIA H100 80GB HBM3'")
    arch: str = Field(description="'sm_90' for Hopper, 'cpu' for the interpreter")
    sm_count: int | None = None
    memory_bytes: int | None = None
    l2_bytes: int | None = None
    driver: str | None = None
    peak_gbps: float | None = Field(
        None,
        description="measured memory bandwidth, GB/s: the best of several large streaming operations "
        "(copy, sum, fill, add), each counting the bytes it must move",
    )
    bandwidth_probes_gbps: dict[str, float] = Field(
        default_factory=dict, description="each streaming probe's bandwidth, GB/s"
    )
    datasheet_gbps: float | None = Field(None, description="the vendor's stated memory bandwidth, GB/s, if known")
    peak_tflops: dict[str, float] = Field(
        default_factory=dict, description="measured dense matmul rate per dtype, TFLOP/s"
    )

    @property
    def key(self) -> str:
        """Stable identifier used in caches and the reasoning graph."""
        return f"{self.arch}:{self.name}"


def arch_number(arch: str | None) -> int | None:
    """``'sm_90a'`` -> 90; ``'cpu'`` or None -> None."""
    if not arch:
        return None
    m = re.fullmatch(r"sm_(\d+)[a-z]?", arch)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------------
# Tasks and candidates
# ---------------------------------------------------------------------------


class Tolerance(Record):
    atol: float
    rtol: float


# -- what a task's forward runs (skillbase.toolchain.understand) ---------------


class OpInfo(Record):
    """One ATen op of a traced forward, with what it costs when it runs as its own kernel."""

    op: str = Field(description="ATen op, e.g. 'aten.addmm'")
    kind: str = Field(
        description="matmul, conv, attention, softmax, norm, pooling, reduction, argreduce, scan, loss, "
        "elementwise, layout, factory, other"
    )
    family: str | None = Field(None, description="the family this op alone would be, e.g. 'conv_transpose'")
    inputs: list[list[int]] = Field(default_factory=list, description="shapes of its tensor inputs")
    output: list[int] = Field(default_factory=list, description="shape of its (first) output")
    dtype: str = ""
    flops: int = Field(0, description="FLOPs by the documented cost per op (toolchain/opcost.py)")
    transcendentals: int = Field(0, description="exp/log/tanh/erf/sqrt... evaluations, counted in flops too")
    bytes: int = Field(0, description="bytes it reads and writes as one eager kernel")


class FusionInfo(Record):
    """What fusing the whole forward into one kernel would save over running it op by op."""

    eager_kernels: int = Field(0, description="kernels the forward launches op by op (views and empty tensors: none)")
    eager_bytes: int = Field(0, description="bytes moved op by op: every op reads its inputs and writes its outputs")
    min_bytes: int = Field(
        0, description="fewest bytes one fused kernel must move: inputs and weights read once, outputs written once"
    )
    intermediate_bytes: int = Field(0, description="bytes of tensors one op writes and a later op reads")
    removable_bytes: int = Field(0, description="eager_bytes - min_bytes: traffic a full fusion removes")


class TaskUnderstanding(Record):
    """A task as its traced forward shows it: families, ops, floor, regime and fusion headroom."""

    family: str = Field(description="primary family from the trace ('other' when it could not be traced)")
    families: list[str] = Field(default_factory=list, description="every family the forward shows, most telling first")
    ops: list[OpInfo] = Field(
        default_factory=list, description="the op sequence, the first 64 ops at most (ops_total counts all)"
    )
    ops_total: int = 0
    bytes: int = Field(0, description="fewest bytes a fused kernel must move (FusionInfo.min_bytes)")
    flops: int = Field(0, description="FLOPs of every op, elementwise and transcendental ones included")
    transcendentals: int = 0
    intensity: float = Field(0.0, description="flops / bytes, FLOP per byte")
    regime: Literal["launch", "memory", "compute"] | None = Field(
        None, description="what bounds the fused kernel on `device`: launch (floor under 10 us), memory or compute"
    )
    device: str = Field("", description="the roofline the regime was read from")
    fusion: FusionInfo = Field(default_factory=FusionInfo)
    traced: Literal["meta", "meta_after_cpu_init", "cpu_shrunk", "failed"] = "meta"
    summary: str = Field("", description="one paragraph: what it computes, and how it was traced or why it was not")


class TaskInfo(Record):
    """A KernelBench-format task as loaded: what it computes and its floor."""

    name: str
    path: str = Field(description="absolute path of the task module")
    family: str
    dtype: str
    description: str = ""
    shape: dict[str, Any] = Field(default_factory=dict, description="the shape globals in effect")
    input_shapes: list[list[int]] = Field(default_factory=list)
    output_shapes: list[list[int]] = Field(default_factory=list)
    bytes_moved: int = Field(description="fewest bytes through DRAM: each input read once, each output written once")
    flops: int = Field(description="floating-point operations at this shape")
    regime: Literal["tiny", "small", "medium", "large"] = "medium"
    tolerance: Tolerance
    extra_shapes: list[dict[str, Any]] = Field(default_factory=list)
    small_shape: dict[str, Any] | None = Field(None, description="shape overrides used on CPU (Triton interpreter)")
    solutions: dict[str, str] = Field(default_factory=dict, description="built-in solution name -> path")
    source_hash: str = ""
    builtin: bool = False
    families: list[str] = Field(default_factory=list, description="family first, then the others the trace shows")
    understanding: TaskUnderstanding | None = Field(None, description="what the traced forward runs")

    @property
    def signature(self) -> str:
        """Task class key used by memory and retrieval: family × dtype × regime."""
        return f"{self.family}:{self.dtype}:{self.regime}"


class Candidate(Record):
    """A solution module's source: defines ``ModelNew``."""

    source: str
    language: Language | None = Field(None, description="detected from the source when omitted")
    path: str | None = Field(None, description="where the source came from, for diagnostics")

    @property
    def source_hash(self) -> str:
        return content_hash(self.source)


# ---------------------------------------------------------------------------
# Compile
# ---------------------------------------------------------------------------


class Diagnostic(Record):
    severity: Literal["error", "warning", "note"]
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    source_line: str | None = None


class KernelReport(Record):
    """Resources of one compiled kernel (one Triton config or one CUDA function)."""

    name: str
    language: Language
    registers: int | None = Field(None, description="registers per thread (ptxas)")
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_bytes: int = 0
    shared_bytes: int = Field(0, description="static shared memory per block, bytes")
    num_warps: int | None = None
    num_stages: int | None = None
    config: dict[str, Any] = Field(default_factory=dict, description="constexprs / template parameters")
    signature: dict[str, str] = Field(default_factory=dict)


class CompileReport(Record):
    ok: bool
    language: Language
    arch: str
    kernels: list[KernelReport] = Field(default_factory=list)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    log: str = Field("", description="compiler output, truncated")
    log_truncated: bool = False
    full_log_path: str | None = None
    toolchain: dict[str, str] = Field(default_factory=dict)
    traced_shape: dict[str, Any] | None = Field(None, description="shape the launches were traced at")
    duration_s: float = 0.0


# ---------------------------------------------------------------------------
# Verify and benchmark
# ---------------------------------------------------------------------------


class Check(Record):
    """One named correctness or anti-cheat check."""

    name: str
    passed: bool
    skipped: bool = Field(False, description="not run here (for example it needs a GPU); passed is then True")
    detail: str = ""


class CorrectnessReport(Record):
    passed: bool
    trials: int
    shapes_checked: list[dict[str, Any]] = Field(default_factory=list)
    max_abs_error: float | None = None
    max_rel_error: float | None = Field(None, description="max over trials of ||out-ref|| / ||ref||")
    tolerance: Tolerance | None = None
    checks: list[Check] = Field(default_factory=list)

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


class TimingStats(Record):
    """Robust statistics of repeated device timings, in milliseconds."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    cv: float = Field(description="coefficient of variation (std / mean)")
    ci_rel: float = Field(description="relative half-width of the 95% confidence interval of the median")
    n: int
    method: str = Field(description="how it was measured, e.g. 'cuda events, L2 flushed, 4 input sets rotated'")

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms


class Roofline(Record):
    bytes_moved: int
    flops: int
    achieved_gbps: float
    achieved_tflops: float
    peak_gbps: float | None
    peak_tflops: float | None
    floor_ms: float | None = Field(None, description="max(bytes/peak_bw, flops/peak_rate)")
    pct_sol: float | None = Field(None, description="floor_ms / measured median, percent")
    bound: Bottleneck


class ErrorInfo(Record):
    type: str
    message: str
    file: str | None = None
    line: int | None = None
    traceback: str = ""


class BenchReport(Record):
    """Everything one evaluation of a candidate found: verdict, checks, timing, roofline."""

    task: str
    task_signature: str
    solution_hash: str
    language: Language | None = None
    device: str = Field(description="'cuda:0', 'cpu'")
    hardware: Hardware
    verdict: Verdict
    message: str = Field("", description="one line a person or agent reads first")
    correctness: CorrectnessReport | None = None
    timing: TimingStats | None = Field(
        None, description="device time of one call (what the GPU spends; speedups and % of SOL use it)"
    )
    timing_unavailable: str | None = Field(None, description="why there is no timing (e.g. no GPU)")
    host_ms_per_call: dict[str, float] = Field(
        default_factory=dict,
        description="what a caller pays per call, launches included (back-to-back calls, "
        "wall clock), ms: 'candidate', 'eager', 'torch_compile'",
    )
    phases_s: dict[str, float] = Field(
        default_factory=dict,
        description="wall seconds of the evaluation's phases: 'build' (CUDA C++ extension "
        "builds), 'first_call' (the one-time cost inside the candidate's first "
        "call, Triton compiling and autotuning: its first forward less its "
        "fastest later one), 'to_timing' (request start to the first timed call), "
        "'total'; "
        "and in order: 'reference', 'baselines', 'load_and_build', 'first_trial' (the candidate's "
        "kernels compile and autotune), 'trials', "
        "'inputs_rewritten', 'wider_inputs', 'checks_and_extra_shapes', "
        "'profiled_checks', 'timing'",
    )
    baselines: dict[str, TimingStats] = Field(
        default_factory=dict, description="'eager', 'torch_compile' (default mode), 'torch_compile_max_autotune'"
    )
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = Field(None, description="over torch.compile's default mode")
    speedup_vs_max_autotune: float | None = Field(None, description="over torch.compile(mode='max-autotune')")
    precision: str | None = Field(
        None,
        description="the float32 policy the verdict and timings ran under: "
        "'exact fp32' (TF32 off, as PyTorch defaults) or 'TF32 allowed'",
    )
    roofline: Roofline | None = None
    custom_kernels: list[str] = Field(default_factory=list, description="kernels the candidate launched")
    error: ErrorInfo | None = None
    toolchain: dict[str, str] = Field(default_factory=dict)
    wall_s: float = 0.0
    cached: bool = False
    notes: list[str] = Field(default_factory=list, description="caveats: shape used, baselines unavailable, ...")

    @property
    def bottleneck(self) -> Bottleneck:
        return self.roofline.bound if self.roofline else "unknown"


# ---------------------------------------------------------------------------
# Memory records
# ---------------------------------------------------------------------------


class Attempt(Record):
    """One benchmarked candidate, with its lineage. The ledger's main record."""

    id: str = Field(default_factory=lambda: new_id("att"))
    task: str
    task_signature: str
    family: str
    dtype: str
    source: str
    source_hash: str
    language: Language | None = None
    parent_id: str | None = None
    techniques: list[str] = Field(default_factory=list)
    compile_report: CompileReport | None = None
    bench_report: BenchReport | None = None
    verdict: Verdict
    median_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    pct_sol: float | None = None
    bottleneck: Bottleneck = "unknown"
    hardware: str | None = Field(None, description="Hardware.key")
    arch: str | None = None
    toolchain: dict[str, str] = Field(default_factory=dict)
    session: str | None = None
    agent: str | None = None
    run: str | None = Field(None, description="the suite run (run directory name) this attempt was evaluated in")
    notes: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class Experience(Record):
    """A lesson learned, tied to the attempts that taught it and the gain measured."""

    id: str = Field(default_factory=lambda: new_id("exp"))
    title: str = ""
    lesson: str
    task: str | None = None
    task_signature: str | None = None
    family: str | None = None
    dtype: str | None = None
    before_attempt: str | None = None
    after_attempt: str | None = None
    techniques: list[str] = Field(default_factory=list)
    gain: float | None = Field(None, description="measured speedup of after over before (>1 is faster)")
    bottleneck: Bottleneck | None = None
    arch: str | None = None
    hardware: str | None = None
    conditions: str = Field("", description="where the lesson held: shapes, dtype, GPU")
    source: Literal["measured", "agent", "curated", "distilled", "imported"] = "agent"
    session: str | None = None
    agent: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class Technique(Record):
    """An entry of the controlled technique vocabulary."""

    name: str = Field(description="canonical id: lowercase words joined by hyphens")
    title: str
    category: str
    description: str
    aliases: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _canonical(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", v):
            raise ValueError(f"technique name {v!r} must be lowercase words joined by hyphens")
        return v


class AppliesWhen(Record):
    """Machine-checkable conditions under which a skill applies. Empty lists mean 'any'."""

    families: list[str] = Field(default_factory=list)
    bottlenecks: list[Bottleneck] = Field(default_factory=list)
    dtypes: list[str] = Field(default_factory=list)
    min_arch: str | None = Field(None, description="e.g. 'sm_90' for Hopper-only techniques")
    requires_features: list[str] = Field(default_factory=list, description="names from CODE_FEATURES")
    excludes_features: list[str] = Field(default_factory=list, description="names from CODE_FEATURES")
    metrics: list[str] = Field(
        default_factory=list,
        description=(
            "profile conditions, any one of which makes the skill apply, as 'METRIC OP VALUE' with a metric from "
            "PROFILE_METRICS, e.g. 'ld_sectors_per_request > 8' or 'occupancy_limiter == registers'"
        ),
    )


class Evidence(Record):
    """A measurement backing a skill."""

    attempt_id: str | None = None
    experience_id: str | None = None
    task: str | None = None
    gain: float | None = Field(None, description="speedup measured")
    hardware: str | None = None
    note: str = ""


class Provenance(Record):
    author: str = "unknown"
    source: Literal["seed", "agent", "curator", "distilled", "imported"] = "curator"
    from_experiences: list[str] = Field(default_factory=list)
    merged_from: list[str] = Field(default_factory=list)


SKILL_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class Skill(Record):
    """A curated technique write-up. Frontmatter fields plus a markdown body.

    ``name`` and ``description`` follow the Agent Skills rules (name: lowercase
    letters, digits and hyphens, at most 64 characters; description at most
    1024 characters) so an approved skill exports as a valid ``SKILL.md``.
    """

    name: str
    description: str
    techniques: list[str] = Field(default_factory=list)
    applies_when: AppliesWhen = Field(default_factory=AppliesWhen)
    languages: list[Language] = Field(default_factory=list)
    expected_effect: str = ""
    pitfalls: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    examples: list[dict[str, str]] = Field(
        default_factory=list,
        description="runnable examples: {'task': built-in task name or relative path, 'solution': relative path}",
    )
    status: SkillStatus = "draft"
    version: int = 1
    provenance: Provenance = Field(default_factory=Provenance)
    body: str = ""
    superseded_by: str | None = Field(
        None, description="for a deprecated skill: the skill that replaces it (after a merge)"
    )
    files: dict[str, str] = Field(
        default_factory=dict,
        description="text files that live beside SKILL.md (the examples): relative path -> content",
    )

    @field_validator("name")
    @classmethod
    def _name_rules(cls, v: str) -> str:
        if len(v) > 64 or not SKILL_NAME_RE.match(v):
            raise ValueError(
                f"skill name {v!r} must be at most 64 characters of lowercase letters, digits and single hyphens"
            )
        return v

    @field_validator("description")
    @classmethod
    def _description_rules(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("skill description must say what the skill does and when to use it")
        if len(v) > 1024:
            raise ValueError(f"skill description is {len(v)} characters; the limit is 1024")
        return v


class SkillVersion(Record):
    """One row of a skill's history."""

    name: str
    version: int
    status: SkillStatus
    author: str
    reason: str
    created_at: datetime
    skill: Skill


class Feedback(Record):
    """Whether a recalled item was used and whether the next attempt improved."""

    item_kind: Literal["skill", "experience", "attempt", "technique"]
    item_id: str
    query: str = ""
    used: bool = True
    attempt_id: str | None = None
    improved: bool | None = None
    created_at: datetime = Field(default_factory=utcnow)


# ---------------------------------------------------------------------------
# Retrieval
# ---------------------------------------------------------------------------


class CodeFeatures(Record):
    """Cheap static facts about a candidate's source, for queries and gates."""

    language: Language | None = None
    features: list[str] = Field(default_factory=list, description="names from CODE_FEATURES present")
    kernels: list[str] = Field(default_factory=list)
    identifiers: list[str] = Field(default_factory=list, description="notable API names used (tl.dot, cp.async, ...)")
    parse_error: str | None = None


class RecallItem(Record):
    kind: Literal["skill", "experience", "attempt"]
    id: str
    title: str
    summary: str
    techniques: list[str] = Field(default_factory=list)
    score: float
    parts: dict[str, float] = Field(
        default_factory=dict, description="score components: vector, lexical, graph, value, ..."
    )
    why: str = Field(description="one sentence: why this was chosen")
    evidence: list[Evidence] = Field(default_factory=list)


class Suggestion(Record):
    technique: str
    title: str
    score: float
    expected_gain: float | None = Field(None, description="geometric-mean speedup seen so far")
    uncertainty: float | None = Field(None, description="std of log-speedup, or the prior's when untried")
    tries: int = 0
    successes: int = 0
    why: str
    skills: list[str] = Field(default_factory=list)


class RecallResult(Record):
    query: str = Field(description="what the query was understood as: family, bottleneck, features, text")
    family: str | None = None
    bottleneck: Bottleneck | None = None
    arch: str | None = None
    features: list[str] = Field(default_factory=list)
    items: list[RecallItem] = Field(default_factory=list)
    suggestions: list[Suggestion] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="degradations and warnings, e.g. 'code did not parse'")
    latency_ms: float = 0.0


# ---------------------------------------------------------------------------
# API results
# ---------------------------------------------------------------------------


class BenchmarkResult(Record):
    """A benchmark and the attempt it was recorded as."""

    attempt_id: str | None = Field(None, description="the recorded attempt; None when recording was off")
    report: BenchReport
    parent_id: str | None = None
    gain_vs_parent: float | None = Field(
        None, description="parent's median over this median, same hardware (>1 is faster); None if either is untimed"
    )
    recorded: bool = False


class AttemptSummary(Record):
    """An attempt without its source and reports: what a lineage listing shows."""

    id: str
    task: str
    parent_id: str | None = None
    techniques: list[str] = Field(default_factory=list)
    verdict: Verdict
    median_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    pct_sol: float | None = None
    bottleneck: Bottleneck = "unknown"
    hardware: str | None = None
    session: str | None = None
    agent: str | None = None
    notes: str = ""
    created_at: datetime

    @classmethod
    def of(cls, a: "Attempt") -> "AttemptSummary":
        return cls(**{name: getattr(a, name) for name in cls.model_fields})


class TaskSummary(Record):
    """A task as an agent first sees it: what it computes, its floor, and what is known of it."""

    info: TaskInfo
    floor_ms: float | None = Field(None, description="max(bytes/peak bandwidth, FLOPs/peak rate) on `hardware`")
    hardware: str | None = Field(None, description="device whose measured peaks give floor_ms and the baselines")
    baselines_ms: dict[str, float] = Field(default_factory=dict, description="eager / torch_compile medians, ms")
    attempts: int = 0
    best: AttemptSummary | None = Field(None, description="fastest correct attempt so far")
    note: str | None = Field(None, description="what is missing, e.g. a task known to the store only by its records")


class InitReport(Record):
    """What `skillbase init` did."""

    home: str
    techniques: int
    skills_added: int
    skills_total: int
    records_imported: int = Field(description="seeded attempts and experiences new to this store")
    experiences_total: int
    seconds: float


# ---------------------------------------------------------------------------
# Profiles (Nsight Compute, or what was measured instead)
# ---------------------------------------------------------------------------

PROFILE_METRICS: dict[str, str] = {
    "duration_us": "kernel duration, µs (gpu__time_duration.sum)",
    "dram_pct": "DRAM throughput, % of peak sustained",
    "l2_pct": "L2 throughput, % of peak sustained",
    "sm_pct": "SM throughput, % of peak sustained",
    "tensor_pct": "tensor pipe utilisation, % of peak sustained while active",
    "achieved_occupancy_pct": "achieved occupancy: resident warps, % of the SM's maximum",
    "theoretical_occupancy_pct": "theoretical occupancy, % of the SM's maximum warps",
    "occupancy_limiter": "what caps theoretical occupancy: registers, shared_memory, block_size or blocks (a word)",
    "registers": "registers per thread",
    "spill_bytes": "bytes spilled to local memory per thread (compile report; ptxas)",
    "local_bytes": "local-memory bytes moved (spills at run time), bytes",
    "l1_hit_pct": "L1 hit rate, %",
    "l2_hit_pct": "L2 hit rate, %",
    "ld_sectors_per_request": "32-byte sectors per global load request",
    "st_sectors_per_request": "32-byte sectors per global store request",
    "ld_efficiency_pct": "bytes used of each loaded sector, % (100: fully coalesced)",
    "st_efficiency_pct": "bytes used of each stored sector, %",
    "smem_conflict_pct": "shared-memory bank conflicts, % of shared wavefronts",
    "waves": "waves per SM: blocks launched over the blocks resident at once on the whole GPU",
    "tail_idle_pct": "share of the last wave's block slots left idle, % (tail effect)",
    "top_stall_pct": "share of the most frequent warp-stall reason, %",
}
"""Per-kernel profile metrics by the names skills use in ``applies_when.metrics``."""

PROFILE_STATES: dict[str, str] = {
    "dram-bound": "DRAM throughput near peak: only moving fewer bytes (fusion) helps, or stop",
    "uncoalesced": "global accesses touch many more sectors than they use",
    "bank-conflicts": "shared-memory accesses serialise on bank conflicts",
    "register-spills": "registers spill to local memory",
    "low-occupancy": "too few warps resident to hide latency",
    "tail-effect": "the grid leaves SMs idle: a partial last wave or fewer blocks than SMs",
    "compute-bound": "arithmetic pipes near peak",
    "tensor-underused": "a matrix product running off the tensor cores",
    "l2-bound": "L2 throughput near peak below the DRAM limit: the same bytes re-fetched (small tiles, poor reuse)",
    "latency-bound": "neither memory nor compute busy: warps wait on dependencies",
    "balanced": "no single limiter stands out",
}
"""Discretised bottleneck states of a profiled kernel (graph nodes ``pstate:<state>``)."""

METRIC_CONDITION = re.compile(r"([a-z_0-9]+)\s*(<=|>=|==|!=|<|>)\s*([A-Za-z0-9_.+-]+)")
"""A skill's metric condition: 'METRIC OP VALUE', e.g. 'dram_pct > 85' or 'occupancy_limiter == registers'."""
OCCUPANCY_LIMITERS = ("registers", "shared_memory", "block_size", "blocks")


def parse_metric_condition(cond: str) -> tuple[str, str, str] | None:
    """('dram_pct', '>', '85') from 'dram_pct > 85'; None when it is not of that form."""
    m = METRIC_CONDITION.fullmatch(cond.strip())
    return (m.group(1), m.group(2), m.group(3)) if m else None


ProfileUnavailable = Literal[
    "no_gpu", "ncu_missing", "ncu_not_permitted", "ncu_failed", "ncu_timeout", "candidate_failed", "no_own_kernels"
]


class StallShare(Record):
    reason: str = Field(description="warp-stall reason as Nsight Compute names it, e.g. 'long_scoreboard'")
    share_pct: float = Field(description="share of all stall cycles per issued instruction, %")


class KernelProfile(Record):
    """One profiled kernel launch: what Nsight Compute measured, None where it did not (see ``missing``)."""

    name: str
    grid: str | None = None
    block: str | None = None
    duration_us: float | None = None
    dram_pct: float | None = None
    l2_pct: float | None = None
    sm_pct: float | None = None
    tensor_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    occupancy_limiter: str | None = Field(None, description="registers | shared_memory | block_size | blocks")
    registers: int | None = None
    spill_bytes: int | None = Field(None, description="from the compile report, when it was available")
    local_bytes: float | None = None
    l1_hit_pct: float | None = None
    l2_hit_pct: float | None = None
    ld_sectors_per_request: float | None = None
    st_sectors_per_request: float | None = None
    ld_efficiency_pct: float | None = None
    st_efficiency_pct: float | None = None
    smem_conflict_pct: float | None = None
    waves: float | None = None
    tail_idle_pct: float | None = None
    stalls: list[StallShare] = Field(default_factory=list, description="top warp-stall reasons, largest first")
    missing: dict[str, str] = Field(default_factory=dict, description="metric -> why it has no value")

    def metrics(self) -> dict[str, float | str]:
        """The values by PROFILE_METRICS name (what skill conditions are checked against)."""
        out: dict[str, float | str] = {}
        for name in PROFILE_METRICS:
            v = self.stalls[0].share_pct if name == "top_stall_pct" and self.stalls else getattr(self, name, None)
            if v is not None:
                out[name] = v
        return out


class Finding(Record):
    """One problem the diagnosis found, in plain words, with what to do about it."""

    kernel: str
    problem: str = Field(description="a PROFILE_STATES key")
    summary: str = Field(
        description="plain words with the numbers, e.g. 'uncoalesced loads: 32.0 sectors per request, 4.0 expected'"
    )
    severity: float = Field(description="0..1: the share of the kernel's time it plausibly costs")
    techniques: list[str] = Field(default_factory=list, description="techniques that address it")


class TimedKernel(Record):
    name: str
    duration_us: float = Field(description="device time of one launch, µs (torch profiler / CUPTI)")
    calls: int = 1


class NcuRun(Record):
    """How Nsight Compute was run and what it cost."""

    command: str
    wall_s: float = Field(description="wall time of the whole ncu run, s (start, warm-up, replays)")
    kernels: int = 0
    passes: list[int] = Field(default_factory=list, description="replay passes per profiled kernel")
    clock_control: str = "none"
    exit_code: int | None = None


class ProfileReport(Record):
    """A candidate's profile: per-kernel counters and a diagnosis, or, when Nsight Compute could not
    run, why not and what was measured instead (torch profiler kernel list, compile report, roofline)."""

    task: str
    task_signature: str = ""
    solution_hash: str
    device: str
    hardware: Hardware | None = None
    available: bool = Field(description="True when Nsight Compute counters were measured")
    unavailable: ProfileUnavailable | None = None
    unavailable_detail: str = ""
    measured_instead: list[str] = Field(default_factory=list)
    kernels: list[KernelProfile] = Field(default_factory=list)
    torch_kernels: list[TimedKernel] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list, description="most severe first")
    state: str | None = Field(None, description="the discretised bottleneck state (a PROFILE_STATES key)")
    metrics: dict[str, float | str] = Field(
        default_factory=dict, description="the dominant kernel's metrics by PROFILE_METRICS name"
    )
    diagnosis: str = Field("", description="a few plain sentences")
    techniques: list[str] = Field(default_factory=list, description="matching techniques, most relevant first")
    bound: Bottleneck = "unknown"
    bytes_moved: int = 0
    flops: int = 0
    floor_us: float | None = Field(None, description="roofline floor on this GPU's measured peaks, µs")
    kernel_time_us: float | None = Field(None, description="sum of the profiled kernels' durations, µs")
    compile: CompileReport | None = None
    ncu: NcuRun | None = None
    raw_csv: str = Field("", description="Nsight Compute's CSV (--page raw), clipped")
    attempt_id: str | None = Field(None, description="the attempt this profile is stored with")
    notes: list[str] = Field(default_factory=list)
    wall_s: float = 0.0
