"""The bar: a scripted session through the local Messages API server completes two rounds on
relu (CPU verification), records both attempts and a lesson, and distill turns them into
a draft skill that passes lint with its example verified under the Triton interpreter.
Then a fix step with no lesson gets a distilled one, and a near-duplicate draft is merged
into the existing skill as evidence."""

from __future__ import annotations

import json

import pytest

from skillbase.agent.usage import read_runs
from skillbase.models import utcnow
from skillbase.skills.lint import errors, lint
from skillbase.tools import TOOLS
from tests.agent.conftest import ROOT, last_attempt_id, relu_source
from tests.agent.messages_server import MessagesServer, message, text, tool_use

BROKEN_RELU = relu_source("naive").replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.0) * 1.5")

DRAFT = {
    "name": "wide-blocks-for-streaming-elementwise",
    "description": ("Gives each program of a memory-bound elementwise kernel four times more elements (4096 instead "
                    "of 1024) so each thread keeps more 16-byte loads in flight. Use it when an elementwise kernel "
                    "streams below the copy roofline with small programs."),
    "body": ("## When to use it\nAn elementwise Triton kernel with 1024-element programs that streams below the "
             "copy roofline.\n\n## The idea\nMore elements per program means more loads in flight per thread and "
             "fewer programs to schedule.\n\n## Steps\n1. Raise BLOCK_SIZE from 1024 to 4096.\n2. Keep the tail "
             "mask.\n3. Verify, then time it against the parent.\n\n## Example\n```python\nBLOCK_SIZE = 4096\n"
             "relu_kernel[grid](x, y, n, BLOCK_SIZE=BLOCK_SIZE)\n```\n\n## How to check it worked\nThe median "
             "drops and achieved bandwidth approaches the copy peak; on a CPU only correctness is checked.\n"),
    "applies_when": {"families": ["elementwise"], "bottlenecks": ["memory"], "dtypes": ["fp32"]},
    "languages": ["triton"],
    "expected_effect": "Unmeasured here (CPU); expected a few percent below the roofline only.",
    "pitfalls": ["At the roofline already, it changes nothing."],
}


def _session_script() -> list:
    naive, wide = relu_source("naive"), relu_source("step1_wide_blocks")
    return [
        message(text("Reading the task and the memory."), tool_use("load_task", {"task": "relu"}),
                tool_use("recall", {"task": "relu"}), tool_use("suggest_next", {"task": "relu"})),
        message(tool_use("compile_kernel", {"task": "relu", "source": naive})),
        message(tool_use("benchmark_kernel", {"task": "relu", "source": naive, "techniques": ["masking"]})),
        lambda body: message(tool_use("record_lesson", {
            "after_attempt": last_attempt_id(body), "title": "naive baseline verifies",
            "lesson": "One program per 1024 elements with a tail mask is correct at every shape tried."})),
        message(tool_use("benchmark_kernel", {"task": "relu", "source": wide, "techniques": ["block size tuning"]})),
        lambda body: message(tool_use("record_lesson", {
            "after_attempt": last_attempt_id(body), "title": "4096-element programs stay correct",
            "lesson": "Four times the elements per program kept the kernel correct; its speed needs a GPU to judge.",
            "conditions": "relu fp32, small CPU shapes"})),
        message(text("Two rounds done: the wide-block variant is the best verified candidate.")),
    ]


@pytest.fixture(scope="module")
def session_run(sb, options_for):
    """The two-round scripted session, run once for the tests of this module."""
    started = utcnow()
    events = []
    with MessagesServer(_session_script()) as server:
        result = sb.optimize("relu", budget=2, device="cpu", progress=events.append, options=options_for(server))
    return started, result, server, events


def test_two_rounds_land_in_memory_with_lineage_and_lessons(sb, session_run):
    _, r, server, events = session_run
    assert r.stop_reason == "budget" and r.rounds == 2 and r.turns == 7 and r.device == "cpu"
    first, second = r.attempts
    assert first.verdict == second.verdict == "correct"
    assert second.parent_id == first.id and first.parent_id is None  # the harness set the parent: the best so far
    assert second.techniques == ["block-size-tuning"]  # the alias the model wrote, canonicalized
    assert {a.session for a in sb.attempt_history("relu", session=r.session)} == {r.session}
    assert r.best.id == second.id
    lesson = r.lessons[-1]
    assert (lesson.before_attempt, lesson.after_attempt, lesson.session) == (first.id, second.id, r.session)
    assert lesson.gain is None  # not timed on a CPU, so no gain is claimed
    assert any("timing needs a GPU" in n for n in r.notes)
    assert r.summary.startswith("Two rounds done")
    assert [e.kind for e in events].count("round") == 2 and events[-1].kind == "stop"


