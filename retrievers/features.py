"""Cheap static analysis of a candidate's source: which kernel features it has.

Triton sources are read with Python's ``ast`` (kernels are ``@triton.jit``
functions; loops, loads, stores, reductions and launches are found by walking
them); CUDA C++ strings handed to ``load_inline`` are read with regular
expressions. The result feeds both the query text and the skill gates, so it
must be quick (a few milliseconds) and must never raise on bad code: a source
that does not parse is analysed by regular expressions alone and the result
says so in ``parse_error``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from skillbase import pyast
from skillbase.models import CodeFeatures

# tl.* calls too common to say anything about a kernel.
_UBIQUITOUS = {"tl.program_id", "tl.arange", "tl.constexpr", "tl.cdiv", "tl.zeros", "tl.full", "tl.where"}
_REDUCTIONS = {
    "tl.sum",
    "tl.max",
    "tl.min",
    "tl.argmax",
    "tl.argmin",
    "tl.reduce",
    "tl.xor_sum",
    "tl.cumsum",
    "tl.cumprod",
    "tl.associative_scan",
}
_DESCRIPTORS = (
    "make_tensor_descriptor",
    "TensorDescriptor",
    "_experimental_descriptor",
    "make_tensor_desc",
    "tensor_descriptor",
)
_TORCH_COMPUTE = {
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "einsum",
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "softmax",
    "log_softmax",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "batch_norm",
    "cross_entropy",
    "nll_loss",
    "scaled_dot_product_attention",
    "max_pool2d",
    "avg_pool2d",
    "gelu",
    "relu",
    "silu",
    "sigmoid",
    "tanh",
    "sum",
    "mean",
    "amax",
    "cumsum",
    "var",
    "std",
}

# Regular expressions for CUDA C++ (and, when the Python does not parse, for
# Triton too): feature -> pattern.
_CUDA_PATTERNS: dict[str, str] = {
    "shared_memory": r"__shared__",
    "warp_shuffle": r"__shfl_\w*sync",
    "reduction": r"__shfl_\w*sync|__reduce_\w+_sync|BlockReduce|WarpReduce|\bblock_?reduce\b|\bwarp_?reduce\b",
    "async_copy": r"cp\.async|__pipeline_memcpy_async|memcpy_async|cp_async",
    "tma": r"cp\.async\.bulk\.tensor|cuTensorMapEncode|CUtensorMap|TensorDescriptor|make_tensor_descriptor",
    "tensor_cores": r"wmma::|mma\.sync|\bwgmma\b|mma_sync|__hmma|nvcuda::wmma",
    "atomics": r"\batomic(?:Add|Max|Min|CAS|Exch|Sub|And|Or|Inc|Dec)\w*\s*\(",
    "vectorized": r"\b(?:float4|int4|uint4|double2|longlong2)\b|reinterpret_cast<\s*(?:const\s+)?\w+4\s*\*",
    "cuda_graphs": r"cudaGraph\w*|CUDAGraph|torch\.cuda\.graph",
    "program_swizzle": r"\bGROUP_M\b|\bgroup_id\b|swizzle",
    "library_call": r"\bcublas\w+|\bcudnn\w+|at::matmul|torch::matmul|at::mm\b|at::bmm\b",
    "online_reduction": r"\*=?\s*__?expf?\s*\(\s*[\w.]+\s*-\s*[\w.]+\s*\)|welford",
}
_TRITON_FALLBACK: dict[str, str] = {
    "tl_dot": r"tl\.dot\(",
    "tensor_cores": r"tl\.dot\(",
    "masked_access": r"tl\.(?:load|store)\([^)]*\bmask\s*=",
    "reduction": r"tl\.(?:sum|max|min|argmax|argmin|reduce|cumsum|associative_scan)\(",
    "atomics": r"tl\.atomic_\w+\(",
    "vectorized": r"tl\.max_contiguous|tl\.multiple_of",
    "tma": r"make_tensor_descriptor|TensorDescriptor|_experimental_descriptor",
    "async_copy": r"make_tensor_descriptor|TensorDescriptor|_experimental_descriptor",
    "autotune": r"@triton\.autotune",
    "persistent": r"tl\.num_programs\(|NUM_SMS",
    "program_swizzle": r"\bGROUP_M\b|\bGROUP_SIZE_M\b|tl\.swizzle2d",
    "k_loop": r"for\s+\w+\s+in\s+(?:tl\.)?(?:static_)?range\(",
    "fp32_accumulate": r"dtype\s*=\s*tl\.float32|\.to\(tl\.float32\)",
    "cuda_graphs": r"torch\.cuda\.(?:CUDAGraph|graph)\b",
}
# Identifiers worth keeping as exact tokens for lexical search: exact words,
# and prefixes of words (atomicAdd, cudaGraphLaunch, cp.async.bulk.tensor).
_NOTABLE_WORDS = {
    "__shared__",
    "__syncthreads",
    "__ldg",
    "__ldcs",
    "__stcs",
    "__launch_bounds__",
    "wgmma",
    "mma.sync",
    "float4",
    "int4",
    "half2",
    "__nv_bfloat162",
    "__expf",
    "__fdividef",
    "exp2f",
    "num_stages",
    "num_warps",
    "eviction_policy",
    "cache_modifier",
    "NUM_SMS",
    "GROUP_M",
    "EVEN_K",
    "SPLIT_K",
    "triton.autotune",
    "triton.heuristics",
    "triton.Config",
    "TensorDescriptor",
    "load_inline",
}
_NOTABLE_PREFIXES = ("__shfl_", "cp.async", "wmma::", "atomic", "cudaGraph", "cublas", "cuTensorMapEncode")
_WORD = re.compile(r"[A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)*")
_CUDA_KERNEL = re.compile(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:void\s+)?(\w+)\s*\(")
_CUDA_FOR = re.compile(r"for\s*\(([^;]*);([^;]*);([^{\n]*)\)")
# Loop bounds that are compile-time constants (kTile, UNROLL, 32) make register
# loops, not loops over a reduction dimension.
_CONSTANT_BOUND = re.compile(r"\d+[uUlLfF]*|k[A-Z]\w*|[A-Z][A-Z0-9_]*")
MAX_ANALYZED_BYTES = 256_000


@dataclass
class SourceAnalysis:
    """What the static analysis found: the public ``CodeFeatures`` plus the
    counts that make the one-line summary of a kernel."""

    code: CodeFeatures
    loops: int = 0
    loads: int = 0
    stores: int = 0
    launches: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """One line such as ``triton kernels softmax_kernel: k_loop, masked_access,
        reduction; 3 loops, 3 loads, 1 store, 1 launch``."""
        c = self.code
        head = f"{c.language or 'python'} kernel{'s' if len(c.kernels) != 1 else ''}"
        if c.kernels:
            head += " " + ", ".join(c.kernels[:4]) + (", ..." if len(c.kernels) > 4 else "")
        feats = ", ".join(c.features) or "no kernel features recognized"
        counts = [
            f"{n} {w}{'s' if n != 1 else ''}"
            for n, w in ((self.loops, "loop"), (self.loads, "load"), (self.stores, "store"), (self.launches, "launch"))
            if n
        ]
        tail = "; " + ", ".join(counts) if counts else ""
        return f"{head}: {feats}{tail}"


def detect_language(source: str) -> str | None:
    """'triton', 'cuda' or None, from what the source imports and defines."""
    if re.search(r"load_inline|__global__|cpp_extension", source):
        return "cuda"
    if re.search(r"@triton\.jit|^\s*import triton|^\s*from triton", source, re.M):
        return "triton"
    return None


def code_features(source: str, *, max_bytes: int = MAX_ANALYZED_BYTES) -> CodeFeatures:
    """The ``CodeFeatures`` of a candidate source (see ``analyze_source``)."""
    return analyze_source(source, max_bytes=max_bytes).code


def analyze_source(source: str, *, max_bytes: int = MAX_ANALYZED_BYTES) -> SourceAnalysis:
    """Analyse a Triton or CUDA (load_inline) candidate without running it.

    Never raises on bad code: a source that is not a string, is empty, or does
    not parse as Python gives a degraded result with ``code.parse_error`` set
    (features then come from regular expressions). Sources over ``max_bytes``
    are analysed on their first ``max_bytes`` bytes, with a note.
    """
    if not isinstance(source, str):
        return SourceAnalysis(CodeFeatures(parse_error=f"the source is a {type(source).__name__}, not text"))
    notes: list[str] = []
    if len(source.encode("utf-8", "replace")) > max_bytes:
        source = source.encode("utf-8", "replace")[:max_bytes].decode("utf-8", "ignore")
        notes.append(f"the source is over {max_bytes} bytes; only its first {max_bytes} bytes were analysed")
    if not source.strip():
        return SourceAnalysis(CodeFeatures(parse_error="the source is empty"), notes=notes)
    language = detect_language(source)
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        where = f"line {e.lineno}: " if isinstance(e, SyntaxError) and e.lineno else ""
        msg = e.msg if isinstance(e, SyntaxError) else str(e) or type(e).__name__
        res = _regex_only(source, language)
        res.code.parse_error = f"the source does not parse as Python ({where}{msg}); features come from patterns only"
        res.notes = notes + res.notes
        return res
    res = _from_ast(tree, source, language)
    res.notes = notes + res.notes
    return res


# ---------------------------------------------------------------------------
# Python / Triton
# ---------------------------------------------------------------------------


def _dotted(node: ast.AST) -> str:
    """``tl.load`` for ``tl.load``, ``triton.language.load`` for the long form."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func))
    return ".".join(reversed(parts))


