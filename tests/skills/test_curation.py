"""Curation on a real store: every change a version with who and why, history and rollback, merge keeping
provenance and evidence, agent proposals that stay drafts unless a curator or a measured policy says so."""

import pytest

from skillbase.errors import InvalidInput, LimitExceeded, NotFound, UnknownTechnique
from skillbase.models import Attempt, Evidence, Experience, Provenance, content_hash
from skillbase.skills.curation import (AutoApprovePolicy, add_skill, approve_skill, deprecate_skill, edit_skill,
                                       import_skills, list_skills, merge_skills, propose_skill, rollback_skill,
                                       show_skill, skill_history)
from skillbase.skills.markdown import render_skill_md

from .factories import make_skill, write_skill


def test_versions_history_and_rollback(open_store, tmp_path):
    store = open_store()
    added = add_skill(store, write_skill(tmp_path, make_skill()), author="ana", reason="from the wiki")
    assert (added.version, added.status, added.files.keys() == make_skill().files.keys()) == (1, "draft", True)
    approve_skill(store, added.name, curator="bo", reason="examples verified")
    edit_skill(store, added.name, {"pitfalls": ["Forgetting the mask on the tail.", "fp16 accumulation"]},
               author="ana", reason="one more pitfall")
    same = edit_skill(store, added.name, {"pitfalls": ["Forgetting the mask on the tail.", "fp16 accumulation"]},
                      author="ana", reason="no change")
    assert same.version == 3  # identical content adds no version
    back = rollback_skill(store, added.name, 2, author="bo", reason="the pitfall was wrong")
    history = skill_history(store, added.name)
    assert [(h.version, h.status, h.author) for h in history] == [
        (1, "draft", "ana"), (2, "approved", "bo"), (3, "approved", "ana"), (4, "approved", "bo")]
    assert history[3].reason == "rollback to version 2: the pitfall was wrong"
    assert all(h.created_at for h in history) and back.version == 4
    assert back.model_copy(update={"version": 2}) == show_skill(store, added.name, 2)
    assert show_skill(store, added.name).pitfalls == ["Forgetting the mask on the tail."]
    assert [s.name for s in list_skills(store, "approved")] == [added.name] and list_skills(store, "draft") == []


def test_bad_changes_are_refused_and_write_nothing(open_store, tmp_path):
    store = open_store()
    with pytest.raises(UnknownTechnique, match="did you mean"):
        add_skill(store, make_skill(techniques=["elementwize-fusion"]), author="ana")
    with pytest.raises(LimitExceeded):
        add_skill(store, make_skill(files={"examples/big.py": "x" * 300_000}), author="ana")
    with pytest.raises(InvalidInput, match="escapes"):
        add_skill(store, make_skill(files={"../outside.py": "x"}), author="ana")
    assert list_skills(store) == []
    skill = add_skill(store, make_skill(), author="ana")
    with pytest.raises(InvalidInput, match="already exists"):
        add_skill(store, make_skill(), author="bo")
    with pytest.raises(InvalidInput, match="cannot edit field"):
        edit_skill(store, skill.name, {"status": "approved"}, author="ana", reason="sneaky")
    with pytest.raises(InvalidInput, match="cannot change the status"):
        edit_skill(store, skill.name, skill.model_copy(update={"status": "approved"}), author="ana", reason="sneaky")
    with pytest.raises(InvalidInput, match="field techniques"):
        edit_skill(store, skill.name, {"techniques": "not a list"}, author="ana", reason="typo")
    with pytest.raises(InvalidInput, match="author and a reason"):
        edit_skill(store, skill.name, {"pitfalls": []}, author="ana", reason=" ")
    with pytest.raises(InvalidInput, match="does not exist"):
        deprecate_skill(store, skill.name, author="ana", reason="old", superseded_by="nothing-here")
    with pytest.raises(NotFound):
        approve_skill(store, "nothing-here", curator="bo", reason="x")
    assert [h.version for h in skill_history(store, skill.name)] == [1]


