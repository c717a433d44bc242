"""One query from whatever the caller has: words, a task, a candidate's source,
a benchmark report, in any combination, plus the GPU architecture.

``build_query`` works out the kernel family, dtype, task class, bottleneck and
code features, and writes the two texts the searches use: ``text`` for the
embedding (the words plus a structural summary) and ``lexical`` for BM25 (the
words plus exact identifiers and feature names). What it could not work out is
left as None; what it had to guess or cut is said in ``notes``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from skillbase.retrievers.features import MAX_ANALYZED_BYTES, analyze_source
from skillbase.retrievers.tokens import BOTTLENECK_WORDS, DTYPE_WORDS, FAMILY_WORDS, first_match

from skillbase.errors import InvalidInput
from skillbase.models import BenchReport, CodeFeatures, ProfileReport, TaskInfo, Technique, arch_number, family_lineage

MAX_TEXT_CHARS = 4_000
EMBED_CHARS = 1_200  # what the embedding sees of the query (about 256 word pieces)

# Nominal ceilings for guessing a task's bottleneck before it is measured:
# (DRAM GB/s, tensor-core TFLOP/s for 16-bit inputs, TF32 TFLOP/s, fp32 CUDA-core TFLOP/s).
_CEILINGS = {
    90: (3000.0, 790.0, 400.0, 60.0),
    89: (864.0, 362.0, 181.0, 91.0),
    86: (936.0, 142.0, 71.0, 35.0),
    80: (2000.0, 312.0, 156.0, 19.5),
    100: (8000.0, 2250.0, 1100.0, 80.0),
}
_DEFAULT_ARCH = 90
_TENSOR_CORE_FAMILIES = {"matmul", "matmul_epilogue", "attention", "conv"}
# Code features that show a technique is already in the candidate.
FEATURE_TECHNIQUE = {
    "tensor_cores": "tensor-cores",
    "autotune": "autotuning",
    "persistent": "persistent-kernel",
    "program_swizzle": "program-swizzle",
    "tma": "tma",
    "vectorized": "vectorized-access",
    "cuda_graphs": "cuda-graphs",
    "warp_shuffle": "block-reduction",
    "fp32_accumulate": "mixed-precision",
}
# Families whose kernels share most of their ideas.
RELATED_FAMILIES = (
    {"elementwise", "fused_elementwise"},
    {"matmul", "matmul_epilogue"},
    {"softmax", "loss"},
    {"norm", "reduction"},
    {"reduction", "scan"},
    {"attention", "softmax"},
    {"pooling", "layout"},
)


def family_affinity(a: str | None, b: str | None) -> float:
    """1 for the same family, 0.5 for related ones (or one within the other, or both within a
    broader one: conv_transpose and depthwise_conv), 0 otherwise (or unknown)."""
    if not a or not b:
        return 0.0
    if a == b:
        return 1.0
    if any(a in g and b in g for g in RELATED_FAMILIES):
        return 0.5
    return 0.5 if set(family_lineage(a)) & set(family_lineage(b)) else 0.0


@dataclass(frozen=True)
class Query:
    """What a recall is about. Build with ``build_query``."""

    text: str  # embedded for vector search
    lexical: str  # tokenized for BM25
    words: str = ""  # the caller's own words (possibly cut)
    inputs: tuple[str, ...] = ()  # which inputs were given: text, task, source, report
    task_name: str | None = None
    family: str | None = None
    families: tuple[str, ...] = ()  # the task's traced families, primary first (a task's only)
    dtype: str | None = None
    regime: str | None = None
    bottleneck: str | None = None
    bottleneck_from: str | None = None  # report | task | text
    arch: str | None = None
    code: CodeFeatures | None = None
    code_summary: str | None = None
    techniques: tuple[str, ...] = ()  # techniques the words name
    applied: tuple[str, ...] = ()  # techniques the candidate already uses (its code, or its recorded attempt)
    verdict: str | None = None  # of the report, when one was given
    pct_sol: float | None = None  # percent of speed of light, from the report or the words
    notes: tuple[str, ...] = field(default=())
    profile_state: str | None = None  # the profile's discretised bottleneck state (PROFILE_STATES), when one was given
    profile_metrics: dict = field(default_factory=dict)  # the profiled main kernel's metrics by PROFILE_METRICS name
    profile_techniques: tuple[str, ...] = ()  # what the profile's diagnosis says to try, most relevant first

    @property
    def task_class(self) -> str | None:
        """family:dtype:regime when all three are known."""
        if self.family and self.dtype and self.regime:
            return f"{self.family}:{self.dtype}:{self.regime}"
        return None

    @property
    def lineage(self) -> tuple[str, ...]:
        """The family and the broader families it belongs to: what is written for them applies."""
        return family_lineage(self.family)

    @property
    def parts(self) -> tuple[str, ...]:
        """Families of the task's other ops (a norm after a convolution), beyond its lineage and
        the generic elementwise and layout parts every chain has."""
        skip = set(self.lineage) | {"elementwise", "fused_elementwise", "layout", "other"}
        return tuple(f for f in self.families if f not in skip)

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(self.code.features) if self.code else ()

    def context_key(self) -> tuple:
        """Everything but the words (and notes): what the gate and the technique beliefs read.
        Queries worded differently about the same kernel share it."""
        code = self.code
        return (
            self.inputs,
            self.task_name,
            self.family,
            self.families,
            self.dtype,
            self.regime,
            self.bottleneck,
            self.bottleneck_from,
            self.arch,
            self.techniques,
            self.applied,
            self.verdict,
            self.pct_sol,
            self.profile_state,
            tuple(sorted(self.profile_metrics.items())),
            self.profile_techniques,
            None
            if code is None
            else (code.language, tuple(code.features), tuple(code.kernels), tuple(code.identifiers), code.parse_error),
        )

    def describe(self) -> str:
        """One line: what the query was understood as."""
        parts = [
            f"{k}={v}"
            for k, v in (
                ("task", self.task_name),
                ("family", self.family),
                ("dtype", self.dtype),
                ("regime", self.regime),
                ("bottleneck", self.bottleneck),
                ("arch", self.arch),
            )
            if v
        ]
        if len(self.families) > 1:
            parts.append("families=" + ",".join(self.families))
        if self.features:
            parts.append("features=" + ",".join(self.features))
        if self.techniques:
            parts.append("techniques=" + ",".join(self.techniques))
        if self.applied:
            parts.append("applied=" + ",".join(self.applied))
        if self.profile_state:
            parts.append(f"profile={self.profile_state}")
        if self.words:
            parts.append(f"text={self.words[:120]!r}")
        return "; ".join(parts)


class TechniqueMatcher:
    """Finds the vocabulary's techniques named in free text, by any alias."""

    def __init__(self, techniques: Iterable[Technique]):
        self._patterns: list[tuple[str, re.Pattern[str]]] = []
        for t in techniques:
            spellings = sorted({t.name, t.name.replace("-", " "), *t.aliases}, key=len, reverse=True)
            alts = "|".join(
                re.escape(s).replace(r"\ ", r"[\s_-]+").replace(r"\-", r"[\s_-]+") for s in spellings if len(s) > 2
            )
            if alts:
                self._patterns.append((t.name, re.compile(rf"(?<![\w.]){'(?:' + alts + ')'}(?![\w])", re.I)))

    def find(self, text: str) -> tuple[str, ...]:
        """Canonical names of the techniques ``text`` mentions, in vocabulary order."""
        if not text:
            return ()
        return tuple(name for name, pat in self._patterns if pat.search(text))


