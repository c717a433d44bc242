"""JSONL export and import of a whole ledger.

One record per line, ``{"kind": ..., "record": {...}}``, after a header line.
Export writes every technique, task, attempt (parents before children),
experience, skill version and feedback record; importing the file into an
empty store and exporting again yields the same bytes. Import validates every
line before writing anything and refuses the whole file, naming the line,
when one is bad: nothing is ever half-imported.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from skillbase.memory.ledger import Ledger
from skillbase.memory.records import TaskRecord, parse_signature
from skillbase.memory.techniques import Vocabulary

from skillbase.errors import InvalidInput
from skillbase.models import Attempt, Experience, Feedback, ProfileReport, SkillVersion, Technique

FORMAT = "skillbase-memory"
FORMAT_VERSION = 1
_MODELS = {
    "technique": Technique,
    "task": TaskRecord,
    "attempt": Attempt,
    "experience": Experience,
    "skill_version": SkillVersion,
    "feedback": Feedback,
    "profile": ProfileReport,
}


def export_jsonl(ledger: Ledger, path: Path) -> int:
    """Write every record of the ledger to ``path`` (atomically); returns the
    number of records written (the header not counted)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    n = 0
    with ledger.snapshot() as cur, open(tmp, "w", encoding="utf-8") as f:
        header = {"format": FORMAT, "version": FORMAT_VERSION, "schema_version": ledger.schema_version}
        f.write(json.dumps(header, separators=(",", ":")) + "\n")
        for kind, record in ledger.iter_export_rows(cur):
            f.write('{"kind":"%s","record":%s}\n' % (kind, record))
            n += 1
    os.replace(tmp, path)
    return n


def read_jsonl(path: Path, ledger: Ledger) -> list[tuple[int, str, Any]]:
    """Parse and validate every line of an export against the ledger's
    vocabulary (plus the techniques the file itself adds); InvalidInput naming
    the first bad line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInput(f"cannot read {path}: {e}") from e
    if not lines:
        raise InvalidInput(f"{path} is empty", hint="export a store with export_jsonl() first")
    _check_header(lines[0], path)
    records: list[tuple[int, str, Any]] = []
    for no, line in enumerate(lines[1:], start=2):
        if line.strip():
            records.append((no, *_parse_line(line, no)))
    vocab = Vocabulary(ledger.list_techniques())
    for no, kind, rec in records:
        if kind == "technique":
            _refuse(no, lambda: vocab.add(rec) if rec.name not in vocab else None)
    checked = []
    for no, kind, rec in records:
        checked.append((no, kind, _refuse(no, lambda: _check_record(ledger, vocab, kind, rec))))
    _check_parents(checked)
    return checked


def _check_header(line: str, path: Path) -> None:
    try:
        header = json.loads(line)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"line 1 of {path}: not JSON ({e})", hint="is this a skillbase memory export?") from e
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InvalidInput(f"line 1 of {path}: not a {FORMAT} header", hint="is this a skillbase memory export?")
    if header.get("version") != FORMAT_VERSION:
        raise InvalidInput(
            f"line 1 of {path}: export format version {header.get('version')!r}, expected {FORMAT_VERSION}"
        )


def _parse_line(line: str, no: int) -> tuple[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"line {no}: not JSON ({e.msg} at column {e.colno})", hint="nothing was imported") from e
    if not isinstance(obj, dict) or set(obj) != {"kind", "record"}:
        raise InvalidInput(f"line {no}: expected an object with 'kind' and 'record'", hint="nothing was imported")
    model = _MODELS.get(obj["kind"])
    if model is None:
        raise InvalidInput(
            f"line {no}: unknown kind {obj['kind']!r}", hint=f"one of {', '.join(_MODELS)}; nothing was imported"
        )
    try:
        return obj["kind"], model.model_validate(obj["record"])
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "record"
        raise InvalidInput(
            f"line {no}: invalid {obj['kind']} ({where}: {first['msg']})", hint="nothing was imported"
        ) from e


def _refuse(no: int, fn):
    try:
        return fn()
    except InvalidInput as e:
        raise type(e)(f"line {no}: {e.message}", hint="nothing was imported") from e


def _check_record(ledger: Ledger, vocab: Vocabulary, kind: str, rec: Any) -> Any:
    if kind == "attempt":
        return ledger.validate_attempt(rec, vocab)
    if kind == "experience":
        return ledger.validate_experience(rec, vocab)
    if kind == "skill_version":
        skill = ledger.validate_skill(rec.skill, vocab)
        if (skill.name, skill.version, skill.status) != (rec.name, rec.version, rec.status):
            raise InvalidInput(f"skill version {rec.name} v{rec.version} disagrees with the skill it carries")
        return rec.model_copy(update={"skill": skill})
    if kind == "task":
        if parse_signature(rec.signature) != (rec.family, rec.dtype, rec.regime):
            raise InvalidInput(f"task {rec.name}: family/dtype/regime disagree with signature {rec.signature!r}")
        return rec
    if kind == "feedback" and rec.item_kind == "technique":
        return rec.model_copy(update={"item_id": vocab.canonical(rec.item_id)})
    return rec


def _check_parents(records: list[tuple[int, str, Any]]) -> None:
    # A parent must come before its child in the file (export guarantees it)
    # unless it is already in the store; the ledger checks the latter.
    seen: dict[str, int] = {}
    for no, kind, rec in records:
        if kind == "attempt":
            seen.setdefault(rec.id, no)
    for no, kind, rec in records:
        if kind == "attempt" and rec.parent_id in seen and seen[rec.parent_id] > no:
            raise InvalidInput(
                f"line {no}: attempt {rec.id} comes before its parent {rec.parent_id} (line {seen[rec.parent_id]})",
                hint="put parents first; nothing was imported",
            )


def import_jsonl(ledger: Ledger, path: Path) -> int:
    """Validate the whole file, then add its records in one transaction;
    returns how many records were new. Refuses (InvalidInput naming the line)
    rather than importing part of a file."""
    return ledger.import_records(read_jsonl(path, ledger))
