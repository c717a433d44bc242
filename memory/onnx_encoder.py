"""The embedding model run by ONNX Runtime: the same weights, a fraction of the CPU per text.

A sentence-transformers model of the plain kind (a BERT-style transformer, mean pooling, optional
normalization; the packaged all-MiniLM-L6-v2 is one) is exported once with ``torch.onnx`` into a
per-user cache (``SKILLBASE_MODEL_CACHE``, default ``~/.cache/skillbase/models``), keyed by the
model's files and the exporting torch's version, and checked against the torch model on probe
texts before it is kept (largest difference over the probes must stay under ``MAX_DIFF``; on this
machine it is about 1e-7). After that, a process embeds without importing torch, transformers or
sentence-transformers: the tokenizer is the model's own ``tokenizer.json`` through ``tokenizers``,
the forward is one ONNX Runtime call, which runs the whole graph outside the interpreter lock.

By default (``precision='int8'``) that export is then quantized once more: the weights of every
matrix product to int8, one scale per output column, the activations to 8 bits per call
(ONNX Runtime's dynamic quantization). It is kept only when its vectors stay within ``MIN_COS``
of the float export's on the probe texts. Because the activations' scale is taken over the whole
input of a call, a quantized model embeds one text per call: a text's vector never depends on what
else was in its batch (and on this machine one text a call is also the fastest). The vectors are
not the float model's, so they carry a name of their own (``embeddings.model_name``): a store indexed
with one never mixes in the other's.

Measured on this 2-core machine (one thread, lesson-sized texts, ``benchmarks/embed_bench.py``):
float 8.5 ms a text against 18.6 ms through sentence-transformers; int8 about 2.4x faster again.
A server that embeds the lessons its clients write spends that time on a core of its own instead of
holding the interpreter for every layer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import numpy as np

MAX_DIFF = 1e-4  # largest element difference from the torch model over the probes for the export to be kept
MIN_COS = 0.98  # smallest cosine between the quantized and the float export's vectors over the probes
QUANT = "int8 weights per output column, MatMul only, dynamic 8-bit activations"  # part of the file's name
OPSET = 17
# Work files of an export or a quantization (``<key>.<random>.tmp``, and the quantizer's folder
# ``<key>.<random>/``) are removed when it ends; a process killed meanwhile leaves them. One older than
# this is nobody's (making either file takes seconds) and is removed before the next one is made.
# ``<random>``: the 8 characters of ``tempfile``'s names.
LEFTOVER_AGE_S = 3600.0
_WORK_FILE = re.compile(r"^[0-9a-f]{24}\.(?:int8-[0-9a-f]{16}\.)?[a-z0-9_]{8}(?:\.tmp)?$")
PROBES = (
    "split-K on a GEMM whose K dwarfs M and N: the square tiles left most SMs idle",
    "Row softmax, one program per row; the row no longer fits in registers at 1.5 MiB.",
    "x",
    # longer than the model's own limit: the truncation must match
    " ".join(f"token{i} of a long lesson about vectorized loads and L2 reuse" for i in range(120)),
)


# One line each time a model is made for this user (an export, an int8 quantization): the command line
# shows these, since the first recall otherwise spends about 10 s silently. Once per user, as the cache is.
announce = logging.getLogger(__name__ + ".prepare")


def cache_dir() -> Path:
    """Where exported models are kept: SKILLBASE_MODEL_CACHE, else the user's cache directory."""
    env = os.environ.get("SKILLBASE_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "skillbase" / "models"


def sweep_leftovers(folder: Path, older_than_s: float = LEFTOVER_AGE_S) -> list[str]:
    """Remove the work files and folders that exports and quantizations killed midway left in the
    model cache ``folder`` (named as they name theirs, untouched for ``older_than_s``); returns their
    names. Finished models (``.onnx``) and anything named otherwise are never touched."""
    removed = []
    now = time.time()
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for p in entries:
        work_file = p.name.endswith(".tmp")
        if not _WORK_FILE.match(p.name) or work_file == p.is_dir():
            continue
        try:
            if now - p.lstat().st_mtime < older_than_s:
                continue
            if work_file:
                p.unlink()
            else:
                shutil.rmtree(p)
        except OSError:  # gone already (another process swept it), or not ours to remove
            continue
        removed.append(p.name)
    if removed:
        logging.getLogger(__name__).info(
            "removed %d leftover model work file(s) from %s: %s", len(removed), folder, ", ".join(removed)
        )
    return removed


def plain_model(model_dir: Path) -> tuple[bool, str]:
    """Whether ``model_dir`` is a sentence-transformers model this module can run: a transformer,
    then mean pooling, then at most a normalization, with a ``tokenizer.json``; and why not."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return False, f"modules {kinds}"
        pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens") or any(
            v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens"
        ):
            return False, "pooling other than the mean of the tokens"
        if not (model_dir / "tokenizer.json").is_file():
            return False, "no tokenizer.json"
    except (OSError, ValueError, KeyError, IndexError) as e:
        return False, f"unreadable model description ({e})"
    return True, ""


def model_key(model_dir: Path) -> str:
    """The export's name: the model's files by content, and torch's version (the exporter).

    By content, not by path or modification time, so that every virtual environment of a user
    shares one export of the same model (each venv's copy of the files has its own path and
    times; keyed by those, a newcomer's run made four 583 MB exports). Files up to 4 MiB are
    hashed whole; larger ones (the weights) by size and their first and last MiB, which tell
    releases apart without reading 90 MB on every start."""
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:  # a torch installed without package metadata
        torch_version = "unknown"
    h = hashlib.sha256(f"opset{OPSET}\x00{torch_version}\x00".encode())
    for p in sorted(model_dir.rglob("*")):
        if not p.is_file() or ".cache" in p.relative_to(model_dir).parts:
            continue
        size = p.stat().st_size
        h.update(f"{p.relative_to(model_dir).as_posix()}\x00{size}\x00".encode())
        with p.open("rb") as f:
            if size <= _WHOLE:
                h.update(f.read())
            else:
                h.update(f.read(_EDGE))
                f.seek(size - _EDGE)
                h.update(f.read(_EDGE))
    return h.hexdigest()[:24]


_WHOLE, _EDGE = 4 << 20, 1 << 20


class OnnxEncoder:
    """Mean-pooled, unit-length sentence embeddings from an exported model."""

    def __init__(self, path: Path, model_dir: Path, threads: int, one_at_a_time: bool = False, spin: bool = False):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        if not spin:
            # ONNX Runtime's pool threads spin between operators and after each run by default: a
            # server embedding one short text at a time kept its `threads` cores busy between calls
            # (one process of a 16-core host: 4 cores at 145 calls/s). Asleep, they cost nothing.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        cfg = model_dir / "sentence_bert_config.json"
        self.max_seq_length = int(json.loads(cfg.read_text()).get("max_seq_length", 512)) if cfg.is_file() else 512
        self.dim = int(json.loads((model_dir / "config.json").read_text())["hidden_size"])
        self.path = path
        # A quantized model scales its activations over the whole input: one text per call, so
        # a vector depends on its text alone (not on the batch's other texts or its padding).
        self.one_at_a_time = one_at_a_time
        self._lock = threading.Lock()  # the tokenizer's truncation setting is shared state

    def encode(self, texts: list[str], max_tokens: int | None = None, batch_size: int = 64) -> np.ndarray:
        limit = min(max_tokens, self.max_seq_length) if max_tokens else self.max_seq_length
        if self.one_at_a_time:
            batch_size = 1
        out = []
        for i in range(0, len(texts), batch_size):
            with self._lock:
                self.tokenizer.enable_truncation(max_length=limit)
                encs = self.tokenizer.encode_batch(texts[i : i + batch_size])
            n = max(len(e.ids) for e in encs)
            ids = np.zeros((len(encs), n), dtype=np.int64)
            mask = np.zeros((len(encs), n), dtype=np.int64)
            types = np.zeros((len(encs), n), dtype=np.int64)
            for j, e in enumerate(encs):
                ids[j, : len(e.ids)] = e.ids
                mask[j, : len(e.ids)] = e.attention_mask
                types[j, : len(e.ids)] = e.type_ids
            hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            out.append(pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12))
        return np.concatenate(out).astype(np.float32, copy=False)


def export(st: Any, path: Path) -> None:
    """Write the transformer of sentence-transformers model ``st`` to ``path`` as ONNX."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.body(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    body = st[0].auto_model.eval()
    sample = st.tokenizer([PROBES[0], PROBES[1]], padding=True, return_tensors="pt")
    args = tuple(sample[k].to("cpu") for k in ("input_ids", "attention_mask", "token_type_ids"))
    axes = {
        "input_ids": {0: "batch", 1: "tokens"},
        "attention_mask": {0: "batch", 1: "tokens"},
        "token_type_ids": {0: "batch", 1: "tokens"},
        "hidden": {0: "batch", 1: "tokens"},
    }
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Hidden(body),
            args,
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["hidden"],
            dynamic_axes=axes,
        )


def open_encoder(
    model_dir: Path, threads: int, load_st: Callable[[], Any], quantized: bool = False
) -> tuple[OnnxEncoder | None, str]:
    """An encoder for ``model_dir``, exporting (and checking) it on first use; (None, why) where the
    model is not of the plain kind, ONNX Runtime or the exporter is missing, or the export disagrees
    with the torch model. With ``quantized``, the int8 model made from that export (``quantize``)."""
    if quantized:
        path = quantized_path(cache_dir() / f"{model_key(model_dir)}.onnx")
        if path.is_file():  # made before: the float export is not opened at all
            try:
                return OnnxEncoder(path, model_dir, threads, one_at_a_time=True), f"ONNX Runtime, int8 ({path})"
            except Exception:  # a damaged file: made again below
                path.unlink(missing_ok=True)
    enc, note = _open_float(model_dir, threads, load_st)
    if enc is None or not quantized:
        return enc, note
    return _open_quantized(enc, model_dir, threads)


def _open_float(model_dir: Path, threads: int, load_st: Callable[[], Any]) -> tuple[OnnxEncoder | None, str]:
    ok, why = plain_model(model_dir)
    if not ok:
        return None, why
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as e:
        return None, f"{e.name} is not installed"
    path = cache_dir() / f"{model_key(model_dir)}.onnx"
    if path.is_file():
        try:
            return OnnxEncoder(path, model_dir, threads), f"ONNX Runtime ({path})"
        except Exception as e:  # a damaged file: export it again
            path.unlink(missing_ok=True)
            why = f"cached export unreadable ({type(e).__name__}); exported again"
    try:
        import onnx  # noqa: F401  (torch.onnx writes through it)
    except ImportError:
        return None, "onnx is not installed (needed once, to export the model)"
    announce.info(
        "preparing the embedding model for this user: exporting it to ONNX once (about 10 s; kept in %s)", path.parent
    )
    st = load_st()
    # Exported and checked under a name of its own; only a checked export takes the shared name
    # (atomically), so another process never opens one that is half written or wrong.
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_leftovers(path.parent)
    fd, name = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        try:
            export(st, tmp)
            enc = OnnxEncoder(tmp, model_dir, threads)
        except Exception as e:
            return None, f"export failed: {type(e).__name__}: {str(e)[:200]}"
        for max_tokens in (None, 16):
            got = enc.encode(list(PROBES), max_tokens)
            default = st.max_seq_length
            st.max_seq_length = min(max_tokens, default) if max_tokens else default
            try:
                want = st.encode(
                    list(PROBES), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
                )
            finally:
                st.max_seq_length = default
            diff = float(np.abs(got - want).max())
            if diff > MAX_DIFF:
                return None, f"the export differs from the torch model by {diff:.1e} (limit {MAX_DIFF:.0e})"
        os.replace(tmp, path)  # the session has read the file: it keeps working under the new name
        enc.path = path
    finally:
        tmp.unlink(missing_ok=True)
    return enc, f"ONNX Runtime ({path}, exported now{'; ' + why if why else ''})"


def quantized_path(float_path: Path) -> Path:
    """Where the int8 model made from the float export ``float_path`` is kept: named by that export
    and by the quantizer (ONNX Runtime's version and the recipe), so either changing makes a new one."""
    try:
        ort_version = metadata.version("onnxruntime")
    except metadata.PackageNotFoundError:
        ort_version = "unknown"
    h = hashlib.sha256(f"{float_path.stem}\x00{ort_version}\x00{QUANT}".encode()).hexdigest()[:16]
    return float_path.with_name(f"{float_path.stem}.int8-{h}.onnx")


class _NoPreprocessingAdvice(logging.Filter):
    """ONNX Runtime's quantizer logs advice to pre-process the model on the root logger, every time."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def quantize(float_path: Path, out: Path) -> None:
    """Write the int8 model of the float export ``float_path`` to ``out`` (see the module's text).

    The quantizer writes a shape-inferred copy of its input beside that input under a fixed name and
    deletes it when done, so two processes quantizing the shared export at once (two test workers,
    two servers starting on a fresh cache) would delete each other's copy. It is given a link to the
    export in a directory of its own instead."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    advice = _NoPreprocessingAdvice()
    logging.getLogger().addFilter(advice)
    try:
        with tempfile.TemporaryDirectory(prefix=float_path.stem + ".", dir=out.parent) as private:
            src = Path(private) / float_path.name
            try:
                os.link(float_path, src)
            except OSError:  # a file system without hard links
                shutil.copyfile(float_path, src)
            quantize_dynamic(
                str(src), str(out), per_channel=True, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"]
            )
    finally:
        logging.getLogger().removeFilter(advice)


def _open_quantized(float_enc: OnnxEncoder, model_dir: Path, threads: int) -> tuple[OnnxEncoder | None, str]:
    path = quantized_path(float_enc.path)
    # As the float export: made under a name of its own, checked, then renamed into place.
    sweep_leftovers(path.parent)
    fd, name = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        try:
            announce.info("preparing the embedding model for this user: quantizing it to int8 once (a few seconds)")
            quantize(float_enc.path, tmp)
            enc = OnnxEncoder(tmp, model_dir, threads, one_at_a_time=True)
        except Exception as e:
            return None, f"int8 quantization failed: {type(e).__name__}: {str(e)[:200]}"
        for max_tokens in (None, 16):
            got = enc.encode(list(PROBES), max_tokens)
            want = float_enc.encode(list(PROBES), max_tokens)
            cos = float((got * want).sum(axis=1).min())
            if cos < MIN_COS:
                return None, (
                    f"the int8 model's vectors are too far from the float model's (cosine {cos:.4f}, limit {MIN_COS})"
                )
        os.replace(tmp, path)
        enc.path = path
    finally:
        tmp.unlink(missing_ok=True)
    return enc, f"ONNX Runtime, int8 ({path}, quantized now)"
