"""Vector search: chroma kNN over skills, experiences and attempts.

The query's text (its words plus a structural summary of the task, candidate
and report) is embedded once; each collection is searched through the Store
(which catches its index up with the ledger first). Deprecated skills and
failed attempts are filtered out; the caller may add its own metadata filter.
"""

from __future__ import annotations

from typing import Any

from skillbase.retrievers.hits import Hit, combine_where
from skillbase.retrievers.query import Query

COLLECTION = {"skill": "skills", "experience": "experiences", "attempt": "attempts"}
DEFAULT_WHERE: dict[str, dict[str, Any] | None] = {
    "skill": {"status": {"$ne": "deprecated"}},
    "experience": None,
    "attempt": {"verdict": "correct"},
}


class VectorRetriever:
    """kNN through ``store.search``."""

    def __init__(self, store):
        self.store = store

    def search(self, q: Query, kind: str, n: int, where: dict[str, Any] | None = None) -> list[Hit]:
        """Up to ``n`` records of ``kind`` nearest in meaning to the query, best first."""
        flt = combine_where(DEFAULT_WHERE[kind], where)
        # Candidates for fusion: the matches among the 2048 nearest are enough
        # (lexical and graph lists add the rest), and a full filtered scan
        # costs ~0.4 s at 100k attempts. A caller's own filter (one suite run's
        # attempts) may match only records far from the query: scan them all.
        hits = self.store.search(
            COLLECTION[kind], q.text, k=n, where=flt, documents=False, exhaustive=where is not None
        )
        return [Hit(kind, h.id, h.score, f"similarity {h.score:.2f}", h.metadata) for h in hits]
