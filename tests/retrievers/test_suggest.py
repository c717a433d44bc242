"""Next-technique suggestions on a constructed store whose answers are known."""

from __future__ import annotations

from collections import Counter

import pytest

from skillbase.errors import InvalidInput, NotFound
from retriever_factories import lineage, task_info

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
