"""Files of a skill folder, handled safely.

A skill folder holds ``SKILL.md`` and the files its examples name. Everything
here defends the reader and the writer: relative paths must stay inside the
folder (no ``..``, no absolute paths, no symlinks that lead out), reads are
size-limited and UTF-8 only, and a set of folders is written to a staging
directory first and moved into place only when every file is written.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path, PurePosixPath

from skillbase.errors import InvalidInput, LimitExceeded, NotFound

SKILL_FILE = "SKILL.md"
MAX_FILES = 32  # example files per skill
MAX_PATH_CHARS = 200
MAX_PATH_DEPTH = 4


def check_relative_path(rel: object, *, where: str) -> str:
    """``rel`` as a clean POSIX path relative to a skill folder, or InvalidInput.

    Refused: absolute paths, ``..`` or ``.`` parts, backslashes, hidden parts,
    empty parts, control characters, more than four levels, and ``SKILL.md``
    itself. ``where`` names the file and field for the error message.
    """
    if not isinstance(rel, str) or not rel.strip():
        raise InvalidInput(f"{where}: a file path must be a non-empty string, got {rel!r}")
    bad = (
        len(rel) > MAX_PATH_CHARS
        or "\\" in rel
        or any(ord(c) < 32 for c in rel)
        or rel.startswith("/")
        or (len(rel) > 1 and rel[1] == ":")
    )
    parts = rel.split("/")
    if bad or any(p in ("", ".", "..") or p.startswith(".") for p in parts) or len(parts) > MAX_PATH_DEPTH:
        raise InvalidInput(
            f"{where}: path {rel!r} escapes or is not a plain path inside the skill folder",
            hint="use a relative path such as examples/after.py (no '..', no absolute paths, no hidden parts)",
        )
    if rel == SKILL_FILE:
        raise InvalidInput(f"{where}: {SKILL_FILE} cannot be an example file")
    return str(PurePosixPath(rel))


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` (symlinks resolved) lies inside ``root`` (resolved)."""
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def read_text_limited(path: Path, *, root: Path, max_bytes: int, what: str) -> str:
    """The UTF-8 text of ``path``, which must be a regular file inside ``root``.

    NotFound when it does not exist, InvalidInput when it is a symlink leading
    out of ``root``, not a regular file or not UTF-8, LimitExceeded when it is
    larger than ``max_bytes`` (checked before reading, and again while reading
    so a growing file cannot slip through).
    """
    if not path.exists() and not path.is_symlink():
        raise NotFound(f"{what} {str(path)!r} does not exist")
    if not inside(path, root):
        raise InvalidInput(
            f"{what} {str(path)!r} is a link that leads outside {str(root)!r}",
            hint="copy the file into the skill folder instead of linking to it",
        )
    if not path.is_file():
        raise InvalidInput(f"{what} {str(path)!r} is not a regular file")
    size = path.stat().st_size
    if size > max_bytes:
        raise LimitExceeded(
            f"{what} {str(path)!r} is {size} bytes; the limit is {max_bytes}",
            hint="trim the file or raise SKILLBASE_MAX_SOURCE_BYTES",
        )
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise LimitExceeded(f"{what} {str(path)!r} is larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInput(f"{what} {str(path)!r} is not UTF-8 text: {e}") from e


def check_files(files: dict[str, str], *, max_bytes: int, where: str) -> None:
    """Validate a skill's ``files`` mapping: safe paths, at most MAX_FILES, each within ``max_bytes``."""
    if len(files) > MAX_FILES:
        raise LimitExceeded(f"{where}: {len(files)} files; the limit is {MAX_FILES}")
    for rel, text in files.items():
        check_relative_path(rel, where=where)
        n = len(text.encode("utf-8", errors="replace"))
        if n > max_bytes:
            raise LimitExceeded(
                f"{where}: file {rel!r} is {n} bytes; the limit is {max_bytes}",
                hint="trim the file or raise SKILLBASE_MAX_SOURCE_BYTES",
            )


def write_folder(folder: Path, files: dict[str, str]) -> None:
    """Write ``files`` (relative path -> text) under ``folder``, which must not exist yet."""
    folder.mkdir(parents=False)
    for rel, text in files.items():
        target = folder / (rel if rel == SKILL_FILE else check_relative_path(rel, where=str(folder)))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


class Staging:
    """Build folders under ``out_dir/.skillbase-staging-*`` and move them into place together.

    Use as a context manager; ``folder(name)`` gives a fresh path to fill, and
    ``commit(overwrite)`` moves every staged folder to ``out_dir/<name>``. If
    anything fails before ``commit``, the staging directory is removed and
    ``out_dir`` is left as it was.
    """

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.root = out_dir / f".skillbase-staging-{uuid.uuid4().hex[:12]}"
        self.names: list[str] = []

    def __enter__(self) -> "Staging":
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise InvalidInput(f"{str(self.out_dir)!r} exists and is not a directory")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.root.mkdir()
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def folder(self, name: str) -> Path:
        """Path of the staged folder for ``name`` (not created)."""
        self.names.append(name)
        return self.root / name

    def check_targets(self, overwrite: bool) -> None:
        """InvalidInput when a target folder exists and ``overwrite`` is false (called before any move)."""
        taken = [n for n in self.names if (self.out_dir / n).exists() or (self.out_dir / n).is_symlink()]
        if taken and not overwrite:
            raise InvalidInput(
                f"{len(taken)} folder(s) already exist in {str(self.out_dir)!r}: {', '.join(taken[:5])}",
                hint="choose an empty directory or pass overwrite=True",
            )

    def commit(self, overwrite: bool) -> list[Path]:
        """Move every staged folder into ``out_dir``; returns the final paths."""
        self.check_targets(overwrite)
        old = self.root / ".replaced"
        out = []
        for name in self.names:
            target = self.out_dir / name
            if target.exists() or target.is_symlink():
                old.mkdir(exist_ok=True)  # removed with the staging directory on exit
                os.replace(target, old / name)
            os.replace(self.root / name, target)
            out.append(target)
        return out