def test_the_real_client_spoke_the_messages_api(session_run):
    _, r, server, _ = session_run
    first = server.received[0]
    assert first.path == "/v1/messages" and first.body["model"] == r.model
    assert [t["name"] for t in first.body["tools"]] == [t.name for t in TOOLS]
    assert "rounds" in first.body["system"] and "relu" in first.body["messages"][0]["content"]
    bench = server.tool_results(3)[0]  # the answer to round 1's benchmark_kernel
    assert not bench.get("is_error")
    report = json.loads(bench["content"][0]["text"])
    assert report["report"]["verdict"] == "correct" and "timing needs a CUDA GPU" in report["report"]["timing_unavailable"]
    assert "record_lesson" in bench["content"][-1]["text"]
    closing = server.tool_results(5)[0]["content"][-1]["text"]
    assert "Benchmarks are closed" in closing  # the budget was announced after round 2
    assert r.usage.requests == 7 and r.usage.input_tokens == 7 * 1200 and r.usage.output_tokens == 7 * 300
    assert r.usage.estimated_cost_usd == pytest.approx((7 * 1200 * 3 + 7 * 300 * 15) / 1e6)


def test_the_run_is_logged_with_its_usage(sb, session_run):
    _, r, _, _ = session_run
    logged = [x for x in read_runs(sb.settings, "optimize") if x.session == r.session]
    assert len(logged) == 1 and logged[0].stop_reason == "budget"
    assert logged[0].usage.output_tokens == r.usage.output_tokens
    assert logged[0].records["attempts"] == [a.id for a in r.attempts]


def test_distill_turns_the_session_into_a_draft_skill_that_passes_lint(sb, session_run, options_for):
    started, r, _, _ = session_run
    no_steps = {**DRAFT, "body": DRAFT["body"].replace("## Steps", "## What to do")}
    with MessagesServer([message(tool_use("draft_skill", no_steps)), message(tool_use("draft_skill", DRAFT))]) as server:
        result = sb.distill(started, options=options_for(server))
    assert server.received[0].body["tool_choice"] == {"type": "tool", "name": "draft_skill"}
    [lint_error] = server.tool_results(1)
    assert lint_error["is_error"] and "section-missing" in lint_error["content"]  # lint findings went back to fix
    assert not result.distilled  # the only step already has the agent's lesson
    [outcome] = result.skills
    assert outcome.action == "proposed" and outcome.status == "draft", outcome
    skill = sb.get_skill(outcome.name)
    assert skill.status == "draft" and skill.techniques == ["block-size-tuning"]
    lesson = r.lessons[-1]
    assert [(e.attempt_id, e.experience_id) for e in skill.evidence] == [(lesson.after_attempt, lesson.id)]
    assert skill.provenance.from_experiences == [lesson.id]
    assert skill.files["examples/after.py"] == sb.get_attempt(lesson.after_attempt).source
    issues = lint(skill, store=sb.memory, toolchain=sb.toolchain, verify_examples=True)
    assert errors(issues) == [], issues
    assert sum(i.code == "example-verified" for i in issues) == 2
    assert any(n.startswith("1 experience(s) explain no parent") for n in result.notes)  # round 1's lesson


def test_distill_explains_a_fix_and_merges_a_duplicate_into_the_existing_skill(sb, options_for):
    started = utcnow()
    broken = sb.benchmark("relu", source=BROKEN_RELU, device="cpu", session="fix-step", techniques=["masking"])
    assert broken.report.verdict == "incorrect"
    fixed = sb.benchmark("relu", source=relu_source("naive"), device="cpu", session="fix-step",
                         parent_id=broken.attempt_id, techniques=["masking"])
    seed = sb.add_skill(ROOT / "seeds" / "skills" / "masking-and-tail-handling", author="test", approve=True)
    copy = {**DRAFT, "name": "mask-the-tail", "description": seed.description, "body": seed.body}
    script = [
        message(tool_use("record_lessons", {"lessons": []})),  # malformed: no lesson at all
        message(tool_use("record_lessons", {"lessons": [{
            "step": 1, "title": "scale factor broke relu",
            "lesson": "The parent multiplied the output by 1.5; relu is max(x, 0) exactly, so it failed."}]})),
        message(tool_use("draft_skill", copy)),
    ]
    with MessagesServer(script) as server:
        result = sb.distill(started, options=options_for(server))
    assert server.tool_results(1)[0]["is_error"] is True  # the model was told what to fix
    [step] = result.distilled
    assert (step.kind, step.before_attempt, step.after_attempt, step.gain) == (
        "fix", broken.attempt_id, fixed.attempt_id, None)
    exp = sb.get_experience(step.experience_id)
    assert exp.source == "distilled" and exp.techniques == ["masking"] and exp.title == "scale factor broke relu"
    [outcome] = result.skills
    assert outcome.action == "merged" and outcome.name == seed.name, outcome
    merged = sb.get_skill(seed.name)
    assert merged.status == "approved" and merged.version == seed.version + 1
    assert merged.evidence[-1].experience_id == exp.id and merged.evidence[-1].attempt_id == fixed.attempt_id
    with pytest.raises(Exception):
        sb.get_skill("mask-the-tail")  # no near-duplicate draft was created
