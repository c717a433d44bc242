"""SKILL.md, the on-disk form of a skill: YAML frontmatter, then the markdown body.

The frontmatter keys are the fields of ``skillbase.models.Skill`` except
``body`` (the markdown after the frontmatter) and ``files`` (the example files
beside ``SKILL.md``, loaded by ``read_skill_dir``). Parsing is strict: invalid
YAML, duplicate or unknown keys, YAML aliases, a missing ``name`` or
``description`` and any value the model refuses raise ``SkillFormatError``
naming the file and the field. Rendering is the inverse:
``parse_skill_md(render_skill_md(s)) == s`` (``files`` aside) and
``render_skill_md(parse_skill_md(x))`` is a fixed point.

    skill = read_skill_dir(Path("seeds/skills/online-softmax-one-pass"), max_bytes=settings.max_source_bytes)
    text = render_skill_md(skill)
    write_skill_dir(skill, Path("/tmp/online-softmax-one-pass"))
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from skillbase.errors import InvalidInput, LimitExceeded, NotFound
from skillbase.models import Skill
from skillbase.skills.files import (
    SKILL_FILE,
    Staging,
    check_files,
    check_relative_path,
    read_text_limited,
    write_folder,
)

FRONTMATTER_KEYS: tuple[str, ...] = (
    "name",
    "description",
    "techniques",
    "applies_when",
    "languages",
    "expected_effect",
    "pitfalls",
    "evidence",
    "examples",
    "status",
    "version",
    "provenance",
    "superseded_by",
)
REQUIRED_KEYS = ("name", "description")
EXAMPLE_FILE_KEYS = ("task", "solution")
_FOLDED_KEYS = ("description", "expected_effect")
_FOLD_WIDTH = 90  # folded descriptions: lines of at most 90 characters
_WIDE = 10**9  # never wrap plain scalars: one pitfall per line reads best


class SkillFormatError(InvalidInput):
    """A SKILL.md (or skill record) that cannot be read; ``source`` is the file, ``field`` the key at fault."""

    def __init__(self, message: str, *, source: str, field: str | None = None, hint: str | None = None):
        super().__init__(f"{source}: {message}", hint=hint)
        self.source = source
        self.field = field


# ---------------------------------------------------------------------------
# YAML, strictly
# ---------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and aliases (no billion-laughs expansion)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases (*name) are not allowed here", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (list, dict)):
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a scalar", key_node.start_mark
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml_mapping(text: str, *, source: str, line_offset: int = 1) -> dict[str, Any]:
    """Parse a frontmatter block into a dict (empty block -> {}); SkillFormatError otherwise."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1 + line_offset}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise SkillFormatError(
            f"invalid YAML in the frontmatter{where}: {problem}",
            source=source,
            hint="fix the YAML between the two '---' lines",
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SkillFormatError(f"the frontmatter must be a YAML mapping, not {type(data).__name__}", source=source)
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise SkillFormatError(f"frontmatter keys must be strings, got {bad[0]!r}", source=source, field=str(bad[0]))
    return data


def split_frontmatter(text: str, *, source: str) -> tuple[dict[str, Any] | None, str]:
    """(frontmatter, body) of a markdown text; frontmatter is None when the text has none.

    Line endings are normalized to ``\\n`` and a leading byte-order mark is dropped.
    """
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            data = load_yaml_mapping("\n".join(lines[1:i]), source=source)
            return data, "\n".join(lines[i + 1 :])
    raise SkillFormatError(
        "the frontmatter opened with '---' is never closed",
        source=source,
        hint="end the frontmatter with a line holding only '---'",
    )


# ---------------------------------------------------------------------------
# Parse
# ---------------------------------------------------------------------------


def _explain(e: ValidationError, source: str) -> SkillFormatError:
    errors = e.errors()
    first = errors[0]
    field = ".".join(str(p) for p in first["loc"]) or None
    if first["type"] == "extra_forbidden":
        message = f"unknown field {field!r}"
    else:
        message = f"field {field!r}: {first['msg']}"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return SkillFormatError(
        message + more, source=source, field=field, hint="see skillbase.models.Skill for the fields and their types"
    )


