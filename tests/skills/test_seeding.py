"""Seeding: idempotent, follows upstream changes, never overwrites a curator's version, all-or-nothing."""

import shutil

import pytest

from skillbase.errors import UnknownTechnique
from skillbase.skills.curation import edit_skill, skill_history
from skillbase.skills.seeding import SEED_AUTHOR, seed_skills

from .conftest import SEEDS


def test_seeding_twice_adds_no_version(seeded_store):
    report = seed_skills(seeded_store)
    assert report.added == report.updated == report.kept == []
    assert len(report.unchanged) == len(list(SEEDS.glob("*/SKILL.md")))
    assert all(len(skill_history(seeded_store, n)) == 1 for n in report.unchanged)
    stored = seeded_store.get_skill("online-softmax-one-pass")
    assert stored.status == "approved" and stored.files.keys() == {"examples/task.py", "examples/after.py",
                                                                  "examples/before.py"}
    assert skill_history(seeded_store, stored.name)[0].author == SEED_AUTHOR


def test_upstream_changes_update_and_curated_skills_are_kept(open_store, tmp_path):
    seeds = tmp_path / "seeds"
    for name in ("online-softmax-one-pass", "welford-layernorm-statistics", "masking-and-tail-handling"):
        shutil.copytree(SEEDS / name, seeds / name)
    store = open_store()
    assert len(seed_skills(store, seeds).added) == 3
    md = seeds / "masking-and-tail-handling" / "SKILL.md"
    md.write_text(md.read_text().replace("## Limits", "## Limits\nOne more limit.\n"))
    edit_skill(store, "welford-layernorm-statistics", {"pitfalls": ["curated"]}, author="ana", reason="tightened")
    report = seed_skills(store, seeds)
    assert (report.updated, report.kept, report.unchanged) == (
        ["masking-and-tail-handling"], ["welford-layernorm-statistics"], ["online-softmax-one-pass"])
    assert store.get_skill("welford-layernorm-statistics").pitfalls == ["curated"]
    assert "One more limit." in store.get_skill("masking-and-tail-handling").body


def test_one_bad_seed_stops_seeding_before_any_write(open_store, tmp_path):
    seeds = tmp_path / "seeds"
    for name in ("online-softmax-one-pass", "masking-and-tail-handling"):
        shutil.copytree(SEEDS / name, seeds / name)
    md = seeds / "masking-and-tail-handling" / "SKILL.md"
    md.write_text(md.read_text().replace("techniques: [masking]", "techniques: [maskingg]"))
    store = open_store()
    with pytest.raises(UnknownTechnique, match="maskingg"):
        seed_skills(store, seeds)
    assert store.list_skills() == []


def test_seed_evidence_points_at_the_seeded_measurements(seed_skills_list):
    """Every evidence entry of a seed skill names a seeded experience and its after-attempt, with the
    experience's measured gain and hardware, for the skill's main technique in a family it covers."""
    import json

    from skillbase import seeds

    lines = [json.loads(line) for f in seeds.MEMORY_FILES for line in f.read_text().splitlines()[1:]]
    experiences = {x["record"]["id"]: x["record"] for x in lines if x["kind"] == "experience"}
    attempts = {x["record"]["id"] for x in lines if x["kind"] == "attempt"}
    backed = [s for s in seed_skills_list if s.evidence]
    assert len(backed) >= 25, f"only {len(backed)} seed skills carry measured evidence"
    for skill in backed:
        for ev in skill.evidence:
            exp = experiences.get(ev.experience_id)
            assert exp is not None, (skill.name, ev.experience_id)
            assert ev.attempt_id == exp["after_attempt"] and ev.attempt_id in attempts, skill.name
            assert (ev.task, ev.hardware) == (exp["task"], exp["hardware"]), skill.name
            # A failed step is evidence too (where the technique does not hold): no gain on either side.
            assert (ev.gain is None and exp["gain"] is None) or ev.gain == pytest.approx(exp["gain"], abs=5e-4), \
                skill.name
            assert skill.techniques[0] in exp["techniques"], skill.name
            assert not skill.applies_when.families or exp["family"] in skill.applies_when.families, skill.name
