"""skillbase's retrievers: from "this task, this candidate, this profile" to the
few skills, experiences and next techniques worth reading.

    from skillbase.retrievers import Retriever
    retriever = Retriever(store, settings)
    result = retriever.recall(task=info, source=src, report=report, arch="sm_90")
    nexts = retriever.suggest(task=info, attempts=attempts)

Modules: features (static analysis of a candidate), query (one Query from any
inputs), vector, lexical (BM25), graph (technique values), gate (skill
applicability), hybrid (fusion, rerank, diversity), suggest (bandit over
techniques), retriever (the facade).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Retriever", "build_query", "code_features", "gate"]


def __getattr__(name: str) -> Any:
    # Lazy, so `import skillbase.retrievers.features` does not pull in chromadb or bm25s.
    if name == "Retriever":
        from skillbase.retrievers.retriever import Retriever

        return Retriever
    if name == "build_query":
        from skillbase.retrievers.query import build_query

        return build_query
    if name == "code_features":
        from skillbase.retrievers.features import code_features

        return code_features
    if name == "gate":
        from skillbase.retrievers.gate import gate

        return gate
    raise AttributeError(f"module 'retrievers' has no attribute {name!r}")