def test_approval_needs_a_clean_lint(open_store):
    store = open_store()
    rough = add_skill(store, make_skill(body="## Steps\nonly steps\n"), author="agent-1")
    with pytest.raises(InvalidInput, match="section-missing"):
        approve_skill(store, rough.name, curator="bo", reason="looks fine")
    assert show_skill(store, rough.name).status == "draft"
    forced = approve_skill(store, rough.name, curator="bo", reason="accepted as is", check=False)
    assert forced.status == "approved"
    with pytest.raises(InvalidInput, match="description-when"):
        add_skill(store, make_skill("rough-two", description="Scales things."), author="bo", approve=True)
    with pytest.raises(InvalidInput, match="evidence-unknown"):
        add_skill(store, make_skill("rough-three", evidence=[Evidence(attempt_id="att_nope")]), author="bo",
                  approve=True)
    assert [s.name for s in list_skills(store)] == [rough.name]


def test_edit_from_an_edited_file_and_deprecate_with_pointer(open_store, tmp_path):
    store = open_store()
    old = add_skill(store, make_skill("old-scale"), author="ana", approve=True)
    new = add_skill(store, make_skill("new-scale"), author="ana", approve=True)
    from skillbase.skills.markdown import parse_skill_md

    edited = parse_skill_md(render_skill_md(old).replace("One read and one write", "Exactly one read and one write"))
    v2 = edit_skill(store, old.name, edited.model_copy(update={"files": old.files}), author="ana", reason="wording")
    assert v2.version == 2 and v2.expected_effect.startswith("Exactly") and v2.files == old.files
    gone = deprecate_skill(store, old.name, author="ana", reason="replaced", superseded_by=new.name)
    assert (gone.status, gone.superseded_by, gone.version) == ("deprecated", "new-scale", 3)
    restored = approve_skill(store, old.name, curator="bo", reason="still useful")
    assert (restored.status, restored.superseded_by) == ("approved", None)


def test_merge_keeps_both_provenances_and_the_union_of_evidence(open_store):
    store = open_store()
    exp_a = store.record_experience(Experience(lesson="fusing saved a pass", techniques=["elementwise-fusion"]))
    exp_b = store.record_experience(Experience(lesson="wide loads saved instructions",
                                               techniques=["vectorized-access"]))
    a = add_skill(store, make_skill("scale-a", evidence=[Evidence(experience_id=exp_a.id, gain=1.5)],
                                    provenance=Provenance(author="ana", from_experiences=[exp_a.id])),
                  author="ana", approve=True)
    b_files = {"examples/task.py": "different task\n", "examples/extra.py": "extra\n"}
    b = add_skill(store, make_skill("scale-b", techniques=["vectorized-access", "elementwise-fusion"],
                                    evidence=[Evidence(experience_id=exp_b.id, gain=1.2)], pitfalls=["misaligned"],
                                    examples=[{"task": "examples/task.py", "solution": "examples/extra.py"}],
                                    files=b_files, provenance=Provenance(author="agent-2", source="agent",
                                                                         from_experiences=[exp_b.id])),
                  author="agent-2")
    result = merge_skills(store, a.name, b.name, into=a.name, author="bo", reason="same idea")
    m = result.merged
    assert (m.name, m.status, m.version) == ("scale-a", "approved", 2)
    assert m.techniques == ["elementwise-fusion", "vectorized-access"]
    assert [e.experience_id for e in m.evidence] == [exp_a.id, exp_b.id]
    assert m.provenance.merged_from == ["scale-b"] and m.provenance.from_experiences == [exp_a.id, exp_b.id]
    assert m.pitfalls == ["Forgetting the mask on the tail.", "misaligned"]
    # b's task.py clashes with a's and moves aside; its examples follow it
    assert m.files["merged/scale-b/examples/task.py"] == "different task\n"
    assert m.files["examples/extra.py"] == "extra\n"
    assert m.examples[-1] == {"task": "merged/scale-b/examples/task.py", "solution": "examples/extra.py"}
    [gone] = result.deprecated
    assert (gone.name, gone.status, gone.superseded_by) == ("scale-b", "deprecated", "scale-a")
    assert skill_history(store, "scale-b")[-1].reason == "merged into scale-a: same idea"
    assert skill_history(store, "scale-a")[-1].author == "bo"
    with pytest.raises(InvalidInput, match="deprecated"):
        merge_skills(store, "scale-a", "scale-b", into="scale-a", author="bo", reason="again")


