"""Agent Skills export (strictly valid folders), import (exact round trip, plain markdown), and bad input."""

import os

import pytest
import yaml

from skillbase.errors import InvalidInput, LimitExceeded, NotFound
from skillbase.skills.agent_skills import (export_agent_skills, read_agent_skills, safe_description,
                                           validate_agent_skill_dir)
from skillbase.skills.markdown import SkillFormatError

from .factories import make_skill, write_skill

LIMIT = 256_000


def _front(folder):
    return yaml.safe_load((folder / "SKILL.md").read_text().split("---\n")[1])


def test_every_seed_exports_as_a_valid_agent_skill_and_imports_back_exactly(tmp_path, seed_skills_list):
    out = tmp_path / "skills"
    result = export_agent_skills(seed_skills_list, out)
    assert result.exported == [s.name for s in seed_skills_list] and result.skipped == {}
    for skill in seed_skills_list:
        folder = out / skill.name
        assert validate_agent_skill_dir(folder) == [], skill.name
        front = _front(folder)
        assert set(front) <= {"name", "description", "compatibility", "metadata"} and front["name"] == skill.name
        assert "<" not in front["description"] and len(front["description"]) <= 1024
        assert all(isinstance(v, str) for v in front["metadata"].values())
        for rel, text in skill.files.items():
            assert (folder / rel).read_text() == text
    assert read_agent_skills(out, max_bytes=LIMIT) == seed_skills_list
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_export_from_the_store_skips_drafts(tmp_path, seeded_store):
    approved = seeded_store.list_skills("approved")
    draft = make_skill("a-draft", status="draft")
    result = export_agent_skills([*approved, draft], tmp_path / "out")
    assert len(result.exported) == len(approved) and "a-draft" in result.skipped
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(s.name for s in approved)
    assert read_agent_skills(tmp_path / "out", max_bytes=LIMIT) == approved


def test_angle_brackets_are_rewritten_for_loaders_and_restored_on_import(tmp_path):
    skill = make_skill(description="For N < 256 and dims >= 16, NCHW <-> NHWC. Use it when rows are short.")
    assert safe_description(skill.description) == \
        "For N less than 256 and dims ≥ 16, NCHW ↔ NHWC. Use it when rows are short."
    export_agent_skills([skill], tmp_path)
    assert _front(tmp_path / skill.name)["description"] == safe_description(skill.description)
    assert read_agent_skills(tmp_path / skill.name, max_bytes=LIMIT) == [skill]