def _chain_root(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _tl(name: str) -> str:
    """Normalize ``triton.language.x`` and ``language.x`` to ``tl.x``."""
    for prefix in ("triton.language.", "language."):
        if name.startswith(prefix):
            return "tl." + name[len(prefix) :]
    return name


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(_dotted(d.func if isinstance(d, ast.Call) else d).split(".")[-1] == "jit" for d in fn.decorator_list)


class _Facts:
    """Mutable accumulator while walking the tree."""

    def __init__(self) -> None:
        self.features: set[str] = set()
        self.identifiers: list[str] = []
        self.loops = self.loads = self.stores = self.launches = 0
        self.launches_per_call = 0  # most launches on one path through a host function
        self.launched: set[str] = set()

    def ident(self, name: str) -> None:
        if name not in self.identifiers:
            self.identifiers.append(name)


def _from_ast(tree: ast.Module, source: str, language: str | None) -> SourceAnalysis:
    facts = _Facts()
    kernels = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _is_jit(n)]
    kernel_names = [k.name for k in kernels]
    for k in kernels:
        _kernel_facts(k, facts)
        for d in k.decorator_list:
            name = _dotted(d.func if isinstance(d, ast.Call) else d)
            if name.endswith("autotune"):
                facts.features.add("autotune")
                facts.ident("triton.autotune")
            elif name.endswith("heuristics"):
                facts.ident("triton.heuristics")
    kernel_nodes = {id(n) for k in kernels for n in ast.walk(k)}
    _host_facts(tree, kernel_nodes, set(kernel_names), facts)
    cuda_text = "\n".join(s for s in _strings(tree) if _looks_like_cuda(s))
    if cuda_text:
        language = "cuda"
        cuda_kernels = _cuda_facts(cuda_text, facts)
        kernel_names += [k for k in cuda_kernels if k not in kernel_names]
    elif language is None and kernels:
        language = "triton"
    for name in _notable(source):
        facts.ident(name)
    if facts.launches_per_call >= 2:
        facts.features.add("multi_kernel")
    if "tl_dot" in facts.features:
        facts.features.add("tensor_cores")
    code = CodeFeatures(
        language=language,
        features=_ordered(facts.features),
        kernels=kernel_names,
        identifiers=facts.identifiers[:64],
    )
    return SourceAnalysis(code, loops=facts.loops, loads=facts.loads, stores=facts.stores, launches=facts.launches)


