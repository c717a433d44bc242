"""Catching the vector index up with the ledger's change log.

The only path by which chroma is written: read the changes after the seq the
index reflects, turn the records they name into documents, embed them (cache
first), upsert, and advance the seq. Upserts and deletes are idempotent, so a
batch interrupted by a crash is simply applied again by whoever comes next.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

import numpy as np
from skillbase.memory.documents import IndexDoc, attempt_doc, experience_doc, skill_doc
from skillbase.memory.embeddings import Embedder
from skillbase.memory.ledger import Ledger
from skillbase.memory.records import Change
from skillbase.memory.vectors import VectorIndex

INDEXED = ("attempt", "experience", "skill")
EMBED_SLICE = 32
COLLECTION_OF = {"attempt": "attempts", "experience": "experiences", "skill": "skills"}


def latest_ops(changes: list[Change]) -> dict[tuple[str, str], str]:
    """The last op ('put' or 'delete') of each indexed record (kind, id) the changes name."""
    return {(c.kind, c.item_id): c.op for c in changes if c.kind in INDEXED}


def plan(
    ledger: Ledger,
    changes: list[Change],
    known: dict[tuple[str, str], IndexDoc] | None = None,
) -> tuple[list[IndexDoc], dict[str, list[str]]]:
    """Documents to upsert and ids to delete (per collection) for a batch of
    changes; a record changed several times is indexed once, as it is now.
    ``known`` maps (collection, id) to the document of a record this process
    has just committed (records are immutable once stored), which spares
    reading it back from the ledger."""
    known = known or {}
    latest = latest_ops(changes)
    puts: dict[str, list[str]] = defaultdict(list)
    deletes: dict[str, list[str]] = defaultdict(list)
    docs: list[IndexDoc] = []
    for (kind, item_id), op in latest.items():
        doc = known.get((COLLECTION_OF[kind], item_id)) if op == "put" and kind != "skill" else None
        if doc is not None:
            docs.append(doc)
        else:
            (puts if op == "put" else deletes)[kind].append(item_id)
    docs += [attempt_doc(a) for a in ledger.get_attempts(puts["attempt"])]
    docs += [experience_doc(e) for e in ledger.get_experiences(puts["experience"])]
    for name in puts["skill"]:
        docs.append(skill_doc(ledger.get_skill(name)))
    found = {(d.collection, d.id) for d in docs}
    for kind in ("attempt", "experience"):
        gone = [i for i in puts[kind] if (COLLECTION_OF[kind], i) not in found]
        deletes[kind] += gone
    return docs, {COLLECTION_OF[k]: v for k, v in deletes.items() if v}


def embed_docs(embedder: Embedder, docs: list[IndexDoc]) -> np.ndarray:
    """Embeddings of documents in their order, each under its own token limit."""
    out: list[np.ndarray | None] = [None] * len(docs)
    groups: dict[int, list[int]] = defaultdict(list)
    for i, d in enumerate(docs):
        groups[d.max_tokens].append(i)
    for max_tokens, idx in groups.items():
        # In slices: a query embedding waiting for the model waits for one slice, not a backlog.
        for lo in range(0, len(idx), EMBED_SLICE):
            part = idx[lo : lo + EMBED_SLICE]
            vecs = embedder.embed([docs[i].text for i in part], max_tokens=max_tokens)
            for i, v in zip(part, vecs):
                out[i] = v
    return np.stack(out) if out else np.zeros((0, 0), dtype=np.float32)


def warm(embedder: Embedder, docs: list[IndexDoc]) -> None:
    """Embed documents into the cache ahead of the locked catch-up, so the
    lock is held for chroma writes, not for the model."""
    embed_docs(embedder, docs)


class Prepared(NamedTuple):
    """A batch planned and embedded outside the index lock: valid only if the
    index still reflects seq ``after`` when the lock is taken."""

    after: int
    changes: list[Change]
    docs: list[IndexDoc]
    deletes: dict[str, list[str]]
    vectors: np.ndarray


class Planned(NamedTuple):
    """The next batch of changes after seq ``after``, planned (documents to upsert, ids to delete), not embedded."""

    after: int
    changes: list[Change]
    docs: list[IndexDoc]
    deletes: dict[str, list[str]]


def plan_after(
    ledger: Ledger,
    after: int,
    *,
    limit: int,
    known: dict[tuple[str, str], IndexDoc] | None = None,
) -> Planned | None:
    """Plan the next ``limit`` changes after seq ``after`` (None when there are none)."""
    changes = ledger.changes_after(after, limit=limit)
    if not changes:
        return None
    docs, deletes = plan(ledger, changes, known)
    return Planned(after, changes, docs, deletes)


def prepare(
    ledger: Ledger,
    embedder: Embedder,
    after: int,
    *,
    limit: int,
    known: dict[tuple[str, str], IndexDoc] | None = None,
    planned: Planned | None = None,
) -> Prepared | None:
    """Plan (unless ``planned`` is that plan already) and embed the next ``limit`` changes after
    seq ``after`` (None when there are none), so the lock is held for chroma writes only."""
    planned = planned or plan_after(ledger, after, limit=limit, known=known)
    if planned is None:
        return None
    return Prepared(after, planned.changes, planned.docs, planned.deletes, embed_docs(embedder, planned.docs))


def cached_vectors(embedder: Embedder, docs: list[IndexDoc]) -> list[np.ndarray | None]:
    """Each document's vector when it is at hand without the model (this process's memory, or
    the cache file every process of the store shares), else None."""
    out: list[np.ndarray | None] = [None] * len(docs)
    groups: dict[int, list[int]] = defaultdict(list)
    for i, d in enumerate(docs):
        groups[d.max_tokens].append(i)
    for max_tokens, idx in groups.items():
        for i, v in zip(idx, embedder.cached([docs[i].text for i in idx], max_tokens=max_tokens)):
            out[i] = v
    return out


def all_cached(embedder: Embedder, docs: list[IndexDoc]) -> bool:
    """Whether every document's vector is at hand without the model (``cached_vectors``)."""
    return all(v is not None for v in cached_vectors(embedder, docs))


