"""SKILL.md parsing and rendering: exact round trips, and strict errors that name the file and field."""

import os

import pytest

from skillbase.errors import InvalidInput, LimitExceeded, NotFound
from skillbase.models import Evidence
from skillbase.skills.markdown import (SkillFormatError, parse_skill_md, read_skill_dir, render_skill_md,
                                       write_skill_dir)

from .factories import make_skill, write_skill

GOOD_FRONT = "---\nname: tiny-skill\ndescription: Does a thing. Use it when things need doing.\n"


def test_every_seed_round_trips_and_renders_stably(seed_skills_list):
    assert len(seed_skills_list) >= 36
    for skill in seed_skills_list:
        text = render_skill_md(skill)
        again = parse_skill_md(text, source=skill.name)
        assert again == skill.model_copy(update={"files": {}}), skill.name
        assert render_skill_md(again) == text, skill.name
        assert text.startswith(f"---\nname: {skill.name}\ndescription: >-\n"), skill.name  # the seed layout


@pytest.mark.parametrize("text", [
    "Colons: everywhere, 'quotes' and \"double\" ones; # not a comment; - not a list",
    "ünïcödé, tabs\tinside, and a trailing space ",
    "two  spaces and\nnewlines\n\nand a blank line",
    "- leads with a dash and is long enough to be folded across several lines of the frontmatter "
    "so that the folding path is the one exercised here, with > and < and {braces} and [brackets]",
    "x" * 300,
    "   leading spaces then a long sentence that goes on and on past eighty characters for sure ok",
])
def test_awkward_text_survives_the_round_trip(text):
    skill = make_skill(description=f"Use it when {text}", expected_effect=text, pitfalls=[text, "plain"],
                       evidence=[Evidence(attempt_id="att_1", gain=1.5, note=text)], body=f"{text}\n## Steps\n")
    out = parse_skill_md(render_skill_md(skill))
    assert out == skill.model_copy(update={"files": {}})
    assert render_skill_md(out) == render_skill_md(skill)


def test_body_keeps_horizontal_rules_and_crlf_is_normalized():
    text = GOOD_FRONT + "---\n## Steps\n---\nstill body\n"
    assert parse_skill_md(text).body == "## Steps\n---\nstill body\n"
    assert parse_skill_md(text.replace("\n", "\r\n")).body == "## Steps\n---\nstill body\n"


@pytest.mark.parametrize("text, field, words", [
    (GOOD_FRONT + "techniques: [a, b\n---\n", None, "invalid YAML in the frontmatter at line"),
    (GOOD_FRONT + "colour: blue\n---\n", "colour", "unknown frontmatter field(s): 'colour'"),
    (GOOD_FRONT + "applies_when: {families: [norm], flavour: x}\n---\n", "applies_when.flavour", "unknown field"),
    (GOOD_FRONT + "name: again\n---\n", None, "duplicate key 'name'"),
    (GOOD_FRONT + "pitfalls: &p [a]\nexamples: *p\n---\n", None, "aliases"),
    ("---\ndescription: Use it when.\n---\n", "name", "has no 'name'"),
    ("---\nname: Bad_Name\ndescription: Use it when.\n---\n", "name", "lowercase"),
    ("---\nname: ok\ndescription: " + "x" * 1025 + "\n---\n", "description", "limit is 1024"),
    (GOOD_FRONT + "status: shipped\n---\n", "status", "field 'status'"),
    (GOOD_FRONT + "version: many\n---\n", "version", "field 'version'"),
    (GOOD_FRONT + "body: smuggled\n---\n", "body", "unknown frontmatter field(s): 'body'"),
    ("---\nname: x\ndescription: y\n", None, "never closed"),
    ("# Just markdown\n", None, "no YAML frontmatter"),
    ("---\n- a list\n---\n", None, "must be a YAML mapping"),
])
def test_invalid_frontmatter_names_file_and_field(text, field, words):
    with pytest.raises(SkillFormatError) as e:
        parse_skill_md(text, source="skills/x/SKILL.md")
    assert e.value.message.startswith("skills/x/SKILL.md: ")
    assert words in e.value.message
    assert e.value.field == field


def test_size_limit_and_encoding(tmp_path):
    with pytest.raises(LimitExceeded, match="limit is 100"):
        parse_skill_md(GOOD_FRONT + "---\n" + "x" * 200, max_bytes=100)
    folder = tmp_path / "tiny-skill"
    folder.mkdir()
    (folder / "SKILL.md").write_text(GOOD_FRONT + "---\n" + "x" * 5000)
    with pytest.raises(LimitExceeded, match="limit is 1000"):
        read_skill_dir(folder, max_bytes=1000)
    (folder / "SKILL.md").write_bytes(GOOD_FRONT.encode() + b"---\n\xff\xfe")
    with pytest.raises(InvalidInput, match="not UTF-8"):
        read_skill_dir(folder, max_bytes=1000)


def test_skill_folder_round_trip_with_files(tmp_path):
    skill = make_skill(files={**make_skill().files, "examples/helper.txt": "kept"})
    folder = write_skill(tmp_path, skill)
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == \
        ["SKILL.md", "examples/after.py", "examples/helper.txt", "examples/task.py"]
    back = read_skill_dir(folder, max_bytes=100_000)
    named = {k: v for k, v in skill.files.items() if k != "examples/helper.txt"}  # only files examples name
    assert back == skill.model_copy(update={"files": named})
    with pytest.raises(InvalidInput, match="already exist"):
        write_skill_dir(skill, folder)
    write_skill_dir(skill.model_copy(update={"body": "## Steps\nnew\n"}), folder, overwrite=True)
    assert read_skill_dir(folder, max_bytes=100_000).body == "## Steps\nnew\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_unsafe_example_paths_and_folders(tmp_path):
    outside = tmp_path / "secret.py"
    outside.write_text("print('secret')")
    skill = make_skill()
    folder = write_skill(tmp_path, skill)
    (folder / "examples" / "after.py").unlink()
    os.symlink(outside, folder / "examples" / "after.py")
    with pytest.raises(InvalidInput, match="leads outside"):
        read_skill_dir(folder, max_bytes=100_000)
    for bad in ("../secret.py", "/etc/passwd", "examples/../../secret.py", ".hidden/x.py", "a\\b.py"):
        (folder / "SKILL.md").write_text(render_skill_md(skill.model_copy(update={
            "examples": [{"task": "examples/task.py", "solution": bad}]})))
        with pytest.raises(SkillFormatError, match="escapes") as e:
            read_skill_dir(folder, max_bytes=100_000)
        assert e.value.field == "examples.0.solution"
    renamed = folder.rename(tmp_path / "other-name")
    with pytest.raises(SkillFormatError, match="folder is named 'other-name'"):
        read_skill_dir(renamed, max_bytes=100_000)
    with pytest.raises(NotFound):
        read_skill_dir(tmp_path / "missing", max_bytes=100_000)
    with pytest.raises(InvalidInput, match="must be named"):
        write_skill_dir(skill, tmp_path / "wrong-folder")