def _kernel_facts(kernel: ast.FunctionDef, facts: _Facts) -> None:
    params = {a.arg for a in kernel.args.args}
    if params & {"GROUP_M", "GROUP_SIZE_M", "GROUP_SIZE"}:
        facts.features.add("program_swizzle")
    for node in ast.walk(kernel):
        if isinstance(node, ast.For):
            _loop_facts(node, facts)
        elif isinstance(node, ast.Call):
            _call_facts(node, facts)
        elif isinstance(node, ast.Name) and node.id in ("NUM_SMS", "num_programs"):
            facts.features.add("persistent")


def _call_facts(call: ast.Call, facts: _Facts) -> None:
    name = _tl(_dotted(call.func))
    kwargs = {k.arg for k in call.keywords if k.arg}
    if name.startswith("tl.") and name not in _UBIQUITOUS and not isinstance(_chain_root(call.func), ast.Call):
        facts.ident(name)
    if name in ("tl.load", "tl.store") or name.endswith("descriptor_load") or name.endswith("descriptor_store"):
        if name == "tl.load" or name.endswith("_load"):
            facts.loads += 1
        else:
            facts.stores += 1
        if (
            "mask" in kwargs
            or (name == "tl.store" and len(call.args) >= 3)
            or (name == "tl.load" and len(call.args) >= 2)
        ):
            facts.features.add("masked_access")
        if "boundary_check" in kwargs:
            facts.features.add("masked_access")
        for kw in ("eviction_policy", "cache_modifier"):
            if kw in kwargs:
                facts.ident(kw)
    elif (
        isinstance(call.func, ast.Attribute)
        and call.func.attr in ("load", "store")
        and "desc" in _dotted(call.func.value).lower()
    ):
        facts.features.update({"tma", "async_copy"})
        if call.func.attr == "load":
            facts.loads += 1
        else:
            facts.stores += 1
    if name in ("tl.dot", "tl.dot_scaled"):
        facts.features.update({"tl_dot", "tensor_cores"})
    elif name in _REDUCTIONS:
        facts.features.add("reduction")
    elif name.startswith("tl.atomic_"):
        facts.features.add("atomics")
    elif name in ("tl.max_contiguous", "tl.multiple_of"):
        facts.features.add("vectorized")
    elif name == "tl.num_programs":
        facts.features.add("persistent")
    elif name == "tl.swizzle2d":
        facts.features.add("program_swizzle")
    elif any(d in name for d in _DESCRIPTORS):
        facts.features.update({"tma", "async_copy"})
    if name in ("tl.zeros", "tl.full") and any(
        k.arg == "dtype" and _tl(_dotted(k.value)) == "tl.float32" for k in call.keywords
    ):
        facts.features.add("fp32_accumulate")
    if (
        isinstance(call.func, ast.Attribute)
        and call.func.attr == "to"
        and call.args
        and _tl(_dotted(call.args[0])) == "tl.float32"
    ):
        facts.features.add("fp32_accumulate")