def build_query(
    *,
    text: str | None = None,
    task: TaskInfo | None = None,
    source: str | None = None,
    report: BenchReport | None = None,
    arch: str | None = None,
    matcher: TechniqueMatcher | None = None,
    max_source_bytes: int = MAX_ANALYZED_BYTES,
    applied: Iterable[str] = (),
    profile: ProfileReport | None = None,
) -> Query:
    """A Query from any combination of inputs. InvalidInput when there is
    nothing to go on (every input missing or blank) or an input has the wrong
    type; over-long text is cut (with a note), and source that does not parse
    gives a degraded query (with a note), never an error."""
    notes: list[str] = []
    words = _words(text, notes)
    if source is not None and not isinstance(source, str):
        raise InvalidInput(f"source must be text, got {type(source).__name__}", hint="pass the candidate's source code")
    if task is not None and not isinstance(task, TaskInfo):
        raise InvalidInput(
            f"task must be a TaskInfo, got {type(task).__name__}", hint="load it with Toolchain.load_task"
        )
    if report is not None and not isinstance(report, BenchReport):
        raise InvalidInput(f"report must be a BenchReport, got {type(report).__name__}")
    if profile is not None and not isinstance(profile, ProfileReport):
        raise InvalidInput(f"profile must be a ProfileReport, got {type(profile).__name__}")
    has_source = bool(source and source.strip())
    if not (words or task or has_source or report):
        raise InvalidInput(
            "nothing to recall from: the text, task, source and report are all empty",
            hint="describe the kernel or the problem, or pass a task, a candidate's source or a benchmark report",
        )
    inputs = tuple(n for n, v in (("text", words), ("task", task), ("source", has_source), ("report", report)) if v)

    analysis = analyze_source(source, max_bytes=max_source_bytes) if has_source else None
    if analysis is not None:
        notes += analysis.notes
        if analysis.code.parse_error:
            notes.append(analysis.code.parse_error)
    arch_used = _arch(arch, report, notes)
    family, dtype, regime, task_name = _task_facts(task, report, words, source if has_source else "", notes)
    bottleneck, bn_from = _bottleneck(task, report, words, family, dtype, arch_used, notes)
    techniques = matcher.find(words) if matcher and words else ()
    pct_sol = report.roofline.pct_sol if report and report.roofline else None
    if pct_sol is None and words:
        pct_sol = _pct_from_words(words)
    used = dict.fromkeys(applied)
    for f in analysis.code.features if analysis and not analysis.code.parse_error else []:
        if f in FEATURE_TECHNIQUE:
            used.setdefault(FEATURE_TECHNIQUE[f])
    families = tuple(task.families) if task is not None and task.families and task.family == family else ()
    if profile is not None and profile.diagnosis and profile.available:
        words = (words + " " if words else "") + profile.diagnosis
    q = Query(
        text="",
        lexical="",
        words=words,
        applied=tuple(used),
        inputs=inputs,
        task_name=task_name,
        family=family,
        families=families,
        dtype=dtype,
        regime=regime,
        bottleneck=bottleneck,
        bottleneck_from=bn_from,
        arch=arch_used,
        code=analysis.code if analysis else None,
        code_summary=analysis.summary if analysis else None,
        techniques=techniques,
        verdict=report.verdict if report else None,
        pct_sol=pct_sol,
        notes=tuple(notes),
        **_profile_facts(profile),
    )
    return _with_texts(q, task, report)


