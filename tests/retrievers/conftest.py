"""Fixtures for the retriever tests: one embedding model and one store built
from the seeds (skills and measured experiences) per session, plus small
constructed stores whose right answers are known."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillbase.config import Settings


@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2, loaded once for the whole session."""
    from skillbase.memory.embeddings import Embedder

    e = Embedder()
    e.embed(["warm up"])
    return e


def open_store(home: Path, embedder):
    from skillbase.memory.store import Store

    return Store.open(Settings.from_env(env={}, home=home), embedder=embedder)


@pytest.fixture(scope="session")
def seed_store(tmp_path_factory, embedder):
    """A store holding the seed playbook, the technique vocabulary and the
    seeded measured experiences (what `skillbase init` writes)."""
    from skillbase import seeds
    from skillbase.skills import seed_skills

    store = open_store(tmp_path_factory.mktemp("seed-store") / "home", embedder)
    store.import_jsonl(seeds.EXPERIENCES_FILE)
    seed_skills(store, seeds.SKILLS_DIR)
    yield store
    store.close()


@pytest.fixture(scope="session")
def seed_retriever(seed_store):
    from skillbase.retrievers import Retriever

    r = Retriever(seed_store, seed_store.settings)
    yield r
    r.close()


@pytest.fixture(scope="session")
def tasks():
    """The built-in tasks, described without a GPU (meta-device trace)."""
    import tempfile

    from skillbase.toolchain import Toolchain

    with Toolchain(Settings.from_env(env={}, home=Path(tempfile.mkdtemp(prefix="sb-rt-tc-")))) as tc:
        return {t.name: t for t in tc.list_tasks()}


@pytest.fixture(scope="session")
def world(tmp_path_factory, embedder):
    """A constructed store whose right answers are known: skills scoped to
    families, and measured lineages where convolution, transpose and
    attention techniques pay hugely while softmax techniques pay modestly."""
    from retriever_factories import lesson, lineage, skill, task_info

    store = open_store(tmp_path_factory.mktemp("world") / "home", embedder)
    for s in (
        skill("online-softmax-rows", ["online-softmax"], families=["softmax", "loss"], bottlenecks=["memory"]),
        skill("row-per-program", ["one-pass-row-reduction", "num-warps-tuning"], families=["softmax", "norm"]),
        skill("implicit-gemm", ["im2col", "tensor-cores"], families=["conv"]),
        skill("flash-tiles", ["flash-attention", "online-softmax", "tensor-cores"], families=["attention"]),
        skill("transpose-tiles", ["layout-change"], families=["layout"]),
        skill("tune-blocks", ["block-size-tuning"]),
    ):
        store.put_skill(s, author="test", reason="constructed world")
    attempts = []
    for name in ("conv_a", "conv_b"):
        attempts += lineage(task_info(name, "conv", "fp16"), [(["im2col", "tensor-cores"], 0.1, "correct")])
    attempts += lineage(task_info("transpose_a", "layout"), [(["layout-change"], 0.125, "correct")])
    attempts += lineage(task_info("attn_a", "attention", "fp16"), [(["flash-attention"], 0.2, "correct")])
    attempts += lineage(task_info("softmax_a", "softmax"), [(["online-softmax"], 0.714, "correct"),
                                                           (["block-size-tuning"], 0.8, "correct")])
    attempts += lineage(task_info("softmax_b", "softmax"), [(["online-softmax"], 0.77, "correct"),
                                                           (["one-pass-row-reduction"], 0.7, "correct")])
    store.record_attempts(attempts)
    store.record_experiences([
        lesson("exp_w_online", "Online softmax: one read of each row with a running max and rescaled sum.",
               techniques=["online-softmax"], family="softmax", gain=1.4, task="softmax_a",
               signature="softmax:fp32:large"),
        lesson("exp_w_im2col", "Implicit GEMM turned the direct convolution into tensor-core tiles.",
               techniques=["im2col", "tensor-cores"], family="conv", gain=10.0, task="conv_a",
               signature="conv:fp16:large"),
    ])
    yield store
    store.close()


@pytest.fixture(scope="session")
def world_retriever(world):
    from skillbase.retrievers import Retriever

    r = Retriever(world, world.settings)
    yield r
    r.close()
