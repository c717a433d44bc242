"""The KernelBench campaign's seed memory (seeds/campaign.jsonl): traceable, self-contained, and
free of KernelBench's own files."""

from __future__ import annotations

import json
import re

import pytest

from skillbase import seeds


@pytest.fixture(scope="module")
def records():
    lines = [json.loads(x) for x in seeds.CAMPAIGN_FILE.read_text().splitlines() if x.strip()]
    assert lines[0]["format"] == "skillbase-memory"
    out = {"task": [], "attempt": [], "experience": []}
    for r in lines[1:]:
        out[r["kind"]].append(r["record"])
    return out


def test_every_task_keeps_its_trace_and_nothing_of_the_problem_file(records):
    assert len(records["task"]) >= 60
    for t in records["task"]:
        info = t["info"]
        assert re.fullmatch(r"kb:[12]/\d+", info["path"]), info["path"]
        assert info["families"] and info["bytes_moved"] > 0 and info["understanding"]["regime"], t["name"]
        # The description is the trace's own summary, never the problem's docstring.
        assert info["description"] == info["understanding"]["summary"], t["name"]


def test_every_attempt_names_its_raw_result_and_its_lineage_resolves(records):
    attempts = {a["id"]: a for a in records["attempt"]}
    tasks = {t["name"] for t in records["task"]}
    for a in attempts.values():
        m = re.search(r"\[measured: \S+/\.skillbase/results/([0-9a-f]{32})\.json, solution (\w+)\]", a["notes"])
        assert m and m.group(2) == a["bench_report"]["solution_hash"], a["id"]
        assert a["task"] in tasks and a["bench_report"]["hardware"]["name"].startswith("NVIDIA H100")
        if a["parent_id"]:
            assert attempts[a["parent_id"]]["task"] == a["task"], a["id"]
    roots = {a["task"] for a in attempts.values() if a["parent_id"] is None}
    stepped = {a["task"] for a in attempts.values() if a["parent_id"]}
    assert roots == stepped == tasks  # each problem: a first kernel and at least one step after it


def test_every_attempt_has_a_lesson_with_its_measured_figures(records):
    attempts = {a["id"]: a for a in records["attempt"]}
    taught = {e["after_attempt"] for e in records["experience"]}
    assert taught == set(attempts)
    for e in records["experience"]:
        assert "Measured with skillbase suite run on NVIDIA H100" in e["lesson"], e["id"]
        a = attempts[e["after_attempt"]]
        if e["gain"] is not None:
            parent = attempts[e["before_attempt"]]
            assert e["gain"] == pytest.approx(parent["median_ms"] / a["median_ms"], rel=1e-6), e["id"]


def test_init_runs_no_embedding_model_for_what_the_seeds_ship(tmp_path):
    """seeds/embeddings.npz holds a vector for every seed text init indexes; a stale file (seeds changed
    without `python benchmarks/seed_embeddings.py`) shows here as texts embedded afresh."""
    from skillbase import SkillBase

    with SkillBase(home=tmp_path / "home") as sb:
        before = sb.memory.embedder.computed
        report = sb.init()
        assert report.experiences_total >= 170 and sb.memory.embedder.computed == before
