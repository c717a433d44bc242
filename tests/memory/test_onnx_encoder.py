"""The embedding model under ONNX Runtime: the torch model's vectors, exported once, checked, reused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from skillbase.errors import ConfigError, StoreError
from skillbase.memory.embeddings import Embedder, default_model_path
from skillbase.memory.onnx_encoder import model_key, plain_model

TEXTS = [
    "split-K on a GEMM whose K dwarfs M and N",
    "",
    "x",
    "Row softmax at 1.5 MiB a row: one program per row reads it twice; split it over twelve programs.",
    " ".join(f"word{i} and vectorized loads" for i in range(300)),  # past the model's 256-token limit
]


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory, monkeypatch_module):
    path = tmp_path_factory.mktemp("models")
    monkeypatch_module.setenv("SKILLBASE_MODEL_CACHE", str(path))
    return path


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_onnx_vectors_are_the_torch_models(model_cache):
    onnx, torch_ = Embedder(backend="onnx"), Embedder(backend="torch")
    for max_tokens in (None, 8, 64):
        a = onnx.embed(TEXTS, max_tokens=max_tokens)
        b = torch_.embed(TEXTS, max_tokens=max_tokens)
        assert a.shape == b.shape == (len(TEXTS), 384)
        assert float(np.abs(a - b).max()) < 1e-5
        assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert onnx.runtime.startswith("ONNX Runtime") and "exported now" in onnx.runtime
    assert torch_.runtime.startswith("torch") and onnx.dim == 384
    # one export, named by the model's files and torch's version
    assert [p.name for p in model_cache.glob("*.onnx")] == [f"{model_key(default_model_path())}.onnx"]


def test_a_second_process_reuses_the_export_without_torch(model_cache):
    # The export is reused: the child embeds without importing torch, transformers or
    # sentence-transformers, and gets the same vector as this process.
    Embedder(backend="onnx").embed(["make sure the export exists"])
    code = (
        "import sys, json\n"
        "from skillbase.memory.embeddings import Embedder\n"
        "e = Embedder()\n"
        f"v = e.embed([{TEXTS[3]!r}])[0]\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules)\n"
        "print(json.dumps({'v': v.tolist(), 'runtime': e.runtime, 'heavy': heavy}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["runtime"].startswith("ONNX Runtime") and "exported now" not in got["runtime"]
    assert got["heavy"] == []
    want = Embedder(backend="torch").embed([TEXTS[3]])[0]
    assert float(np.abs(np.array(got["v"], dtype=np.float32) - want).max()) < 1e-5


def test_a_damaged_export_is_made_again(model_cache):
    Embedder(backend="onnx").embed(["make sure the export exists"])
    path = next(model_cache.glob("*.onnx"))
    path.write_bytes(b"not a model")
    e = Embedder(backend="onnx")
    v = e.embed(["a damaged export is made again"])
    assert "exported again" in e.runtime and path.stat().st_size > 1_000_000
    assert float(np.abs(v - Embedder(backend="torch").embed(["a damaged export is made again"])).max()) < 1e-5


def test_a_model_of_another_kind_stays_on_torch(tmp_path, model_cache):
    model = tmp_path / "cls-pooled"
    shutil.copytree(default_model_path(), model)
    pooling = model / "1_Pooling" / "config.json"
    cfg = json.loads(pooling.read_text())
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(cfg))
    assert plain_model(model) == (False, "pooling other than the mean of the tokens")
    auto = Embedder(str(model))
    auto.embed(["pooled by the first token"])
    assert auto.runtime.startswith("torch") and "pooling other than the mean" in auto.runtime
    with pytest.raises(StoreError, match="pooling other than the mean"):
        Embedder(str(model), backend="onnx").embed(["insisting on ONNX Runtime"])
    assert not list(model_cache.glob(f"{model_key(model)}*"))


def test_the_backend_is_a_setting():
    from skillbase.config import Settings

    assert Settings.from_env(env={}).embedding_backend == "auto"
    assert Settings.from_env(env={"SKILLBASE_EMBEDDING_BACKEND": "torch"}).embedding_backend == "torch"
    with pytest.raises(ConfigError):
        Settings.from_env(env={"SKILLBASE_EMBEDDING_BACKEND": "tensorrt"})
    with pytest.raises(ConfigError, match="unknown embedding backend"):
        Embedder(backend="tensorrt")