def test_merge_into_a_new_name_deprecates_both(open_store):
    store = open_store()
    add_skill(store, make_skill("scale-a"), author="ana", approve=True)
    add_skill(store, make_skill("scale-b"), author="ana")
    add_skill(store, make_skill("scale-c"), author="ana")
    with pytest.raises(InvalidInput, match="itself"):
        merge_skills(store, "scale-a", "scale-a", into="scale-a", author="bo", reason="x")
    with pytest.raises(InvalidInput, match="already exists"):
        merge_skills(store, "scale-a", "scale-b", into="scale-c", author="bo", reason="x")
    result = merge_skills(store, "scale-a", "scale-b", into="scale-both", author="bo", reason="one skill")
    assert result.merged.provenance.merged_from == ["scale-a", "scale-b"] and result.merged.version == 1
    assert result.merged.status == "approved"
    assert {s.name: s.superseded_by for s in result.deprecated} == {"scale-a": "scale-both", "scale-b": "scale-both"}


def _attempt(store, task, ms, parent=None):
    src = f"# {task} {ms}\n"
    return store.record_attempt(Attempt(task=task, task_signature="elementwise:fp32:large", family="elementwise",
                                        dtype="fp32", source=src, source_hash=content_hash(src), verdict="correct",
                                        median_ms=ms, speedup_vs_eager=1.0 if parent is None else None,
                                        parent_id=parent, techniques=["elementwise-fusion"]))


def test_agent_proposals_stay_drafts_without_a_curator(open_store):
    store = open_store()
    exp = store.record_experience(Experience(lesson="fusing saved a pass", techniques=["elementwise-fusion"]))
    p = propose_skill(store, make_skill(status="approved"), agent="agent-7", from_experiences=[exp.id])
    assert (p.skill.status, p.decision) == ("draft", None)
    assert p.skill.provenance.model_dump() == {"author": "agent-7", "source": "agent", "from_experiences": [exp.id],
                                               "merged_from": []}
    again = propose_skill(store, make_skill(pitfalls=["new"]), agent="agent-7", reason="refined")
    assert (again.skill.version, again.skill.status) == (2, "draft")
    with pytest.raises(InvalidInput, match="does not exist"):
        propose_skill(store, make_skill("other"), agent="agent-7", from_experiences=["exp_nope"])
    approve_skill(store, p.skill.name, curator="bo", reason="reviewed")
    with pytest.raises(InvalidInput, match="cannot replace it"):
        propose_skill(store, make_skill(), agent="agent-8")
    assert show_skill(store, p.skill.name).status == "approved"


def test_auto_approve_policy_counts_measured_attempts_only(open_store):
    store = open_store()
    evidence = []
    for task in ("scale_a", "scale_b"):
        root = _attempt(store, task, 2.0)
        for ms in (1.0, 1.9):  # gains 2.0 and 1.05
            evidence.append(Evidence(attempt_id=_attempt(store, task, ms, parent=root.id).id, gain=99.0))
    policy = AutoApprovePolicy(min_attempts=2, min_gain=1.2, min_tasks=2)  # typed-in gains (99x) do not count
    weak = propose_skill(store, make_skill("weak", evidence=evidence[:2]), agent="a", policy=policy)
    assert weak.skill.status == "draft" and not weak.decision.approved
    assert weak.decision.reason.startswith("1 correct attempt(s) with measured gain >= 1.2x on 1 task(s)")
    strong = propose_skill(store, make_skill("strong", evidence=evidence), agent="a", policy=policy)
    assert strong.skill.status == "approved" and strong.decision.approved
    assert strong.decision.qualifying_attempts == [evidence[0].attempt_id, evidence[2].attempt_id]
    assert strong.decision.tasks == ["scale_a", "scale_b"]
    history = skill_history(store, "strong")
    assert [(h.status, h.author) for h in history] == [("draft", "a"), ("approved", "auto-approve-policy")]


def test_import_validates_everything_before_writing(open_store, tmp_path):
    store = open_store()
    good = write_skill(tmp_path / "in", make_skill("good-one"))
    (tmp_path / "in" / "notes.md").write_text("---\nname: notes\ncolour: red\n---\nbody\n")
    with pytest.raises(InvalidInput, match="colour"):
        import_skills(store, tmp_path / "in", author="ana")
    assert list_skills(store) == []
    (tmp_path / "in" / "notes.md").unlink()
    [imported] = import_skills(store, good.parent, author="ana", reason="team export")
    assert (imported.name, imported.status) == ("good-one", "draft")
    with pytest.raises(InvalidInput, match="already in the store"):
        import_skills(store, good.parent, author="ana")
    [again] = import_skills(store, good.parent, author="ana", approve=True, replace=True)
    assert (again.version, again.status) == (2, "approved")