def _profile_facts(profile: ProfileReport | None) -> dict:
    """The profile's state, metrics and techniques, when it measured counters."""
    if profile is None or not profile.available:
        return {}
    return {
        "profile_state": profile.state,
        "profile_metrics": dict(profile.metrics),
        "profile_techniques": tuple(profile.techniques),
    }


def _words(text: str | None, notes: list[str]) -> str:
    if text is None:
        return ""
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, got {type(text).__name__}", hint="describe what you need in words")
    text = text.replace("\x00", " ").strip()
    if len(text) > MAX_TEXT_CHARS:
        notes.append(f"the text is {len(text)} characters; only its first {MAX_TEXT_CHARS} were used")
        text = text[:MAX_TEXT_CHARS]
    return text


_PCT = re.compile(
    r"(\d{1,3}(?:\.\d+)?)\s*%\s*of\s+(?:the\s+)?(?:peak|speed[- ]of[- ]light|sol\b|roofline|"
    r"(?:peak |copy |memory |dram )?bandwidth|cublas|cudnn|the library|torch)",
    re.I,
)


def _pct_from_words(words: str) -> float | None:
    """'at 95% of peak bandwidth' -> 95.0: how close the words say the kernel is to its floor."""
    m = _PCT.search(words)
    return float(m.group(1)) if m else None


def _arch(arch: str | None, report: BenchReport | None, notes: list[str]) -> str | None:
    if arch is not None and not isinstance(arch, str):
        raise InvalidInput(f"arch must be a string like 'sm_90', got {type(arch).__name__}")
    if arch and arch.strip():
        arch = arch.strip().lower()
        if arch_number(arch) is None and arch != "cpu":
            raise InvalidInput(f"unknown architecture {arch!r}", hint="use the form 'sm_90' (Hopper), 'sm_80' (Ampere)")
        return arch
    if report is not None and report.hardware.arch != "cpu":
        return report.hardware.arch
    return None