def _loop_facts(loop: ast.For, facts: _Facts) -> None:
    facts.loops += 1
    nodes = list(ast.walk(loop))
    it = loop.iter
    range_args = it.args if isinstance(it, ast.Call) else []
    range_names = {
        _dotted(n) for a in range_args for n in ast.walk(a) if isinstance(n, ast.Name | ast.Attribute | ast.Call)
    }
    starts_at_pid = bool(range_args) and any(
        "program_id" in _dotted(n) for n in ast.walk(range_args[0]) if isinstance(n, ast.Call)
    )
    if starts_at_pid or any("num_programs" in n or "NUM_SMS" in n for n in range_names):
        facts.features.add("persistent")
        inner = [n for n in nodes if isinstance(n, ast.For) and n is not loop]
        if not any(_is_load(m) for n in inner for m in ast.walk(n)):
            return  # a loop over tiles, not over a reduction dimension
    if any(_is_load(n) for n in nodes):
        facts.features.add("k_loop")
    if _online_update(nodes):
        facts.features.add("online_reduction")


def _is_load(n: ast.AST) -> bool:
    if not isinstance(n, ast.Call):
        return False
    name = _tl(_dotted(n.func))
    return (
        name == "tl.load"
        or name.endswith("descriptor_load")
        or (isinstance(n.func, ast.Attribute) and n.func.attr == "load")
    )