def catch_up(
    ledger: Ledger,
    index: VectorIndex,
    embedder: Embedder,
    state: dict,
    *,
    batch: int = 256,
    max_batches: int | None = None,
    prepared: Prepared | None = None,
    known: dict[tuple[str, str], IndexDoc] | None = None,
) -> int:
    """Apply the ledger's changes after ``state['seq']`` to the index, in
    batches (all of them, or at most ``max_batches``); returns how many
    changes were applied. A ``prepared`` first batch is used when it starts
    where the index stands. Call inside ``index.session()``."""
    if ledger.max_seq() <= state["seq"]:
        return 0
    state.update(index.ready())
    seq = state["seq"]
    applied = batches = 0
    while max_batches is None or batches < max_batches:
        if prepared is not None and prepared.after == seq:
            changes, docs, deletes, vectors = prepared.changes, prepared.docs, prepared.deletes, prepared.vectors
        else:
            changes = ledger.changes_after(seq, limit=batch)
            if not changes:
                break
            docs, deletes = plan(ledger, changes, known)
            vectors = embed_docs(embedder, docs)
        prepared = None
        _apply(index, changes[-1].seq, docs, deletes, vectors)
        seq = changes[-1].seq
        applied += len(changes)
        batches += 1
    if applied:
        index.refresh_counts()
    state["seq"] = seq
    return applied


def _apply(
    index: VectorIndex, seq: int, docs: list[IndexDoc], deletes: dict[str, list[str]], vectors: np.ndarray
) -> None:
    # One chroma upsert per collection for the whole batch.
    dim = int(vectors.shape[1]) if len(docs) else None
    if docs or deletes:
        index.begin_write()
        by_collection: dict[str, list[int]] = defaultdict(list)
        for i, d in enumerate(docs):
            by_collection[d.collection].append(i)
        for idx in by_collection.values():
            index.upsert([docs[i] for i in idx], vectors[idx])
        for collection, ids in deletes.items():
            index.delete(collection, ids)
    index.end_write(seq, dim)