def skill_from_frontmatter(data: dict[str, Any], body: str, *, source: str) -> Skill:
    """Validate frontmatter keys and values into a Skill (``body`` attached); SkillFormatError otherwise."""
    unknown = [k for k in data if k not in FRONTMATTER_KEYS]
    if unknown:
        raise SkillFormatError(
            f"unknown frontmatter field(s): {', '.join(map(repr, unknown))}",
            source=source,
            field=unknown[0],
            hint=f"allowed fields: {', '.join(FRONTMATTER_KEYS)}",
        )
    for key in REQUIRED_KEYS:
        if key not in data:
            raise SkillFormatError(
                f"the frontmatter has no {key!r}",
                source=source,
                field=key,
                hint="every skill needs a name and a description",
            )
    try:
        return Skill.model_validate({**data, "body": body})
    except ValidationError as e:
        raise _explain(e, source) from None


def parse_skill_md(text: str, *, source: str = "<SKILL.md>", max_bytes: int | None = None) -> Skill:
    """The Skill in a SKILL.md text (``files`` empty). SkillFormatError names the file and the field at
    fault; LimitExceeded when the text is longer than ``max_bytes`` UTF-8 bytes."""
    if max_bytes is not None:
        n = len(text.encode("utf-8", errors="replace"))
        if n > max_bytes:
            raise LimitExceeded(
                f"{source}: {n} bytes; the limit is {max_bytes}",
                hint="trim the skill or raise SKILLBASE_MAX_SOURCE_BYTES",
            )
    data, body = split_frontmatter(text, source=source)
    if data is None:
        raise SkillFormatError(
            "no YAML frontmatter: a SKILL.md starts with a line '---'",
            source=source,
            hint="add a frontmatter with at least name and description",
        )
    return skill_from_frontmatter(data, body, source=source)


def read_skill_file(path: Path, *, max_bytes: int) -> Skill:
    """The Skill in one SKILL.md file (``files`` empty)."""
    text = read_text_limited(path, root=path.parent, max_bytes=max_bytes, what="skill file")
    return parse_skill_md(text, source=str(path))


def example_file_paths(skill: Skill, folder: Path | None = None) -> list[str]:
    """The relative file paths the skill's examples name, in order, without duplicates.

    A ``task`` value without a slash or a file suffix that is not a file in
    ``folder`` is a built-in task name, not a file. Unsafe paths raise
    SkillFormatError naming the example.
    """
    out: list[str] = []
    for i, ex in enumerate(skill.examples):
        for key in EXAMPLE_FILE_KEYS:
            value = ex.get(key)
            if value is None or (key == "task" and is_builtin_task_ref(value, folder)):
                continue
            try:
                rel = check_relative_path(value, where=f"examples[{i}].{key}")
            except InvalidInput as e:
                raise SkillFormatError(e.message, source=skill.name, field=f"examples.{i}.{key}", hint=e.hint) from None
            if rel not in out:
                out.append(rel)
    return out


def is_builtin_task_ref(value: str, folder: Path | None = None) -> bool:
    """Whether an example's ``task`` names a built-in task (``row_softmax``) rather than a file."""
    if "/" in value or "." in value:
        return False
    return folder is None or not (folder / value).is_file()


