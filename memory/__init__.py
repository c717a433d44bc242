"""skillbase's memory: a SQLite ledger (the truth), a chroma vector index and a
networkx reasoning graph derived from it, kept consistent by ``Store``.

    from skillbase.memory import Store
    store = Store.open(settings)
"""

from __future__ import annotations

from typing import Any

__all__ = ["Store", "Hit", "TechniqueValue", "StoreStats"]


def __getattr__(name: str) -> Any:
    # Lazy, so `import skillbase.memory.ledger` does not pay for chromadb and networkx.
    if name == "Store":
        from skillbase.memory.store import Store

        return Store
    if name == "Hit":
        from skillbase.memory.vectors import Hit

        return Hit
    if name == "TechniqueValue":
        from skillbase.memory.graph import TechniqueValue

        return TechniqueValue
    if name == "StoreStats":
        from skillbase.memory.records import StoreStats

        return StoreStats
    raise AttributeError(f"module 'memory' has no attribute {name!r}")