def test_a_failed_export_writes_nothing(tmp_path):
    good = make_skill("good-one")
    bad = make_skill("bad-one", files={"../../escape.py": "x"})
    with pytest.raises(InvalidInput, match="escapes"):
        export_agent_skills([good, bad], tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []
    with pytest.raises(InvalidInput, match="two skills named"):
        export_agent_skills([good, good], tmp_path / "out")
    export_agent_skills([good], tmp_path / "out")
    with pytest.raises(InvalidInput, match="already exist"):
        export_agent_skills([good.model_copy(update={"body": "## Steps\nchanged\n"})], tmp_path / "out")
    assert "changed" not in (tmp_path / "out" / "good-one" / "SKILL.md").read_text()
    export_agent_skills([good.model_copy(update={"body": "## Steps\nchanged\n"})], tmp_path / "out", overwrite=True)
    assert "changed" in (tmp_path / "out" / "good-one" / "SKILL.md").read_text()


def _folder(tmp_path, name, front, body="Instructions.\n"):
    folder = tmp_path / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\n{front}---\n{body}")
    return folder


@pytest.mark.parametrize("name, front, body, words", [
    ("ok-skill", "name: ok-skill\ndescription: Does it. Use when needed.\n", "Body.\n", None),
    ("ok-skill", "name: ok-skill\ndescription: d\nversion: 1\n", "Body.\n", "key 'version' is not allowed"),
    ("ok-skill", "description: d\n", "Body.\n", "missing required 'name'"),
    ("ok-skill", "name: ok-skill\n", "Body.\n", "missing required 'description'"),
    ("Ok-Skill", "name: Ok-Skill\ndescription: d\n", "Body.\n", "lowercase letters"),
    ("ok--skill", "name: ok--skill\ndescription: d\n", "Body.\n", "single hyphens"),
    ("-ok", "name: -ok\ndescription: d\n", "Body.\n", "not starting or ending"),
    ("ok-skill", "name: other-skill\ndescription: d\n", "Body.\n", "must equal the folder name"),
    ("claude-helper", "name: claude-helper\ndescription: d\n", "Body.\n", "reserved word 'claude'"),
    ("x" * 65, f"name: {'x' * 65}\ndescription: d\n", "Body.\n", "limit is 64"),
    ("ok-skill", f"name: ok-skill\ndescription: {'d' * 1025}\n", "Body.\n", "limit is 1024"),
    ("ok-skill", "name: ok-skill\ndescription: '<b>bold</b>'\n", "Body.\n", "must not contain '<' or '>'"),
    ("ok-skill", "name: ok-skill\ndescription: ''\n", "Body.\n", "non-empty string"),
    ("ok-skill", "name: ok-skill\ndescription: d\ncompatibility: ''\n", "Body.\n", "'compatibility' must be"),
    ("ok-skill", f"name: ok-skill\ndescription: d\ncompatibility: {'c' * 501}\n", "Body.\n", "'compatibility' must be"),
    ("ok-skill", "name: ok-skill\ndescription: d\nmetadata: {version: 2}\n", "Body.\n", "string values"),
    ("ok-skill", "name: ok-skill\ndescription: d\nallowed-tools: {a: b}\n", "Body.\n", "'allowed-tools' must"),
    ("ok-skill", "name: ok-skill\ndescription: d\nname: again\n", "Body.\n", "duplicate key"),
    ("ok-skill", "name: ok-skill\ndescription: d\n", "  \n", "no instructions"),
])
def test_the_strict_validator_applies_each_rule(tmp_path, name, front, body, words):
    problems = validate_agent_skill_dir(_folder(tmp_path, name, front, body))
    if words is None:
        assert problems == []
    else:
        assert any(words in p for p in problems), problems


def test_the_validator_refuses_links_out_and_missing_files(tmp_path):
    folder = _folder(tmp_path, "ok-skill", "name: ok-skill\ndescription: d\n")
    (tmp_path / "secret").write_text("s")
    os.symlink(tmp_path / "secret", folder / "notes.md")
    assert any("leads outside" in p for p in validate_agent_skill_dir(folder))
    assert validate_agent_skill_dir(tmp_path / "none") == [f"{tmp_path / 'none'} is not a directory"]
    empty = tmp_path / "empty-skill"
    empty.mkdir()
    assert "does not exist" in validate_agent_skill_dir(empty)[0]


def test_plain_markdown_imports_as_a_draft(tmp_path):
    (tmp_path / "wiki.md").write_text(
        "# Use Cooperative Groups for Grid Sync!\n\nReplaces two launches with one grid-wide barrier. Use it when a\n"
        "reduction needs a second pass.\n\n## Steps\n1. Launch cooperatively.\n")
    (tmp_path / "tagged.md").write_text(
        "---\ndescription: Tiles in shared memory. Use it for GEMM.\n---\n# Tiling\nbody\n")
    wiki, tagged = sorted(read_agent_skills(tmp_path, max_bytes=LIMIT), key=lambda s: s.name)[::-1]
    assert (wiki.name, wiki.status, wiki.provenance.source) == \
        ("use-cooperative-groups-for-grid-sync", "draft", "imported")
    assert wiki.description == \
        "Replaces two launches with one grid-wide barrier. Use it when a reduction needs a second pass."
    assert wiki.body.startswith("Replaces two launches") and "## Steps" in wiki.body
    assert (tagged.name, tagged.status, tagged.body) == ("tiling", "draft", "body\n")
    assert tagged.description == "Tiles in shared memory. Use it for GEMM."


def test_bad_imports_raise_clear_errors(tmp_path):
    skill = make_skill()
    good = write_skill(tmp_path / "a", skill)
    with pytest.raises(NotFound):
        read_agent_skills(tmp_path / "nothing", max_bytes=LIMIT)
    # an example path in the metadata that escapes the folder
    export_agent_skills([skill.model_copy(update={"name": "esc-skill"})], tmp_path / "b")
    md = tmp_path / "b" / "esc-skill" / "SKILL.md"
    md.write_text(md.read_text().replace('"solution": "examples/after.py"', '"solution": "../../../etc/passwd"'))
    with pytest.raises(SkillFormatError, match="escapes"):
        read_agent_skills(tmp_path / "b", max_bytes=LIMIT)
    # a SKILL.md that links outside its folder
    linked = tmp_path / "c" / "link-skill"
    linked.mkdir(parents=True)
    os.symlink(good / "SKILL.md", linked / "SKILL.md")
    with pytest.raises(InvalidInput, match="leads outside"):
        read_agent_skills(tmp_path / "c", max_bytes=LIMIT)
    # huge files
    with pytest.raises(LimitExceeded, match="limit is 1000"):
        read_agent_skills(good, max_bytes=1000)
    # invalid frontmatter and duplicate names: every problem reported, nothing returned
    mixed = tmp_path / "d"
    write_skill(mixed, skill)
    (mixed / "broken.md").write_text("---\nname: [unclosed\n---\n")
    (mixed / "copy.md").write_text(f"---\nname: {skill.name}\ndescription: Same name. Use it twice.\n---\nx\n")
    with pytest.raises(InvalidInput, match="2 problems") as e:
        read_agent_skills(mixed, max_bytes=LIMIT)
    assert "invalid YAML" in e.value.message and "duplicate skill name 'scale-in-one-pass'" in e.value.message
    renamed = tmp_path / "e" / "wrong-folder"
    renamed.parent.mkdir()
    good.rename(renamed)
    with pytest.raises(SkillFormatError, match="folder is named 'wrong-folder'"):
        read_agent_skills(renamed, max_bytes=LIMIT)


def test_names_that_escape_and_folders_without_frontmatter_are_refused(tmp_path):
    evil = _folder(tmp_path / "a", "evil", "name: ../../evil\ndescription: Use it when escaping.\n")
    with pytest.raises(SkillFormatError, match="field 'name'"):
        read_agent_skills(evil, max_bytes=LIMIT)
    bare = tmp_path / "b" / "bare-skill"
    bare.mkdir(parents=True)
    (bare / "SKILL.md").write_text("# Bare\nNo frontmatter here.\n")
    with pytest.raises(SkillFormatError, match="no YAML frontmatter"):
        read_agent_skills(bare, max_bytes=LIMIT)
    with pytest.raises(InvalidInput, match="not a directory"):
        export_agent_skills([make_skill()], bare / "SKILL.md")