def _task_facts(task, report, words: str, source: str, notes: list[str]):
    if task is not None:
        return task.family, task.dtype, task.regime, task.name
    if report is not None:
        parts = report.task_signature.split(":")
        if len(parts) == 3:
            return parts[0], parts[1], parts[2], report.task
        notes.append(f"the report's task signature {report.task_signature!r} is not family:dtype:regime")
    family = first_match(FAMILY_WORDS, words) if words else None
    dtype = first_match(DTYPE_WORDS, words) if words else None
    if source and (family is None or dtype is None):
        head = _source_words(source)
        family = family or first_match(FAMILY_WORDS, head)
        dtype = dtype or first_match(DTYPE_WORDS, head)
    return family, dtype, None, report.task if report is not None else None


def _source_words(source: str) -> str:
    """The parts of a source that name what it computes: docstrings, comments,
    kernel and function names (not the whole body, whose words mislead)."""
    doc = re.findall(r'"""([\s\S]{0,600}?)"""', source[:4000])
    names = re.findall(r"def\s+(\w+)|__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)", source)
    flat = [n for pair in names for n in pair if n]
    return " ".join(doc[:2] + [n.replace("_", " ") for n in flat])


def _bottleneck(task, report, words, family, dtype, arch, notes) -> tuple[str | None, str | None]:
    if report is not None and report.roofline is not None and report.roofline.bound != "unknown":
        return report.roofline.bound, "report"
    if task is not None and task.bytes_moved > 0:
        if task.regime == "tiny":
            return "latency", "task"
        num = arch_number(arch) or _DEFAULT_ARCH
        bw, tc16, tf32, fp32 = _CEILINGS.get(num, _CEILINGS[_DEFAULT_ARCH])
        if set(family_lineage(task.family)) & _TENSOR_CORE_FAMILIES:
            rate = (
                tc16
                if task.dtype in ("fp16", "bf16", "mixed")
                else (2 * tc16 if task.dtype in ("fp8", "int8") else tf32)
            )
        else:
            rate = fp32
        intensity = task.flops / task.bytes_moved
        ridge = rate * 1e12 / (bw * 1e9)
        if arch is None:
            notes.append(f"bottleneck estimated for sm_{num} (no arch given)")
        return ("compute" if intensity >= ridge else "memory"), "task"
    found = first_match(BOTTLENECK_WORDS, words) if words else None
    return (found, "text") if found else (None, None)


def _with_texts(q: Query, task: TaskInfo | None, report: BenchReport | None) -> Query:
    head = " ".join(x for x in (q.dtype, q.family.replace("_", " ") if q.family else None, "kernel") if x)
    if q.bottleneck:
        head += f", {q.bottleneck}-bound"
    if q.arch:
        head += f" on {q.arch}"
    parts = [head + "."] if (q.family or q.bottleneck or q.dtype) else []
    if task is not None:
        parts.append(f"Task {task.name}: {task.description}".strip())
    if report is not None:
        parts.append(_report_line(report))
    if q.words:
        parts.append(q.words)
    if q.code_summary:
        parts.append("Code: " + q.code_summary + ".")
    text = " ".join(parts)[:EMBED_CHARS] or q.words[:EMBED_CHARS]
    lex = [
        q.words,
        task.name.replace("_", " ") + " " + task.description if task else "",
        q.family.replace("_", " ") if q.family else "",
        q.dtype or "",
        f"{q.bottleneck}-bound" if q.bottleneck else "",
        _report_line(report) if report else "",
        " ".join(q.techniques),
    ]
    if q.code:
        lex += [
            " ".join(q.code.identifiers),
            " ".join(f.replace("_", " ") for f in q.code.features),
            " ".join(k.replace("_", " ") for k in q.code.kernels),
        ]
    lexical = " ".join(x for x in lex if x)
    return replace(q, text=text, lexical=lexical)


def _report_line(r: BenchReport) -> str:
    bits = [f"benchmark of {r.task}: {r.verdict}"]
    if r.speedup_vs_eager is not None:
        bits.append(f"{r.speedup_vs_eager:.2f}x vs eager")
    if r.roofline is not None:
        if r.roofline.pct_sol is not None:
            bits.append(f"{r.roofline.pct_sol:.0f}% of speed of light")
        if r.roofline.bound != "unknown":
            bits.append(f"{r.roofline.bound}-bound")
    if r.error is not None:
        bits.append(f"{r.error.type}: {r.error.message[:200]}")
    failed = [c.name for c in (r.correctness.checks if r.correctness else []) if not c.passed]
    if failed:
        bits.append("failed checks: " + ", ".join(failed))
    return ", ".join(bits) + "."
