"""Recall on tasks understood from their traced forward: a plain PyTorch file with no META reaches the
lessons of its kind, families gate skills through their broader families, and a store re-derives the
class of tasks recorded before they were understood."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from retriever_factories import skill, task_info
from skillbase.config import Settings
from skillbase.retrievers.gate import DEMOTE_FAMILY, DEMOTE_PART, gate
from skillbase.retrievers.query import build_query, family_affinity

SOFTMAX_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over each row of a batch of feature vectors."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 4096
dim = 65536


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
'''


@pytest.fixture(scope="module")
def toolchain(tmp_path_factory):
    from skillbase.toolchain import Toolchain

    with Toolchain(Settings.from_env(env={}, home=tmp_path_factory.mktemp("tc") / "home")) as tc:
        yield tc


@pytest.fixture(scope="module")
def softmax_task(tmp_path_factory, toolchain):
    path = tmp_path_factory.mktemp("kb") / "23_softmax_like.py"
    path.write_text(SOFTMAX_TASK)
    return toolchain.load_task(str(path))


def test_a_plain_softmax_file_is_understood(softmax_task):
    assert softmax_task.family == "softmax" and softmax_task.signature == "softmax:fp32:medium"
    assert softmax_task.understanding.regime == "memory" and softmax_task.flops == 5 * 4096 * 65536


def test_a_plain_softmax_file_reaches_the_softmax_lessons(seed_retriever, softmax_task):
    res = seed_retriever.recall(task=softmax_task, k=5)
    top3 = [t for item in res.items[:3] for t in item.techniques]
    assert "online-softmax" in top3, [(i.id, i.techniques) for i in res.items]
    assert any(i.kind == "experience" and "online-softmax" in i.techniques for i in res.items)
    assert res.family == "softmax"
    suggested = {s.technique for s in seed_retriever.suggest(task=softmax_task, attempts=[])}
    assert suggested and not suggested & {"im2col", "flash-attention", "split-k", "stream-k", "tensor-cores",
                                          "causal-block-skipping", "smem-transpose"}, suggested


def understood(name: str, family: str, families: list[str]):
    return task_info(name, family).model_copy(update={"families": families})


def test_a_family_matches_skills_written_for_its_broader_family():
    q = build_query(task=understood("kb_convt", "conv_transpose", ["conv_transpose", "conv"]))
    g = gate(skill("implicit-gemm", ["im2col"], families=["conv"]), q)
    assert g.verdict == "pass" and g.specific and "family conv (this is conv_transpose)" in g.matched


def test_a_part_of_the_task_softens_the_family_gate():
    q = build_query(task=understood("kb_conv_gn", "conv_epilogue",
                                    ["conv_epilogue", "conv", "matmul_epilogue", "conv_transpose", "norm",
                                     "group_norm", "elementwise"]))
    assert q.parts == ("conv_transpose", "norm", "group_norm") or q.parts == ("norm", "group_norm")
    welford = gate(skill("welford", ["welford"], families=["norm", "reduction"]), q)
    assert welford.verdict == "demote" and welford.factor == pytest.approx(DEMOTE_PART)
    assert "one part of this conv_epilogue task" in welford.reasons[0]
    epilogue = gate(skill("fuse-epilogue", ["epilogue-fusion"], families=["matmul_epilogue"]), q)
    assert epilogue.verdict == "pass"  # a convolution's epilogue fuses like a GEMM's
    softmax = gate(skill("online", ["online-softmax"], families=["softmax"]), q)
    assert softmax.factor == pytest.approx(DEMOTE_FAMILY)


def test_family_affinity_knows_the_family_tree():
    assert family_affinity("conv_transpose", "conv") == 0.5
    assert family_affinity("conv_transpose", "depthwise_conv") == 0.5
    assert family_affinity("gemv", "matmul") == 0.5
    assert family_affinity("gemv", "softmax") == 0.0
    assert family_affinity("matmul", "matmul_epilogue") == 0.5  # as before


def test_the_graph_holds_the_family_tree_and_a_task_s_other_families(tmp_path, embedder, softmax_task):
    from retriever_factories import lineage

    from skillbase.memory.store import Store

    store = Store.open(Settings.from_env(env={}, home=tmp_path / "home"), embedder=embedder)
    try:
        convt = understood("kb_convt_gn", "conv_epilogue", ["conv_epilogue", "conv", "conv_transpose", "norm",
                                                            "group_norm"])
        store.record_task(convt)
        store.record_attempts(lineage(convt, [(["epilogue-fusion"], 0.5, "correct")]))
        g = store.graph.g
        assert g.has_edge("family:conv_epilogue", "family:conv", "sub-family-of")
        assert g.has_edge("family:conv_epilogue", "family:matmul_epilogue", "sub-family-of")
        assert g.has_edge("task:kb_convt_gn", "family:group_norm", "has-family")
        assert g.edges["task:kb_convt_gn", "family:conv_transpose", "has-family"]["rank"] == 2
        assert g.has_edge("family:group_norm", "family:norm", "sub-family-of")
    finally:
        store.close()


def test_reindex_rederives_tasks_recorded_before_they_were_understood(tmp_path):
    from skillbase.api import SkillBase
    from skillbase.models import Attempt, content_hash

    path = tmp_path / "my_softmax.py"
    path.write_text(SOFTMAX_TASK)
    with SkillBase(home=tmp_path / "home") as sb:
        info = sb.task(str(path))
        old = info.model_copy(update={"family": "other", "families": [], "understanding": None})
        assert old.signature == "other:fp32:medium"
        sb.memory.record_task(old)
        src = "# a candidate\n"
        sb.memory.record_attempt(Attempt(task=old.name, task_signature=old.signature, family="other", dtype="fp32",
                                         source=src, source_hash=content_hash(src), verdict="correct"))
        assert sb.memory.list_attempts(task=old.name)[0].family == "other"
        changed = sb.rederive_tasks()
        assert changed == [{"task": "my_softmax", "from": "other:fp32:medium", "to": "softmax:fp32:medium",
                            "records": 1}]
        sb.reindex()
        a = sb.memory.list_attempts(task=old.name)[0]
        assert (a.family, a.task_signature) == ("softmax", "softmax:fp32:medium")
        assert sb.memory.get_task(old.name).info.families == ["softmax"]
        assert "task:my_softmax" in sb.memory.graph.g and sb.memory.graph.g.has_edge(
            "task:my_softmax", "class:softmax:fp32:medium", "instance-of")
        assert sb.rederive_tasks() == []  # nothing left to move
        assert Path(sb.memory.get_task(old.name).info.path) == path.resolve()