def _online_update(nodes: list[ast.AST]) -> bool:
    """A running max whose change rescales a running sum (online softmax), or
    a running mean/M2 update (Welford)."""
    maxed = set()
    for n in nodes:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and _tl(_dotted(n.value.func)) == "tl.maximum":
            maxed.update(t.id for t in n.targets if isinstance(t, ast.Name))
    for n in nodes:
        if isinstance(n, ast.Call) and _tl(_dotted(n.func)) in ("tl.exp", "tl.exp2", "tl.math.exp", "tl.math.exp2"):
            for sub in ast.walk(n):
                if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Sub):
                    sides = {_dotted(sub.left), _dotted(sub.right)}
                    if sides & maxed and all(isinstance(s, (ast.Name, ast.Attribute)) for s in (sub.left, sub.right)):
                        return True
    names = {n.id.lower() for n in nodes if isinstance(n, ast.Name)}
    calls = {_dotted(n.func).lower() for n in nodes if isinstance(n, ast.Call)}
    if any("welford" in c for c in calls):
        return True
    return any("mean" in x for x in names) and any("m2" in x or "delta" in x for x in names)


def _host_facts(tree: ast.Module, kernel_nodes: set[int], kernel_names: set[str], facts: _Facts) -> None:
    for node in ast.walk(tree):
        if id(node) in kernel_nodes:
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _is_jit(node):
            facts.launches_per_call = max(facts.launches_per_call, _most_launches(node.body)[1])
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if isinstance(node.func, ast.Subscript):  # kernel[grid](...)
                facts.launches += 1
                facts.launched.add(_dotted(node.func.value))
                for k in node.keywords:
                    if k.arg in ("num_warps", "num_stages", "num_ctas"):
                        facts.ident(k.arg)
            elif name.split(".")[-1] in ("CUDAGraph", "graph", "make_graphed_callables") and "cuda" in name:
                facts.features.add("cuda_graphs")
            elif name.endswith("Config"):
                for k in node.keywords:
                    if k.arg in ("num_warps", "num_stages"):
                        facts.ident(k.arg)
            elif _is_torch_compute(name):
                facts.features.add("library_call")
            elif "TensorDescriptor" in name or "tensor_descriptor" in name:
                facts.features.update({"tma", "async_copy"})
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            facts.features.add("library_call")


def _launch_sites(node: ast.AST) -> int:
    return sum(1 for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript))


def _most_launches(stmts: list[ast.stmt]) -> tuple[int | None, int]:
    """Most kernel launches along one path through ``stmts``: (on paths that
    fall through, None when none does; over every path). Launches in
    exclusive if/else branches or after an early return do not add up; a
    launch inside a loop counts twice (it runs many times)."""
    cont: int | None = 0
    best = 0
    for st in stmts:
        if cont is None:
            break
        if isinstance(st, ast.If):
            branches = [_most_launches(st.body), _most_launches(st.orelse)]
            best = max(best, *(cont + b for _, b in branches))
            falls = [c for c, _ in branches if c is not None]
            cont = cont + max(falls) if falls else None
        elif isinstance(st, ast.For | ast.While | ast.AsyncFor):
            c, b = _most_launches(st.body)
            cont += 2 * max(c or 0, b)
        elif isinstance(st, ast.With | ast.AsyncWith | ast.Try):
            c, b = _most_launches(st.body)
            best = max(best, cont + b)
            cont = cont + c if c is not None else None
        elif isinstance(st, ast.Return | ast.Raise):
            cont += _launch_sites(st)
            best = max(best, cont)
            cont = None
        elif not isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            cont += _launch_sites(st)
        if cont is not None:
            best = max(best, cont)
    return cont, best


