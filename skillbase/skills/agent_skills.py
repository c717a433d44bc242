"""Agent Skills: export approved skills as folders Claude Code loads from ``.claude/skills/``, and import them back.

The format (agentskills.io specification, and Anthropic's rules for Claude):
a folder per skill holding ``SKILL.md``, whose YAML frontmatter allows only
``name``, ``description``, ``license``, ``compatibility``, ``metadata`` and
``allowed-tools``:

- ``name``: 1-64 characters of lowercase letters, digits and single hyphens,
  not starting or ending with a hyphen, equal to the folder name, and free of
  the reserved words "anthropic" and "claude";
- ``description``: non-empty, at most 1024 characters, no XML-like text
  (no '<' or '>');
- ``compatibility``: 1-500 characters when present; ``metadata``: a map of
  string keys to string values; ``allowed-tools``: a string or a list of strings;
- then the markdown body (the instructions).

Our other fields go under ``metadata`` as ``skillbase-<field>`` keys (strings;
JSON for lists and mappings), so loaders that know only name and description
still load the skill and ``read_agent_skills`` restores it exactly. A
description with '<' or '>' is rewritten for the frontmatter and kept intact
in ``metadata['skillbase-description']``. Example files are siblings of
``SKILL.md`` at their relative paths.

    result = export_agent_skills(store.list_skills("approved"), Path(".claude/skills"))
    problems = validate_agent_skill_dir(Path(".claude/skills/online-softmax-one-pass"))  # [] when valid
    skills = read_agent_skills(Path(".claude/skills"), max_bytes=settings.max_source_bytes)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skillbase.errors import InvalidInput, LimitExceeded, NotFound, SkillbaseError
from skillbase.models import Provenance, Record, Skill
from skillbase.skills.files import (
    SKILL_FILE,
    Staging,
    check_files,
    check_relative_path,
    inside,
    read_text_limited,
    write_folder,
)
from skillbase.skills.markdown import (
    FRONTMATTER_KEYS,
    SkillFormatError,
    dump_yaml,
    emit_key,
    example_file_paths,
    skill_from_frontmatter,
    split_frontmatter,
)

ALLOWED_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
RESERVED_WORDS = ("anthropic", "claude")
MAX_NAME, MAX_DESCRIPTION, MAX_COMPATIBILITY = 64, 1024, 500
PREFIX = "skillbase-"
# Every front-matter field but the two the Agent Skills format has of its own, in the same order.
META_FIELDS = tuple(k for k in FRONTMATTER_KEYS if k not in ("name", "description"))
MAX_IMPORT_ENTRIES = 2000
_STR_FIELDS = ("expected_effect", "status")
_ANGLE = [
    ("<->", "↔"),
    ("<=", "≤"),
    (">=", "≥"),
    ("->", "→"),
    ("<-", "←"),
    (" < ", " less than "),
    (" > ", " greater than "),
    ("<", "‹"),
    (">", "›"),
]


# ---------------------------------------------------------------------------
# Validation (the strict check every exported folder passes)
# ---------------------------------------------------------------------------


def _check_name(name: Any, folder: Path | None) -> list[str]:
    if not isinstance(name, str) or not name:
        return ["'name' must be a non-empty string"]
    out = []
    if len(name) > MAX_NAME:
        out.append(f"'name' is {len(name)} characters; the limit is {MAX_NAME}")
    if not NAME_RE.match(name):
        out.append(
            f"'name' {name!r} must be lowercase letters, digits and single hyphens, "
            "not starting or ending with a hyphen"
        )
    out += [f"'name' {name!r} contains the reserved word {w!r}" for w in RESERVED_WORDS if w in name]
    if folder is not None and folder.name != name:
        out.append(f"'name' {name!r} must equal the folder name {folder.name!r}")
    return out


def _check_description(desc: Any) -> list[str]:
    if not isinstance(desc, str) or not desc.strip():
        return ["'description' must be a non-empty string saying what the skill does and when to use it"]
    out = []
    if len(desc) > MAX_DESCRIPTION:
        out.append(f"'description' is {len(desc)} characters; the limit is {MAX_DESCRIPTION}")
    if "<" in desc or ">" in desc:
        out.append("'description' must not contain '<' or '>' (no XML-like text)")
    return out


def _check_optional(front: dict[str, Any]) -> list[str]:
    out = []
    if "compatibility" in front:
        c = front["compatibility"]
        if not isinstance(c, str) or not 1 <= len(c) <= MAX_COMPATIBILITY:
            out.append(f"'compatibility' must be a string of 1-{MAX_COMPATIBILITY} characters")
    if "license" in front and (not isinstance(front["license"], str) or not front["license"].strip()):
        out.append("'license' must be a non-empty string")
    if "allowed-tools" in front:
        t = front["allowed-tools"]
        if not (isinstance(t, str) or (isinstance(t, list) and all(isinstance(x, str) for x in t))):
            out.append("'allowed-tools' must be a string or a list of strings")
    if "metadata" in front:
        m = front["metadata"]
        if not isinstance(m, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in m.items()):
            out.append("'metadata' must map string keys to string values")
    return out


def _links_out(folder: Path) -> list[str]:
    return [
        f"{p.relative_to(folder)} is a link that leads outside the folder"
        for p in sorted(folder.rglob("*"))
        if p.is_symlink() and not inside(p, folder)
    ]


def validate_agent_skill_dir(path: Path, *, max_bytes: int = 256_000) -> list[str]:
    """Every way the folder breaks the Agent Skills rules (see the module docstring); [] when valid.

    Also refused: a ``SKILL.md`` over ``max_bytes``, not UTF-8, with duplicate
    YAML keys or aliases, with an empty body, and links leading out of the folder.
    """
    folder = Path(path)
    if not folder.is_dir():
        return [f"{folder} is not a directory"]
    try:
        text = read_text_limited(folder / SKILL_FILE, root=folder, max_bytes=max_bytes, what=SKILL_FILE)
        front, body = split_frontmatter(text, source=str(folder / SKILL_FILE))
    except SkillbaseError as e:
        return [str(e)]
    if front is None:
        return [f"{SKILL_FILE} has no YAML frontmatter"]
    problems = [
        f"frontmatter key {k!r} is not allowed (allowed: {', '.join(ALLOWED_KEYS)})"
        for k in front
        if k not in ALLOWED_KEYS
    ]
    problems += _check_name(front.get("name"), folder) if "name" in front else ["missing required 'name'"]
    problems += (
        _check_description(front.get("description")) if "description" in front else ["missing required 'description'"]
    )
    problems += _check_optional(front)
    if not body.strip():
        problems.append(f"{SKILL_FILE} has no instructions after the frontmatter")
    return problems + _links_out(folder)


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------


def safe_description(description: str) -> str:
    """The description with '<' and '>' rewritten ('>=' as '≥', ' < ' as ' less than ', ...)."""
    for old, new in _ANGLE:
        description = description.replace(old, new)
    return description


def _compatibility(skill: Skill) -> str:
    langs = " and ".join(skill.languages) or "GPU"
    arch = skill.applies_when.min_arch
    where = f"NVIDIA GPUs of {arch} or newer" if arch else "NVIDIA GPUs"
    return (
        f"{langs} kernels for {where}; the examples are KernelBench-format tasks and solutions that "
        "skillbase (skillbase bench / compile) verifies and times."
    )


def to_agent_skill_md(skill: Skill) -> str:
    """The ``SKILL.md`` text of ``skill`` in Agent Skills form (our fields under ``metadata``)."""
    data = skill.model_dump(mode="json")
    meta: dict[str, str] = {}
    safe = safe_description(skill.description)
    if safe != skill.description:
        meta[PREFIX + "description"] = skill.description
    for f in META_FIELDS:
        value = data[f]
        if f == "superseded_by" and value is None:
            continue
        meta[PREFIX + f] = value if f in _STR_FIELDS else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if len(safe) > MAX_DESCRIPTION:
        raise InvalidInput(
            f"skill {skill.name}: the description is {len(safe)} characters once '<' and '>' are "
            f"rewritten; the limit is {MAX_DESCRIPTION}",
            hint="shorten the description",
        )
    front = emit_key("name", skill.name) + emit_key("description", safe)
    front += emit_key("compatibility", _compatibility(skill))
    front += dump_yaml({"metadata": meta}, flow=False)
    return f"---\n{front}---\n{skill.body}"


class ExportResult(Record):
    """Where the folders went, which skills were exported and which were skipped (and why)."""

    out_dir: str
    exported: list[str]
    skipped: dict[str, str]


def export_agent_skills(
    skills: Iterable[Skill], out_dir: Path, *, overwrite: bool = False, max_bytes: int = 256_000
) -> ExportResult:
    """Write one Agent Skills folder per approved skill under ``out_dir`` (drafts and deprecated are skipped).

    Each folder holds ``SKILL.md`` and the skill's example files, and passes
    ``validate_agent_skill_dir``. Everything is built and validated in a
    staging directory first: on any error nothing lands in ``out_dir``.
    InvalidInput for duplicate names, unsafe file paths, a folder that exists
    (unless ``overwrite``) or a skill that cannot be made valid.
    """
    out_dir = Path(out_dir)
    chosen, skipped = [], {}
    for s in skills:
        if s.status != "approved":
            skipped[s.name] = f"status is {s.status}; only approved skills are exported"
        elif any(c.name == s.name for c in chosen):
            raise InvalidInput(f"two skills named {s.name!r} in one export")
        else:
            chosen.append(s)
    with Staging(out_dir) as staging:
        for s in chosen:
            check_files(s.files, max_bytes=max_bytes, where=f"skill {s.name}")
            folder = staging.folder(s.name)
            write_folder(folder, {SKILL_FILE: to_agent_skill_md(s), **s.files})
            problems = validate_agent_skill_dir(folder, max_bytes=max_bytes)
            if problems:
                raise InvalidInput(f"skill {s.name} would not be a valid Agent Skill: {'; '.join(problems)}")
        staging.commit(overwrite)
    return ExportResult(out_dir=str(out_dir), exported=[s.name for s in chosen], skipped=skipped)


# ---------------------------------------------------------------------------
# Import
# ---------------------------------------------------------------------------


def _decode_metadata(meta: dict[str, Any], source: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if not isinstance(key, str) or not key.startswith(PREFIX):
            continue  # another client's metadata
        f = key[len(PREFIX) :]
        if f not in META_FIELDS and f != "description":
            raise SkillFormatError(
                f"unknown metadata key {key!r}",
                source=source,
                field=f"metadata.{key}",
                hint=f"known: {', '.join(PREFIX + x for x in META_FIELDS)}",
            )
        if not isinstance(value, str):
            raise SkillFormatError(f"metadata {key!r} must be a string", source=source, field=f"metadata.{key}")
        if f in _STR_FIELDS or f == "description":
            out[f] = value
            continue
        try:
            out[f] = json.loads(value)
        except json.JSONDecodeError as e:
            raise SkillFormatError(
                f"metadata {key!r} is not valid JSON: {e}", source=source, field=f"metadata.{key}"
            ) from None
    return out


def _from_agent_frontmatter(front: dict[str, Any], body: str, source: str) -> Skill:
    bad = [k for k in front if k not in ALLOWED_KEYS]
    if bad:
        raise SkillFormatError(
            f"frontmatter key(s) {', '.join(map(repr, bad))} are not allowed",
            source=source,
            field=bad[0],
            hint=f"Agent Skills allow {', '.join(ALLOWED_KEYS)}",
        )
    meta = front.get("metadata") or {}
    if not isinstance(meta, dict):
        raise SkillFormatError("'metadata' must be a mapping", source=source, field="metadata")
    ours = _decode_metadata(meta, source)
    data = {"name": front.get("name"), "description": ours.pop("description", front.get("description")), **ours}
    if not ours:  # a skill from elsewhere: a draft we imported
        data.update(status="draft", provenance=Provenance(source="imported").model_dump())
    data = {k: v for k, v in data.items() if v is not None or k == "superseded_by"}
    return skill_from_frontmatter(data, body, source=source)


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    while len(slug) > MAX_NAME:
        slug = slug[:MAX_NAME].rsplit("-", 1)[0] if "-" in slug[:MAX_NAME] else slug[:MAX_NAME]
    return slug


def _derived(text: str, stem: str, source: str) -> tuple[str, str, str]:
    """(name, description, body) of markdown without a name: the name from its '# Title' (or the
    file name), the description from its first paragraph, the body after the title."""
    lines = text.split("\n")
    title_at = next((i for i, ln in enumerate(lines) if re.match(r"^#\s+\S", ln)), None)
    title = lines[title_at].lstrip("#").strip() if title_at is not None else stem
    body = "\n".join(lines[title_at + 1 :]).lstrip("\n") if title_at is not None else text
    name = _slug(title) or _slug(stem)
    if not name:
        raise SkillFormatError(
            "cannot derive a skill name from the title or the file name",
            source=source,
            field="name",
            hint="add a '# Title' line or frontmatter with a name",
        )
    para = re.split(r"\n\s*\n", re.sub(r"```.*?```", "", body, flags=re.S).strip())
    first = next((p for p in para if p.strip() and not p.lstrip().startswith(("#", "-", "*", "|", ">"))), "")
    return name, " ".join(first.split())[:MAX_DESCRIPTION] or f"{title}.", body


def parse_markdown_skill(text: str, *, source: str, folder: Path | None = None, stem: str = "skill") -> Skill:
    """A Skill from a markdown text in any form we import: Agent Skills frontmatter (ours or
    another client's) or our native SKILL.md frontmatter. A lone markdown file (``folder`` None)
    may lack frontmatter, or a name or description in it: it is then named after its '# Title'
    (or ``stem``), described by its first paragraph, and imported as a draft."""
    front, body = split_frontmatter(text, source=source)
    if folder is None and (front is None or "name" not in front or "description" not in front):
        name, description, derived_body = _derived(body, stem, source)
        if front is None or "name" not in front:
            body = derived_body
        front = {"name": name, "description": description, **(front or {})}
    if front is None:
        raise SkillFormatError(
            f"{SKILL_FILE} has no YAML frontmatter",
            source=source,
            hint="start it with '---', name and description, and '---'",
        )
    if "metadata" in front or set(front) <= set(ALLOWED_KEYS):
        skill = _from_agent_frontmatter(front, body, source)
    elif set(front) <= set(FRONTMATTER_KEYS):
        skill = skill_from_frontmatter(front, body, source=source)
    else:
        unknown = sorted(set(front) - set(ALLOWED_KEYS) - set(FRONTMATTER_KEYS))
        raise SkillFormatError(
            f"unknown frontmatter key(s): {', '.join(map(repr, unknown))}",
            source=source,
            field=unknown[0],
            hint=f"use Agent Skills keys ({', '.join(ALLOWED_KEYS)}) or skillbase's",
        )
    if folder is not None and folder.name != skill.name:
        raise SkillFormatError(
            f"the folder is named {folder.name!r} but the skill is {skill.name!r}",
            source=source,
            field="name",
            hint="the folder name must equal the skill name",
        )
    return skill


def _read_folder(folder: Path, root: Path, max_bytes: int) -> Skill:
    if not inside(folder, root):
        raise InvalidInput(f"{folder} is a link that leads outside {root}")
    links = _links_out(folder)
    if links:
        raise InvalidInput(f"{folder}: {links[0]}", hint="copy files into the skill folder instead of linking them")
    text = read_text_limited(folder / SKILL_FILE, root=folder, max_bytes=max_bytes, what=SKILL_FILE)
    skill = parse_markdown_skill(text, source=str(folder / SKILL_FILE), folder=folder)
    what = f"example file of {skill.name}"
    files = {
        rel: read_text_limited(folder / rel, root=folder, max_bytes=max_bytes, what=what)
        for rel in example_file_paths(skill, folder)
    }
    check_files(files, max_bytes=max_bytes, where=str(folder))
    return skill.model_copy(update={"files": files})


def _read_file(path: Path, root: Path, max_bytes: int) -> Skill:
    text = read_text_limited(path, root=root, max_bytes=max_bytes, what="markdown file")
    skill = parse_markdown_skill(text, source=str(path), stem=path.stem)
    for i, ex in enumerate(skill.examples):  # a lone file has no sibling files to bring along
        for key, value in ex.items():
            check_relative_path(value, where=f"{path}: examples[{i}].{key}")
    return skill


def _entries(path: Path) -> list[Path]:
    if path.is_file():
        return [path.parent] if path.name == SKILL_FILE else [path]
    if (path / SKILL_FILE).exists() or (path / SKILL_FILE).is_symlink():
        return [path]
    found = [
        p
        for p in sorted(path.iterdir())
        if not p.name.startswith(".")
        and ((p.is_dir() and (p / SKILL_FILE).exists()) or (p.is_file() and p.suffix.lower() == ".md"))
    ]
    if len(found) > MAX_IMPORT_ENTRIES:
        raise LimitExceeded(f"{path} holds {len(found)} skills; one import takes at most {MAX_IMPORT_ENTRIES}")
    return found


def read_agent_skills(path: Path, *, max_bytes: int) -> list[Skill]:
    """Every skill under ``path``, validated, without writing anything.

    ``path`` is a skill folder (``SKILL.md`` + example files), a directory of
    such folders and ``.md`` files, or one ``.md`` file. Every entry is read
    and checked before returning: invalid frontmatter, names that do not match
    their folder, duplicate names, example paths or links that lead out of a
    folder, and files over ``max_bytes`` are all reported (the only one
    re-raised as is, several together in one InvalidInput).
    """
    path = Path(path)
    if not path.exists():
        raise NotFound(f"nothing to import at {str(path)!r}")
    root = path if path.is_dir() else path.parent
    skills: list[Skill] = []
    problems: list[SkillbaseError] = []
    for entry in _entries(path):
        try:
            read = _read_folder if entry.is_dir() else _read_file
            skills.append(read(entry, root, max_bytes))
        except SkillbaseError as e:
            problems.append(e)
    where: dict[str, int] = {}
    for i, s in enumerate(skills):
        if s.name in where:
            problems.append(
                InvalidInput(f"duplicate skill name {s.name!r} in the import", hint="each skill needs its own name")
            )
        where.setdefault(s.name, i)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise InvalidInput(
            f"{len(problems)} problems in {str(path)!r}; nothing was imported: "
            + "; ".join(str(p) for p in problems[:8]),
            hint="fix every file listed, then import again",
        )
    if not skills:
        raise NotFound(
            f"no skills found under {str(path)!r}", hint=f"expected <name>/{SKILL_FILE} folders or .md files"
        )
    return skills


__all__ = [
    "ExportResult",
    "export_agent_skills",
    "parse_markdown_skill",
    "read_agent_skills",
    "safe_description",
    "to_agent_skill_md",
    "validate_agent_skill_dir",
]
