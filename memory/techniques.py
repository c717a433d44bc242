"""The controlled technique vocabulary: canonical names, aliases and lookup.

Attempts, experiences and skills name techniques freely ("smem tiling",
"Shared-Memory Tiling", "tiling"); the memory stores only canonical names so
the graph's statistics for one idea are never split across spellings.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path

import yaml

from skillbase.errors import InvalidInput, UnknownTechnique
from skillbase.models import Technique

_SEPARATORS = re.compile(r"[\s\-_.]+")


def technique_key(name: str) -> str:
    """Lookup key of a technique spelling: lowercase, separators dropped.

    ``"Shared-Memory Tiling"``, ``"shared_memory.tiling"`` and
    ``"sharedmemorytiling"`` share one key.
    """
    return _SEPARATORS.sub("", name.strip().lower())


def load_seed_techniques(path: Path) -> list[Technique]:
    """Techniques from a YAML list (the format of ``seeds/techniques.yaml``)."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise InvalidInput(f"cannot read the technique vocabulary {path}: {e}") from e
    if not isinstance(data, list):
        raise InvalidInput(f"{path} must hold a YAML list of techniques")
    return [Technique.model_validate(item) for item in data]


class Vocabulary:
    """An in-memory view of the technique table for fast canonicalization.

    Built from ``Technique`` records; the ledger owns persistence and rebuilds
    this view whenever the table changes.
    """

    def __init__(self, techniques: Iterable[Technique] = ()):
        self._by_name: dict[str, Technique] = {}
        self._by_key: dict[str, str] = {}
        for t in techniques:
            self.add(t)

    def add(self, t: Technique) -> None:
        """Register a technique and its aliases; a spelling already owned by
        another technique raises InvalidInput rather than silently moving."""
        for spelling in [t.name, *t.aliases]:
            key = technique_key(spelling)
            owner = self._by_key.get(key)
            if owner is not None and owner != t.name:
                raise InvalidInput(
                    f"alias {spelling!r} of technique {t.name!r} already names {owner!r}",
                    hint="drop the alias or add it to the existing technique instead",
                )
        self._by_name[t.name] = t
        for spelling in [t.name, *t.aliases]:
            self._by_key[technique_key(spelling)] = t.name

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> Technique | None:
        return self._by_name.get(name)

    def all(self) -> list[Technique]:
        return sorted(self._by_name.values(), key=lambda t: t.name)

    def canonical(self, name: str) -> str:
        """The canonical name for a spelling or alias; UnknownTechnique (with
        the closest known names) when nothing matches."""
        if not isinstance(name, str) or not name.strip():
            raise UnknownTechnique("a technique name must be a non-empty string")
        found = self._by_key.get(technique_key(name))
        if found is not None:
            return found
        close = self.closest(name)
        hint = f"did you mean {', '.join(close)}?" if close else "no known technique is close"
        raise UnknownTechnique(
            f"unknown technique {name!r}",
            hint=f"{hint} The vocabulary: the list_techniques tool (MCP), `skillbase techniques` (CLI), "
            "SkillBase.list_techniques() (Python).",
        )

    def canonical_list(self, names: Iterable[str]) -> list[str]:
        """Canonical names in first-seen order, duplicates removed."""
        out: list[str] = []
        for n in names:
            c = self.canonical(n)
            if c not in out:
                out.append(c)
        return out

    def closest(self, name: str, n: int = 3) -> list[str]:
        """Up to ``n`` canonical names whose spellings resemble ``name``."""
        key = technique_key(name)
        keys = difflib.get_close_matches(key, list(self._by_key), n=n * 3, cutoff=0.6)
        out: list[str] = []
        for k in keys:
            c = self._by_key[k]
            if c not in out:
                out.append(c)
        return out[:n]
