"""Cached reads of what every recall needs: the skills, the technique
vocabulary, and experience records by id.

Skills and techniques change rarely, so they are read once and re-read only
when the ledger's change log shows a skill or technique write. Experiences
never change once written (the ledger refuses a new version of an id), so a
bounded cache of them by id is always valid.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from skillbase.retrievers.query import TechniqueMatcher

from skillbase.models import Experience, Skill, Technique

EXPERIENCE_CACHE = 4096
# Aliases that usually name a data type or something else, not the technique.
_AMBIGUOUS_ALIASES = {"fp16", "bf16", "tf32", "int8", "fp8", "sol", "simplify", "occupancy", "unroll"}


class Catalog:
    """Skills, techniques and experiences of one store, cached."""

    def __init__(self, store):
        self.store = store
        self._lock = threading.RLock()
        self._seq = -1
        self._skills: dict[str, Skill] = {}
        self._techniques: dict[str, Technique] = {}
        self._matcher: TechniqueMatcher | None = None
        self._experiences: OrderedDict[str, Experience] = OrderedDict()
        self.version = 0  # counts reloads of the skills and techniques: answers derived from them key on it

    def refresh(self) -> None:
        """Re-read skills and techniques if the ledger changed them. While another thread is
        refreshing, a loaded catalog is used as it is (it is at most that refresh behind)."""
        if self._seq >= 0 and self._seq >= self.store.seq:  # (a recall's pinned seq may be behind it)
            return
        if not self._lock.acquire(blocking=self._seq < 0):
            return
        try:
            self._refresh()
        finally:
            self._lock.release()

    def _refresh(self) -> None:
        target = self.store.seq
        if self._seq >= target:
            return
        dirty = self._seq < 0
        seq = max(self._seq, 0)
        while not dirty and seq < target:
            changes = self.store.changes(after=seq, limit=5000)
            if not changes:
                break
            dirty = any(c.kind in ("skill", "technique") for c in changes)
            seq = changes[-1].seq
        if dirty:
            self._skills = {s.name: s for s in self.store.list_skills()}
            self._techniques = {t.name: t for t in self.store.list_techniques()}
            self._matcher = TechniqueMatcher(
                t.model_copy(update={"aliases": [a for a in t.aliases if a.lower() not in _AMBIGUOUS_ALIASES]})
                for t in self._techniques.values()
            )
            self.version += 1
        self._seq = target

    @property
    def skills(self) -> dict[str, Skill]:
        self.refresh()
        return self._skills

    @property
    def techniques(self) -> dict[str, Technique]:
        self.refresh()
        return self._techniques

    @property
    def matcher(self) -> TechniqueMatcher:
        self.refresh()
        assert self._matcher is not None
        return self._matcher

    def title(self, technique: str) -> str:
        t = self.techniques.get(technique)
        return t.title if t else technique.replace("-", " ")

    def experiences(self, ids: list[str]) -> dict[str, Experience]:
        """Experiences by id (unknown ids are left out)."""
        with self._lock:
            missing = [i for i in ids if i not in self._experiences]
        fetched = self.store.ledger.get_experiences(missing) if missing else []
        with self._lock:
            for e in fetched:
                self._experiences[e.id] = e
            while len(self._experiences) > EXPERIENCE_CACHE:
                self._experiences.popitem(last=False)
            return {i: self._experiences[i] for i in ids if i in self._experiences}
