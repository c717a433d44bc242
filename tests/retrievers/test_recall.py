"""Recall over the seed store (each mode on clear cases, hybrid's contract,
gating, bad input) and over the constructed world (feedback, attempts)."""

from __future__ import annotations

import pytest

from retriever_factories import task_info
from skillbase.errors import InvalidInput, NotFound
from skillbase.models import Feedback

OTHER_FAMILIES = {"im2col", "tensor-cores", "flash-attention", "layout-change"}


def _ids(result, kind=None):
    return [i.id for i in result.items if kind is None or i.kind == kind]


def test_vector_mode_finds_a_skill_by_meaning(seed_retriever):
    r = seed_retriever.recall(text="keep a running maximum and a rescaled running sum so each row is read once",
                              mode="vector", kinds=("skill",))
    assert "online-softmax-one-pass" in _ids(r)[:3]
    assert all(set(i.parts) == {"vector"} for i in r.items)


@pytest.mark.parametrize("ident, skill", [
    ("__shfl_xor_sync", "block-and-warp-reductions"),
    ("evict_first", "eviction-hints-for-streaming"),
    ("cp.async", "hopper-tma-bulk-copies"),
])
def test_lexical_mode_finds_exact_identifiers(seed_retriever, ident, skill):
    r = seed_retriever.recall(text=f"where is {ident} used", mode="lexical", kinds=("skill",), k=3)
    assert skill in _ids(r), _ids(r)


def test_graph_mode_ranks_by_what_fits_the_task_class(seed_retriever):
    r = seed_retriever.recall(task=task_info("row_softmax", "softmax", regime="medium"), arch="sm_90", mode="graph", k=8)
    skills = [i for i in r.items if i.kind == "skill"]
    assert skills and r.family == "softmax" and r.bottleneck == "memory"
    assert {"online-softmax-one-pass", "row-per-program-reductions", "looped-softmax-for-wide-rows"} & {
        i.id for i in skills[:4]}
    assert not {"implicit-gemm-convolution", "flash-attention-tiling", "tensor-cores-tl-dot-fp32-accumulate"} & {
        i.id for i in skills}


def test_hybrid_items_are_diverse_and_explained(seed_retriever):
    r = seed_retriever.recall(text="my layernorm reads every row three times", k=5)
    assert len(r.items) == 5 and r.latency_ms > 0
    firsts = [tuple(i.techniques) for i in r.items if i.kind == "skill"]
    assert len(firsts) == len(set(firsts))  # no two skills teaching the same thing
    for item in r.items:
        assert item.why and item.parts.get("rrf", 0) > 0 and "diversity" in item.parts
        assert item.score == pytest.approx(item.score)  # a real number
        if item.kind == "skill":
            assert "gate" in item.parts
        else:
            assert item.evidence and item.evidence[0].experience_id == item.id


def test_hybrid_recall_of_a_task_brings_suggestions_that_fit(seed_store, seed_retriever):
    info = task_info("softmax_kb", "softmax")
    r = seed_retriever.recall(task=info, arch="sm_90")
    assert r.suggestions and all(s.why for s in r.suggestions)
    assert not OTHER_FAMILIES & {s.technique for s in r.suggestions}


def test_seeded_softmax_suggestions_fit_a_row_softmax(seed_store, seed_retriever):
    # The facade's path: attempts of the task from the store, several seeds.
    info = task_info("softmax_kb", "softmax")
    attempts = seed_store.list_attempts(task="softmax_kb", limit=500)
    seen = set()
    for seed in range(20):
        seen |= {s.technique for s in seed_retriever.suggest(task=info, attempts=attempts, k=3, seed=seed)}
    assert seen and not OTHER_FAMILIES & seen, seen


def test_gate_removes_skills_the_gpu_cannot_run_and_says_why(seed_retriever):
    text = "Hopper TMA bulk copies with tensor descriptors for my kernel"
    on_a100 = seed_retriever.recall(text=text, arch="sm_80", kinds=("skill",), k=5)
    on_h100 = seed_retriever.recall(text=text, arch="sm_90", kinds=("skill",), k=5)
    assert "hopper-tma-bulk-copies" in _ids(on_h100)
    assert "hopper-tma-bulk-copies" not in _ids(on_a100)
    assert any("hopper-tma-bulk-copies" in n and "sm_90" in n for n in on_a100.notes), on_a100.notes


def test_bad_queries_are_clear_errors_or_degraded(seed_retriever):
    with pytest.raises(InvalidInput):
        seed_retriever.recall(text="  ")
    with pytest.raises(InvalidInput):
        seed_retriever.recall(text="softmax", mode="magic")
    with pytest.raises(InvalidInput):
        seed_retriever.recall(text="softmax", k=0)
    with pytest.raises(InvalidInput):
        seed_retriever.recall(text="softmax", kinds=("recipes",))
    with pytest.raises(NotFound):
        seed_retriever.recall(task="no_such_task")
    r = seed_retriever.recall(task="no_such_task", text="softmax over rows")
    assert r.items and any("unknown task" in n for n in r.notes)
    huge = seed_retriever.recall(text="reduce the rows " * 2000, k=3)
    assert huge.items and any("only its first" in n for n in huge.notes)
    broken = seed_retriever.recall(source="def k(:\n    x = tl.load(ptr + offs, mask=m)\n    tl.sum(x)\n", k=3)
    assert broken.items and any("does not parse" in n for n in broken.notes)


def test_attempts_of_similar_tasks_are_recalled(world_retriever):
    r = world_retriever.recall(task=task_info("conv_new", "conv", "fp16"), kinds=("attempt",), k=3)
    assert r.items and {i.evidence[0].task for i in r.items} <= {"conv_a", "conv_b"}


def test_feedback_changes_what_is_recalled(world, world_retriever):
    query = dict(text="online softmax reads each row once", kinds=("experience",), k=2)
    before = {i.id: i for i in world_retriever.recall(**query).items}
    assert "exp_w_online" in before and before["exp_w_online"].parts["feedback"] == 1.0
    for _ in range(6):
        world.record_feedback(Feedback(item_kind="experience", item_id="exp_w_online", used=True, improved=False))
    after = {i.id: i for i in world_retriever.recall(**query).items}
    assert after["exp_w_online"].parts["feedback"] < 1.0
    assert after["exp_w_online"].score < before["exp_w_online"].score
