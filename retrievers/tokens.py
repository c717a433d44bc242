"""Words for lexical search, and what a query's words say about the kernel.

The tokenizer keeps GPU identifiers whole (``tl.dot``, ``cp.async``,
``num_stages``, ``__shfl_xor_sync``, ``split-k``) and also emits their parts,
so a query for ``tl.dot`` matches the exact identifier strongly and a query for
"dot product" still matches its part. Plain words are lowercased, stripped of a
few English suffixes and of stopwords.

The keyword tables map free text to a kernel family, a dtype and a bottleneck
("my layernorm is memory-bound in bf16" -> norm, bf16, memory).
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::|-)[A-Za-z0-9_]+)*|\d+(?:\.\d+)?[a-z]*")
_STOP = frozenset(
    "a an and are as at be been but by can could did do does for from had has have how i if in into is it its "
    "me my no not of on or our should so than that the their then there these this those to too up us was "
    "we were what when where which while who why will with would you your after before what's it's also only "
    "very more most some any all each other such via per just get got use used using make made".split()
)
_SUFFIXES = ("ings", "ing", "ies", "es", "ed", "s")


def _stem(word: str) -> str:
    """A light suffix stripper: 'tiles' -> 'tile', 'reductions' -> 'reduction'."""
    if len(word) <= 4 or not word.isalpha():
        return word
    for suf in _SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= 3:
            if suf == "ies":
                return word[:-3] + "y"
            if suf == "es" and not word[:-2].endswith(("ss", "sh", "ch", "x", "z")):
                return word[:-1]
            return word[: -len(suf)]
    return word


def tokenize(text: str) -> list[str]:
    """Lexical tokens of ``text``: identifiers whole (lowercased) plus their
    parts, words stemmed, stopwords and one-character words dropped."""
    out: list[str] = []
    for m in _TOKEN.finditer(text):
        raw = m.group(0)
        word = raw.lower().strip("_") if not raw.startswith("__") else raw.lower()
        compound = any(sep in raw for sep in (".", "::", "-")) or raw.count("_") > 0
        if compound:
            if len(word) > 1:
                out.append(word)
            for part in re.split(r"\.|::|-|_+", raw.lower()):
                if len(part) > 1 and part not in _STOP:
                    out.append(_stem(part))
        elif len(word) > 1 and word not in _STOP:
            out.append(_stem(word))
    return out


# ---------------------------------------------------------------------------
# What free text says
# ---------------------------------------------------------------------------

# First match wins, so the more specific patterns come first.
FAMILY_WORDS: tuple[tuple[str, str], ...] = (
    (
        "matmul_epilogue",
        r"(?:matmul|gemm|linear|matrix multipl\w*|mm)\b[^.\n]{0,40}\b(?:bias|gelu|relu|silu|epilogue|activation|residual)"
        r"|\bepilogue\b|fused linear|linear \+ \w+",
    ),
    ("attention", r"\battention\b|\bsdpa\b|flash[- ]?attn|flash[- ]?attention|\bq ?k\^?t\b|causal mask"),
    ("loss", r"cross[- _]?entropy|\bnll\b|\bloss\b|logsumexp over (?:the )?vocab"),
    ("conv", r"\bconv\w*|convolution"),
    ("pooling", r"\bpool\w*|max[- _]?pool|avg[- _]?pool"),
    ("norm", r"layer[- _]?norm|rms[- _]?norm|group[- _]?norm|batch[- _]?norm|instance[- _]?norm|normali[sz]ation"),
    ("softmax", r"softmax"),
    ("layout", r"transpos\w*|permut\w*|\blayout\b|nchw|nhwc"),
    ("scan", r"cumsum|cumprod|prefix[- ]sum|\bscan\b"),
    (
        "matmul",
        r"\bmatmul\b|\bgemm\b|\bbmm\b|matrix[- ]multipl\w*|matrix product|split[- ]k\b|\bmma\b|\bwgmma\b|tensor cores?",
    ),
    (
        "reduction",
        r"\breduction\b|\breduce\b|\bsum over\b|\bsum of\b|row[- ]?sum|\bargmax\b|\bmean over\b|\bsum reduction\b",
    ),
    (
        "fused_elementwise",
        r"fus\w* (?:elementwise|pointwise|activation)|elementwise chain|bias[- ]gelu|gelu[- ]residual",
    ),
    ("elementwise", r"\brelu\b|\bgelu\b|\bsilu\b|\bsigmoid\b|elementwise|pointwise|activation"),
)
DTYPE_WORDS: tuple[tuple[str, str], ...] = (
    ("fp8", r"\bfp8\b|e4m3|e5m2|float8"),
    ("int8", r"\bint8\b|\bi8\b"),
    ("bf16", r"\bbf16\b|bfloat16"),
    ("fp16", r"\bfp16\b|float16|\bhalf\b"),
    ("fp32", r"\bfp32\b|float32|\bsingle precision\b"),
)
BOTTLENECK_WORDS: tuple[tuple[str, str], ...] = (
    ("launch", r"launch[- ](?:overhead|bound)|many (?:small|tiny) (?:kernels|launches)|kernel launches dominate"),
    ("memory", r"memory[- ]bound|bandwidth[- ]bound|\bbandwidth\b|\bdram\b|\bhbm\b|gb/s|\bbytes\b"),
    ("compute", r"compute[- ]bound|math[- ]bound|tflop|\bflops?\b|arithmetic[- ]bound"),
    ("latency", r"latency[- ]bound|\boccupancy\b|\bstall\w*|too few (?:blocks|programs|ctas)|tail wave|idle sms?"),
)


def first_match(table: tuple[tuple[str, str], ...], text: str) -> str | None:
    """The label of the first pattern of ``table`` found in ``text`` (case-insensitive)."""
    for label, pattern in table:
        if re.search(pattern, text, re.I):
            return label
    return None