def read_skill_dir(folder: Path, *, max_bytes: int, missing_ok: bool = False) -> Skill:
    """A skill folder: ``SKILL.md`` plus the example files it names, loaded into ``Skill.files``.

    The folder name must equal the skill name. Example paths must stay inside
    the folder; a missing example file raises NotFound unless ``missing_ok``
    (lint reports it instead).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise NotFound(f"skill folder {str(folder)!r} does not exist or is not a directory")
    skill = read_skill_file(folder / SKILL_FILE, max_bytes=max_bytes)
    if folder.name != skill.name:
        raise SkillFormatError(
            f"the folder is named {folder.name!r} but the skill is {skill.name!r}",
            source=str(folder / SKILL_FILE),
            field="name",
            hint="rename the folder or the skill so they match",
        )
    files: dict[str, str] = {}
    for rel in example_file_paths(skill, folder):
        path = folder / rel
        if missing_ok and not path.exists() and not path.is_symlink():
            continue
        files[rel] = read_text_limited(path, root=folder, max_bytes=max_bytes, what=f"example file of {skill.name}")
    check_files(files, max_bytes=max_bytes, where=str(folder))
    return skill.model_copy(update={"files": files})


# ---------------------------------------------------------------------------
# Render
# ---------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Indents block sequences under their key, as people write them."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def _foldable(text: str) -> bool:
    # Folding turns each line break back into exactly one space, so only text whose
    # spaces are single, ASCII and not at either end survives the round trip.
    return (
        len(text) > 80
        and text == text.strip()
        and "  " not in text
        and all(c.isprintable() for c in text)
        and not any(c.isspace() and c != " " for c in text)
    )


def _folded(key: str, text: str) -> str:
    lines = textwrap.wrap(
        text,
        width=_FOLD_WIDTH,
        initial_indent="  ",
        subsequent_indent="  ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    return f"{key}: >-\n" + "\n".join(lines) + "\n"


def frontmatter_dict(skill: Skill) -> dict[str, Any]:
    """The frontmatter of a skill as plain data, in the canonical key order.

    Evidence entries leave out empty values; ``superseded_by`` appears only when set.
    """
    data = skill.model_dump(mode="json", exclude={"body", "files"})
    data["evidence"] = [{k: v for k, v in e.items() if v not in (None, "")} for e in data["evidence"]]
    if data.get("superseded_by") is None:
        data.pop("superseded_by", None)
    return {k: data[k] for k in FRONTMATTER_KEYS if k in data}


def dump_yaml(data: Any, *, flow: bool | None) -> str:
    """YAML of ``data`` without line wrapping; ``flow`` as PyYAML's default_flow_style."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=flow, width=_WIDE)


def emit_key(key: str, value: Any) -> str:
    """One top-level frontmatter entry in the seed layout (folded long text, flow lists)."""
    if key in _FOLDED_KEYS and isinstance(value, str) and _foldable(value):
        return _folded(key, value)
    if key == "pitfalls" and value:
        return dump_yaml({key: value}, flow=False)
    if key == "provenance":
        return f"{key}: " + dump_yaml(value, flow=True)
    return dump_yaml({key: value}, flow=None if isinstance(value, (list, dict)) else False)


def _render(skill: Skill, pretty: bool) -> str:
    data = frontmatter_dict(skill)
    if pretty:
        front = "".join(emit_key(k, v) for k, v in data.items())
    else:
        front = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=_WIDE)
    return f"---\n{front}---\n{skill.body}"


def render_skill_md(skill: Skill) -> str:
    """The SKILL.md text of a skill (``files`` are not part of it: they live beside it).

    The layout matches the seed skills (folded descriptions, flow lists); if a
    value would not survive that layout, plain YAML is used instead, so parsing
    the result always gives the skill back.
    """
    bare = skill.model_copy(update={"files": {}})
    text = _render(bare, pretty=True)
    try:
        if parse_skill_md(text, source=skill.name) == bare:
            return text
    except InvalidInput:
        pass
    return _render(bare, pretty=False)


def write_skill_dir(skill: Skill, folder: Path, *, overwrite: bool = False) -> Path:
    """Write ``SKILL.md`` and the skill's files to ``folder`` (named after the skill), all at once.

    InvalidInput when the folder exists and ``overwrite`` is false, or a file path is unsafe.
    """
    folder = Path(folder)
    if folder.name != skill.name:
        raise InvalidInput(f"the folder for skill {skill.name!r} must be named {skill.name!r}, not {folder.name!r}")
    files = {SKILL_FILE: render_skill_md(skill)}
    for rel, text in skill.files.items():
        files[check_relative_path(rel, where=f"skill {skill.name}")] = text
    with Staging(folder.parent) as staging:
        write_folder(staging.folder(skill.name), files)
        return staging.commit(overwrite)[0]
