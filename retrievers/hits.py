"""The one record every retriever returns: a hit on a skill, experience or attempt."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("skill", "experience", "attempt")


@dataclass(slots=True)
class Hit:
    """One retriever's find: what, how strong (on the retriever's own scale) and why."""

    kind: str  # skill | experience | attempt
    id: str
    score: float
    note: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def combine_where(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """Both metadata filters (chroma ``$and``), or whichever is given."""
    if a and b:
        return {"$and": [a, b]}
    return a or b
