"""Next-technique suggestions on a constructed store whose answers are known."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from skillbase.errors import InvalidInput, NotFound
from retriever_factories import lesson, lineage, task_info

OTHER_FAMILIES = {"im2col", "tensor-cores", "flash-attention", "layout-change"}


def _tally(retriever, info, attempts=(), seeds=range(40), k=3):
    top1, top3 = Counter(), Counter()
    for seed in seeds:
        got = [s.technique for s in retriever.suggest(task=info, attempts=list(attempts), k=k, seed=seed)]
        top1[got[0]] += 1
        top3.update(got)
    return top1, top3


def test_softmax_gets_no_technique_written_for_other_families(world_retriever):
    # im2col, layout-change and flash-attention paid x5-x10 on other kernels;
    # no skill is written for softmax with them, so that must not carry over.
    top1, top3 = _tally(world_retriever, task_info("softmax_new", "softmax"))
    assert not OTHER_FAMILIES & set(top3), top3
    assert top1.most_common(1)[0][0] == "online-softmax" and top1["online-softmax"] >= 24, top1


def test_the_family_that_measured_a_technique_still_gets_it(world_retriever):
    _, top3 = _tally(world_retriever, task_info("conv_new", "conv", "fp16"))
    assert top3["im2col"] + top3["tensor-cores"] >= 60, top3


def test_recall_suggestions_for_a_softmax_task_fit_it(world_retriever):
    result = world_retriever.recall(task=task_info("softmax_new", "softmax"), arch="sm_90")
    assert result.suggestions and not OTHER_FAMILIES & {s.technique for s in result.suggestions}


def test_applied_and_slower_techniques_are_not_suggested_again(world, world_retriever):
    attempts = world.list_attempts(task="softmax_a", limit=50)
    info = task_info("softmax_a", "softmax")
    _, top3 = _tally(world_retriever, info, attempts)
    assert "online-softmax" not in top3  # in the best candidate already
    assert "block-size-tuning" not in top3  # was slower on this task


def test_a_technique_that_just_failed_is_not_retried_without_evidence(world_retriever):
    info = task_info("softmax_f", "softmax")
    failed = lineage(info, [(["num-warps-tuning"], None, "incorrect")], prefix="f1_")
    _, top3 = _tally(world_retriever, info, failed)
    assert "num-warps-tuning" not in top3


def test_a_compile_error_on_a_proven_winner_is_retried_with_the_reason(world_retriever):
    info = task_info("softmax_r", "softmax")
    failed = lineage(info, [(["online-softmax"], None, "compile_error")], prefix="r1_")
    got = world_retriever.suggest(task=info, attempts=failed, k=3, rule="ucb")
    retry = [s for s in got if s.technique == "online-softmax"]
    assert retry and "retry" in retry[0].why and "compile_error" in retry[0].why
    thrice = lineage(info, [(["online-softmax"], None, "compile_error"), (["online-softmax"], None, "incorrect"),
                            (["online-softmax"], None, "runtime_error")], prefix="r3_")
    assert "online-softmax" not in {s.technique for s in world_retriever.suggest(task=info, attempts=thrice, k=5)}


def test_suggestions_carry_evidence_and_are_deterministic_for_a_seed(world_retriever):
    info = task_info("softmax_new", "softmax")
    a = world_retriever.suggest(task=info, attempts=[], k=3, seed=7)
    b = world_retriever.suggest(task=info, attempts=[], k=3, seed=7)
    assert [s.model_dump() for s in a] == [s.model_dump() for s in b]
    online = next(s for s in world_retriever.suggest(task=info, attempts=[], k=5, rule="ucb")
                  if s.technique == "online-softmax")
    assert online.tries >= 2 and online.expected_gain > 1.2 and "measured" in online.why
    assert "online-softmax-rows" in online.skills


def test_bad_suggest_arguments_are_clear_errors(world_retriever):
    info = task_info("softmax_new", "softmax")
    with pytest.raises(InvalidInput):
        world_retriever.suggest(task=info, attempts=[], k=0)
    with pytest.raises(InvalidInput):
        world_retriever.suggest(task=info, attempts=[], rule="greedy")
    with pytest.raises(InvalidInput):
        world_retriever.suggest(task=info, attempts=["att_1"])
    with pytest.raises(NotFound):
        world_retriever.suggest(task="no_such_task", attempts=[])


def test_expected_improvement_values_a_try_that_is_kept_only_if_faster():
    from math import pi, sqrt

    from skillbase.retrievers.suggest import expected_improvement

    assert expected_improvement(0.0, 0.3) == pytest.approx(0.3 / sqrt(2 * pi))
    assert expected_improvement(0.5, 0.01) == pytest.approx(0.5, abs=1e-6)
    assert expected_improvement(-1.0, 0.01) == pytest.approx(0.0, abs=1e-6)
    # Uncertainty is worth something (the option to discard a slower result)...
    assert expected_improvement(0.05, 0.4) > expected_improvement(0.05, 0.1)
    # ...but not more than a technique known to pay well.
    assert expected_improvement(0.3, 0.05) > expected_improvement(0.05, 0.4)


@pytest.mark.parametrize("rule", ["ei", "thompson", "ucb"])
def test_every_rule_keeps_other_families_out(world_retriever, rule):
    info = task_info("softmax_new", "softmax")
    got = {s.technique for seed in range(10)
           for s in world_retriever.suggest(task=info, attempts=[], k=3, seed=seed, rule=rule)}
    assert got and not OTHER_FAMILIES & got


def test_skill_evidence_the_store_holds_is_not_counted_again_as_a_prior():
    # One x14 step on another kernel, already a graph observation in its own family, must not also
    # become a tight prior for every family the skill is written for.
    from skillbase.models import Evidence, Skill
    from skillbase.retrievers.gate import GateResult
    from skillbase.retrievers.graph import skill_priors
    from skillbase.retrievers.query import build_query

    skill = Skill(name="im2col-conv", description="Use it when a direct convolution is slow.", techniques=["im2col"],
                  applies_when={"families": ["conv", "conv_epilogue"]}, languages=["triton"],
                  evidence=[Evidence(attempt_id="att_x14", experience_id="exp_x14", task="conv2d_3x3", gain=14.0)])
    q = build_query(task=task_info("conv_new", "conv_epilogue"))
    gates = {skill.name: GateResult(skill.name, "pass", 1.0)}
    unheld = skill_priors(q, gates, {skill.name: skill})["im2col"][0]
    held = skill_priors(q, gates, {skill.name: skill}, measured={"att_x14"})["im2col"][0]
    assert unheld == pytest.approx(math.log(14.0)) and held < 0.2, (unheld, held)


def test_one_try_in_a_narrow_context_does_not_undo_its_family_record():
    from skillbase.retrievers.values import _p_ok

    class V:
        def __init__(self, tries, timed):
            self.tries, self.timed = tries, timed

    # 11 of 11 correct in the family, 1 of 1 in the task class: still near certain, not Laplace's 2/3.
    assert _p_ok([V(30, 29), V(11, 11), V(1, 1)]) > 0.9
    assert _p_ok([V(30, 29), V(11, 11), V(1, 0)]) < 0.7  # a failure in the narrow context still counts


def test_with_nothing_correct_yet_the_latest_candidates_techniques_count_as_applied():
    from datetime import datetime, timezone

    from skillbase.models import Attempt
    from skillbase.retrievers.suggest import task_memory

    root = Attempt(task="t", task_signature="conv:fp32:medium", family="conv", dtype="fp32", source="x",
                   source_hash="h", techniques=["im2col", "tensor-cores"], verdict="incorrect",
                   created_at=datetime(2026, 11, 25, tzinfo=timezone.utc))
    assert task_memory([root]).applied == {"im2col", "tensor-cores"}


@pytest.fixture(scope="module")
def recipe_world(tmp_path_factory, embedder):
    """A family with a recipe: loop-unrolling gained x1.2 on six of its tasks, one rewrite gained x2.0
    on the seventh (the one kernel that had the structure for it)."""
    from retriever_factories import lineage, skill

    from skillbase.config import Settings
    from skillbase.memory.store import Store

    home = tmp_path_factory.mktemp("recipe") / "home"
    store = Store.open(Settings.from_env(env={}, home=home), embedder=embedder)
    store.put_skill(skill("unroll-windows", ["loop-unrolling"], families=["pooling"]), author="test", reason="t")
    attempts = []
    for i in range(6):
        attempts += lineage(task_info(f"pool_{i}", "pooling"), [(["loop-unrolling"], 1 / 1.2, "correct")])
    attempts += lineage(task_info("pool_separable", "pooling"), [(["algebraic-simplification"], 0.5, "correct")])
    store.record_attempts(attempts)
    yield store
    store.close()


def test_a_recipe_that_paid_on_six_tasks_beats_one_large_gain_measured_once(recipe_world):
    from skillbase.retrievers import Retriever

    r = Retriever(recipe_world, recipe_world.settings)
    try:
        got = r.suggest(task=task_info("pool_new", "pooling"), attempts=[], k=3)
        assert got[0].technique == "loop-unrolling", [(s.technique, s.score) for s in got]
        assert "faster on 6 of the family's 7 measured tasks" in got[0].why
        rewrite = next(s for s in got if s.technique == "algebraic-simplification")
        assert "faster on 1 of the family's 7" in rewrite.why
        # Among the family's own tasks, the task asked about is not counted.
        own = r.suggest(task=task_info("pool_0", "pooling"), attempts=[], k=3)
        assert "faster on 5 of the family's 6 measured tasks" in next(
            s for s in own if s.technique == "loop-unrolling").why
    finally:
        r.close()


def test_applicability_counts_tasks_once_and_backs_off_to_the_broader_family():
    from skillbase.memory.graph import TechniqueCoverage
    from skillbase.retrievers.values import APPLY_PRIOR, applicability

    class Graph:
        def __init__(self, table):
            self.table = table

        def technique_coverage(self, family, *, exclude_task=None):
            tasks, improved = self.table.get(family, (0, {}))
            return TechniqueCoverage(family=family, tasks=tasks, tried=improved, improved=improved)

    # Nothing measured in the lineage: every technique alike, the ranking is the posterior's alone.
    empty = applicability(Graph({}), "argreduce")
    assert empty.rate("autotuning") == empty.rate("split-k") == 0.5
    # Only the broader family measured: its share, shrunk toward 1/2.
    broad = applicability(Graph({"reduction": (4, {"autotuning": 4})}), "argreduce")
    assert broad.rate("autotuning") == pytest.approx((4 + APPLY_PRIOR * 0.5) / (4 + APPLY_PRIOR))
    assert broad.rate("split-k") == pytest.approx(APPLY_PRIOR * 0.5 / (4 + APPLY_PRIOR))
    # The family's own tasks, centred on the broader share.
    own = applicability(Graph({"reduction": (4, {"autotuning": 4}), "argreduce": (2, {"split-k": 2})}), "argreduce")
    assert own.rate("split-k") > own.rate("autotuning") > own.rate("vectorized-access")
    assert own.line("split-k") == "faster on 2 of the family's 2 measured tasks"


def test_with_a_profile_state_the_family_share_is_not_applied(recipe_world):
    # A measured state says what pays on this kernel; the family-wide share of tasks improved would pull
    # the ranking back toward what the family's usual state needed.
    from skillbase.models import KernelProfile, ProfileReport
    from skillbase.retrievers import Retriever
    from skillbase.toolchain import diagnose

    k = KernelProfile(name="pool_new_kernel", duration_us=500.0, dram_pct=92.0, sm_pct=20.0,
                      achieved_occupancy_pct=70.0)
    findings, state = diagnose.diagnose([k])
    profile = ProfileReport(task="pool_new", solution_hash="0", device="cuda:0", available=True, kernels=[k],
                            findings=findings, state=state, metrics=k.metrics(),
                            diagnosis=diagnose.summary(findings, state), techniques=diagnose.techniques_of(findings, state))
    assert state
    r = Retriever(recipe_world, recipe_world.settings)
    try:
        without = r.suggest(task=task_info("pool_new", "pooling"), attempts=[], k=3)
        assert any("measured tasks" in s.why for s in without)
        with_state = r.suggest(task=task_info("pool_new", "pooling"), attempts=[], k=3, profile=profile)
        assert not any("measured tasks" in s.why for s in with_state), [s.why for s in with_state]
    finally:
        r.close()


def test_recall_keeps_gates_beliefs_and_suggestions_until_what_they_rest_on_changes(tmp_path, embedder):
    """Recalls about one kernel in other words share the gates, the technique beliefs and the
    suggestions; a measured step, an attempt of the task or a skill write makes them new."""
    from conftest import open_store

    from skillbase import seeds
    from skillbase.retrievers import Retriever
    from skillbase.skills import seed_skills

    store = open_store(tmp_path / "home", embedder)
    seed_skills(store, seeds.SKILLS_DIR)
    retriever = Retriever(store, store.settings)
    try:
        info = task_info("softmax_m", "softmax")
        made = lineage(info, [(["online-softmax"], 0.6, "correct")], prefix="m1_")
        store.record_attempts(made)
        graph = retriever.graph
        first = retriever.recall(text="rows too wide for registers", task=info, arch="sm_90")
        hits = graph.memo.hits
        second = retriever.recall(text="the rows do not fit in the register file", task=info, arch="sm_90")
        assert graph.memo.hits >= hits + 3  # gates, beliefs and suggestions answered from the memo
        assert [s.technique for s in second.suggestions] == [s.technique for s in first.suggestions]
        assert "online-softmax" not in {s.technique for s in second.suggestions}  # the best already has it

        # A lesson without techniques changes none of them.
        store.record_experience(lesson("exp_m_note", "Noted: the rows are 8192 wide.", techniques=[],
                                       family="softmax"))
        misses = graph.memo.misses
        retriever.recall(text="rows too wide", task=info, arch="sm_90")
        assert graph.memo.misses == misses

        # A new attempt of the task (slower, with a new technique) is a new question for all three.
        store.record_attempts(lineage(info, [(["online-softmax"], 0.6, "correct"), (["block-size-tuning"], 0.9, "correct")],
                                      prefix="m1_")[2:])
        third = retriever.recall(text="rows too wide", task=info, arch="sm_90")
        assert graph.memo.misses >= misses + 2
        assert "block-size-tuning" not in {s.technique for s in third.suggestions}  # it was slower here
    finally:
        retriever.close()
        store.close()