def _is_torch_compute(name: str) -> bool:
    parts = name.split(".")
    if len(parts) < 2 or parts[-1] not in _TORCH_COMPUTE:
        return False
    return parts[0] in ("torch", "F", "nn", "functional") or ".functional." in name


def _strings(tree: ast.Module) -> list[str]:
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) > 40
    ]


def _looks_like_cuda(text: str) -> bool:
    return "__global__" in text or ("#include" in text and "{" in text) or "<<<" in text


# ---------------------------------------------------------------------------
# CUDA C++ and the regex fallback
# ---------------------------------------------------------------------------


def _cuda_facts(text: str, facts: _Facts) -> list[str]:
    for feat, pattern in _CUDA_PATTERNS.items():
        if re.search(pattern, text):
            facts.features.add(feat)
    for init, cond, step in _CUDA_FOR.findall(text):
        facts.loops += 1
        if "gridDim" in step or "gridDim" in cond:
            facts.features.add("persistent")
            continue
        bound = re.search(r"<=?\s*([\w.>-]+)", cond)
        if bound and not _CONSTANT_BOUND.fullmatch(bound.group(1)):
            facts.features.add("k_loop")
    if re.search(r"\bif\s*\([^)]*<\s*\w+", text) or "?" in text and re.search(r"<\s*n\w*\s*\?", text):
        facts.features.add("masked_access")
    if re.search(r"\b(?:half|__half|__nv_bfloat16|at::Half|at::BFloat16)\b", text) and re.search(
        r"\bfloat\s+(?:acc|sum|s|total|partial)\w*\b", text
    ):
        facts.features.add("fp32_accumulate")
    facts.loads += len(re.findall(r"__ldg|__ldcs|\bx\[|\bin\[", text))
    sites = list(re.finditer(r"(\w+)(?:<[^<>]*>)?\s*<<<", text))
    facts.launches += len(sites)
    facts.launched.update(m.group(1) for m in sites)
    # Launches separated by an `else` are alternatives, not a sequence.
    together = 1 if sites else 0
    for a, b in zip(sites, sites[1:]):
        together = together + 1 if not re.search(r"\belse\b|\breturn\b", text[a.end() : b.start()]) else together
    facts.launches_per_call = max(facts.launches_per_call, together)
    return list(dict.fromkeys(_CUDA_KERNEL.findall(text)))


def _regex_only(source: str, language: str | None) -> SourceAnalysis:
    facts = _Facts()
    for feat, pattern in _TRITON_FALLBACK.items():
        if re.search(pattern, source, re.S):
            facts.features.add(feat)
    kernels = re.findall(r"@triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)", source)
    facts.launches = len(re.findall(r"\w+\[[^\]\n]+\]\s*\(", source))
    if _looks_like_cuda(source):
        kernels += [k for k in _cuda_facts(source, facts) if k not in kernels]
    for m in re.finditer(r"\btl\.\w+", source):
        if m.group(0) not in _UBIQUITOUS:
            facts.ident(m.group(0))
    for name in _notable(source):
        facts.ident(name)
    facts.loads += len(re.findall(r"tl\.load\(", source))
    facts.stores += len(re.findall(r"tl\.store\(", source))
    if facts.launches >= 2 or facts.launches_per_call >= 2:
        facts.features.add("multi_kernel")
    code = CodeFeatures(
        language=language, features=_ordered(facts.features), kernels=kernels, identifiers=facts.identifiers[:64]
    )
    return SourceAnalysis(
        code, loops=len(re.findall(r"\bfor\b", source)), loads=facts.loads, stores=facts.stores, launches=facts.launches
    )


def _notable(source: str) -> list[str]:
    """Notable API names in the source, in order of first use."""
    out: dict[str, None] = {}
    for w in _WORD.findall(source):
        if w in _NOTABLE_WORDS or (
            w.startswith(_NOTABLE_PREFIXES) and (not w.startswith("atomic") or w[6:7].isupper())
        ):
            out.setdefault(w, None)
    return list(out)


def _ordered(features: set[str]) -> list[str]:
    from skillbase.models import CODE_FEATURES

    return [f for f in CODE_FEATURES if f in features]
