"""Profiles in memory and retrieval: stored with their attempts, profile-state contexts in the graph
(whichever of profile and child step arrives first), the metric gate, and the profile evaluation's
logic on a small synthetic replay (real ledger, graph and retriever; no embeddings)."""

from __future__ import annotations


import pytest


from skillbase.models import (AppliesWhen, Attempt, Experience, KernelProfile, ProfileReport, Skill,
                              content_hash)
from skillbase.retrievers.gate import PROFILE_MATCH, gate, metric_condition
from skillbase.retrievers.query import build_query
from skillbase.toolchain import diagnose

from benchmarks import profile_eval
from benchmarks.retrieval_eval import H100, LedgerStore, _synthetic_task


def profile_of(task: str, **metrics) -> ProfileReport:
    k = KernelProfile(name=f"{task}_kernel", duration_us=500.0, dram_pct=40.0, sm_pct=20.0,
                      achieved_occupancy_pct=70.0, **metrics)
    findings, state = diagnose.diagnose([k])
    return ProfileReport(task=task, solution_hash="0", device="cuda:0", available=True, kernels=[k],
                         findings=findings, state=state, metrics=k.metrics(), diagnosis=diagnose.summary(findings, state),
                         techniques=diagnose.techniques_of(findings, state))


def lineage(task, gain: float, tech: str = "coalesced-access"):
    naive = Attempt(id=f"att_h100_{task.name}_naive", task=task.name, task_signature=task.signature,
                    family=task.family, dtype=task.dtype, source=f"# {task.name} naive\n",
                    source_hash=content_hash(f"# {task.name} naive\n"),
                    verdict="correct", median_ms=1.0, speedup_vs_eager=0.5, hardware=H100.key, arch="sm_90")
    opt = naive.model_copy(update={"id": f"att_h100_{task.name}_optimized", "parent_id": naive.id,
                                   "techniques": [tech], "median_ms": 1.0 / gain, "source": f"# {task.name} opt\n",
                                   "source_hash": content_hash(f"# {task.name} opt\n")})
    lesson = Experience(id=f"exp_h100_{task.name}_optimized", lesson="coalesced the loads", task=task.name,
                        task_signature=task.signature, family=task.family, dtype=task.dtype, before_attempt=naive.id,
                        after_attempt=opt.id, techniques=[tech], gain=gain, source="measured")
    return [naive, opt], lesson


@pytest.mark.parametrize("profile_first", [True, False])
def test_profile_state_contexts_learn_from_steps_in_either_order(tmp_path, profile_first):
    store = LedgerStore(tmp_path / "ledger.sqlite3")
    task = _synthetic_task("strided_scale", "elementwise", "fp32", "large")
    (naive, opt), _ = lineage(task, 3.0)
    store.ledger.record_attempts([naive])
    prof = profile_of(task.name, ld_efficiency_pct=12.5, ld_sectors_per_request=32.0)
    if profile_first:
        store.ledger.record_profile(naive.id, prof)
    store.ledger.record_attempts([opt])
    if not profile_first:
        store.ledger.record_profile(naive.id, prof)
        store.ledger.record_profile(naive.id, prof)  # the same profile again: one row, counted once
    assert store.ledger.get_profile(naive.id).state == "uncoalesced"
    g = store.graph
    (v,) = g.technique_values(family="elementwise", profile_state="uncoalesced")
    assert v.technique == "coalesced-access" and v.timed == 1 and v.expected_gain == pytest.approx(3.0)
    assert g.counts()["edge:in-state"] == 1
    # Profiles travel with a memory export and come back on import.
    from skillbase.memory.jsonl import export_jsonl, import_jsonl

    export_jsonl(store.ledger, tmp_path / "memory.jsonl")
    other = LedgerStore(tmp_path / "other.sqlite3")
    assert import_jsonl(other.ledger, tmp_path / "memory.jsonl") > 0
    assert other.ledger.get_profile(naive.id).state == "uncoalesced"
    assert other.graph.technique_values(family="elementwise", profile_state="uncoalesced")[0].timed == 1
    other.close()
    store.close()


def test_metric_conditions_gate_skills_on_the_measured_profile():
    assert metric_condition("dram_pct > 85", {"dram_pct": 91.0}) is True
    assert metric_condition("occupancy_limiter == registers", {"occupancy_limiter": "registers"}) is True
    assert metric_condition("ld_efficiency_pct < 60", {"dram_pct": 91.0}) is None  # not measured: no verdict
    task = _synthetic_task("strided_scale", "elementwise", "fp32", "large")
    skill = Skill(name="coalesce", description="d", techniques=["coalesced-access"], status="approved",
                  applies_when=AppliesWhen(metrics=["ld_efficiency_pct < 60"]))
    with_profile = gate(skill, build_query(task=task, profile=profile_of(task.name, ld_efficiency_pct=12.5,
                                                                         ld_sectors_per_request=32.0)))
    assert with_profile.factor == pytest.approx(PROFILE_MATCH) and with_profile.specific
    healthy = gate(skill, build_query(task=task, profile=profile_of(task.name, ld_efficiency_pct=100.0)))
    assert healthy.verdict == "demote" and "does not show" in healthy.reasons[0]
    assert gate(skill, build_query(task=task)).factor == 1.0  # no profile: the condition is not held against it


def test_profile_eval_replay_on_synthetic_lineages(tmp_path):
    tasks = {n: _synthetic_task(n, "elementwise", "fp32", "large") for n in ("a_scale", "b_shift", "c_gelu")}
    attempts, lessons, profiles = [], [], {}
    for name, task in tasks.items():
        atts, lesson = lineage(task, 3.0)
        attempts += atts
        lessons.append(lesson)
        profiles[name, "naive"] = profile_of(name, ld_efficiency_pct=12.5, ld_sectors_per_request=32.0).model_dump(
            mode="json")
    result = profile_eval.replay(tasks, attempts, lessons, profiles, tmp_path)
    assert len(result["cases"]) == 3 and result["with_profile"] == 3
    for case in result["cases"]:
        assert case["state"] == "uncoalesced" and case["truth"] == ["coalesced-access"]
        assert case["profile"]["top"][0] == "coalesced-access" and case["profile"]["regret"] == pytest.approx(0.0)
    for arm in profile_eval.ARMS:
        assert 0.0 <= result["arms"][arm]["top1"] <= result["arms"][arm]["top3"] <= 1.0
    assert result["arms"]["profile"]["top1"] >= result["arms"]["roofline"]["top1"]
    assert "| profile |" in profile_eval.markdown(result)


def test_score_regret():
    m = profile_eval.score(["a", "b"], {"b"}, {"a": 1.5, "b": 3.0}, 3.0)
    assert m["top1"] == 0.0 and m["top3"] == 1.0
    assert m["regret"] == pytest.approx(__import__("math").log(2.0))


def test_a_state_nothing_was_measured_from_falls_back_to_the_task_class(tmp_path):
    from skillbase.retrievers.values import posteriors

    store = LedgerStore(tmp_path / "ledger.sqlite3")
    task = _synthetic_task("strided_scale", "elementwise", "fp32", "large")
    (naive, opt), _ = lineage(task, 3.0)
    store.ledger.record_attempts([naive, opt])
    got = posteriors(store.graph, family="elementwise", task_class=task.signature, bottleneck=None, arch=None,
                     profile_state="tail-effect")
    assert got["coalesced-access"].samples == 1 and "class:" in got["coalesced-access"].context
    store.close()
