"""The Store: skillbase's memory, and the only way to write it.

It keeps three things consistent: the SQLite ledger (the truth), the chroma
vector index and the networkx reasoning graph (both derived from the ledger's
change log and rebuildable). A write commits to the ledger and is answered;
the follower thread then embeds its records and updates the index and the
graph; if that fails (no model, a broken chroma directory, a crash) the record
is safe and the next ``sync()``, by this process or any other sharing the
store, catches the index up. A write never waits for the index lock: when
another process holds it, the index is caught up by that process or by the
next search. A search sees
every write of its own caller and every change older than a second: this
process's writes the follower has not indexed yet are searched in memory (the
fresh tail), anything else is waited for or caught up before it answers.

    store = Store.open(Settings.from_env())
    attempt = store.record_benchmark(report, source=src, task=info, techniques=["online softmax"])
    hits = store.search("experiences", "softmax rows too wide for registers", k=5, where={"family": "softmax"})
    values = store.graph.technique_values(task_class="softmax:fp32:large", bottleneck="memory", arch="sm_90")
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from skillbase.memory import indexer
from skillbase.memory.documents import COLLECTIONS, TEXT_MAX_TOKENS, IndexDoc, attempt_doc, experience_doc
from skillbase.memory.embeddings import Embedder, model_name
from skillbase.memory.filters import matches, validate_where
from skillbase.memory.follower import AGAIN_LATER, Follower
from skillbase.memory.graph import ReasoningGraph, snapshot_seq_of
from skillbase.memory.jsonl import export_jsonl, import_jsonl
from skillbase.memory.ledger import Ledger
from skillbase.memory.records import Change, IndexCheck, StoreStats, TaskRecord, parse_signature
from skillbase.memory.techniques import load_seed_techniques
from skillbase.memory.vectors import Hit, MemoryIndexWarning, VectorIndex, chroma_failure, copy_metadata

from skillbase import seeds
from skillbase.config import Settings
from skillbase.errors import ConfigError, InvalidInput, SkillbaseError, StoreError
from skillbase.models import (
    Attempt,
    BenchReport,
    CompileReport,
    Experience,
    Feedback,
    ProfileReport,
    Skill,
    SkillVersion,
    TaskInfo,
    Technique,
    content_hash,
    utcnow,
)

log = logging.getLogger("skillbase.memory")

SNAPSHOT_EVERY = 5000  # ledger changes between graph snapshots
SYNC_BATCH = 512  # ledger changes applied to the index per lock hold
# The follower's rounds. chroma's embedded upsert holds the interpreter lock for its whole
# call, ~5 ms plus ~1 ms a record (benchmarks/chroma_gil.py), stopping every thread of the
# process; an upsert for every few writes (60 lessons/s) kept a loaded server stopped a
# third of the time. The follower gathers the writes of FOLLOW_GATHER_S into one upsert (a
# reader waiting for it starts it at once) and writes at most FOLLOW_BATCH changes per
# upsert, so a backlog stops the others ~40 ms at a time, not for all of it at once.
FOLLOW_GATHER_S = 0.2
FOLLOW_BATCH = 32
# Searches answer this process's own writes not yet indexed from memory (the "fresh tail",
# exact cosine over their embeddings) instead of waiting for the follower, up to this many.
TAIL_MAX = 256
KNOWN_DOCS_MAX = 4096  # documents of this process's own fresh writes kept for the next sync
MAX_QUERY_CHARS = 20_000
INDEX_WAIT_S = 10.0  # longest a search waits for the follower before catching up itself
# A search waits for another caller's unindexed change only once it is older than this: the
# follower indexes a write within one round (~0.1 s idle, longer under load), so newer changes
# are left to it and the search answers at once; an older one (the follower behind, or another
# process wrote) is waited for, so a lesson reaches every other caller's search within ~1 s.
MAX_INDEX_LAG_S = 1.0
# Several server processes over one store: each follower embeds its own process's writes first thing
# in every round and leaves another process's lessons and attempts to that process's follower, which
# puts their vectors in the shared cache file; the follower holding the index lock then indexes them
# all from the cache, and searches answer them from it (``_fresh_tail``). Without this every follower
# embedded every process's pending writes (two processes: 1.88 model runs a lesson). A writer that has
# not cached its records this long after a follower first left them (gone, or far behind) gets them
# embedded by whoever indexes; a round a reader waits for never leaves them.
WRITER_GRACE_S = 1.0
# The ledger seq of the last write made in this context, per store: a caller's searches
# always see its own writes. A server runs each tool call in its own context.
_WRITTEN: ContextVar[dict[str, int]] = ContextVar("skillbase_store_written", default={})


@contextmanager
def caller_writes(seen: dict[str, int]) -> Iterator[None]:
    """Run a block as one step of a longer-lived caller (an MCP client: each tool call runs in a
    context of its own): the block's searches see every write the caller made in earlier steps, and
    the block's writes are added to ``seen`` for the steps after it. An agent that records a lesson
    and recalls next finds it, whatever the follower is doing."""
    token = _WRITTEN.set(dict(seen))
    try:
        yield
    finally:
        for key, seq in _WRITTEN.get().items():
            if seq > seen.get(key, 0):
                seen[key] = seq
        _WRITTEN.reset(token)


def _bound(kept: dict) -> None:
    """Drop the oldest entries of ``kept`` past KNOWN_DOCS_MAX (dicts keep their insertion order)."""
    while len(kept) > KNOWN_DOCS_MAX:
        kept.pop(next(iter(kept)))


class Store:
    """Ledger + vector index + reasoning graph of one ``SKILLBASE_HOME``.

    Open with ``Store.open(settings)``. Safe to share between threads, and
    between processes that open the same home (each process opens its own).
    """

    def __init__(self, settings: Settings, ledger: Ledger, vectors: VectorIndex, embedder: Embedder):
        self.settings = settings
        self.ledger = ledger
        self.vectors = vectors
        self.embedder = embedder
        self._graph: ReasoningGraph | None = None
        self._glock = threading.RLock()
        self._known: dict[tuple[str, str], IndexDoc] = {}
        # The records this process wrote since the index last held every change: a pending change
        # of a lesson or attempt not named here is another process's (``_fresh_tail``). Unlike the
        # kept documents, not dropped when a task's class moves.
        self._mine: dict[tuple[str, str], None] = {}
        # Documents of other processes' pending lessons and attempts, read from the ledger once each.
        self._theirs: dict[tuple[str, str], IndexDoc] = {}
        # Kept documents the follower has not embedded yet (it does so first thing in its next round).
        self._unembedded: dict[tuple[str, str], IndexDoc] = {}
        self._writing = 0  # writes between keeping their documents and their commit (_pending)
        # The fresh tail's vectors by record, with the document each was computed for: every search
        # of a loaded server reads the same few fresh records, and looking each up in the embedder
        # again (hashing its text) was a fourteenth of a recall.
        self._tail_vecs: dict[tuple[str, str], tuple[IndexDoc, np.ndarray]] = {}
        self._klock = threading.Lock()
        # The index seq at which the follower first left a batch to another process's writer, and when.
        self._deferred: tuple[int, float] | None = None
        self._left = 0  # batches the follower left to other processes' writers (rounds it returned early)
        # Index and graph updates after a write run here, off the caller's path.
        self._follower = Follower(self._follow, gather_s=FOLLOW_GATHER_S)
        self._key = f"{ledger.store_id}:{ledger.path}"

    # -- opening and closing --------------------------------------------------

    @classmethod
    def open(cls, settings: Settings, *, sync: bool = True, embedder: Embedder | None = None) -> "Store":
        """Open (creating, migrating and seeding the technique vocabulary as
        needed) the store under ``settings.home``.

        With ``sync`` the vector index is caught up with the ledger now (a
        failure there is a MemoryIndexWarning, not an error: the ledger is
        fine). The reasoning graph loads on first use of ``store.graph``.
        Pass an ``embedder`` to share loaded model weights between stores.
        SchemaTooNew for a store written by a newer skillbase.
        """
        settings.home.mkdir(parents=True, exist_ok=True)
        ledger = Ledger.open(
            settings.ledger_path,
            max_text_bytes=settings.max_source_bytes,
            seed_techniques=load_seed_techniques(seeds.TECHNIQUES_FILE),
        )
        try:
            wanted = model_name(settings.embedding_model, settings.embedding_backend, settings.embedding_precision)
            if embedder is not None and embedder.name != wanted:
                raise ConfigError(f"the embedder given runs {embedder.name!r}, but the settings ask for {wanted!r}")
            emb = embedder or Embedder(
                settings.embedding_model,
                backend=settings.embedding_backend,
                precision=settings.embedding_precision,
                threads=settings.embedding_threads,
            )
            emb = emb.for_cache(settings.cache_dir / "embeddings.sqlite3")
            vectors = VectorIndex(settings, store_id=ledger.store_id, model=emb.name)
        except BaseException:
            ledger.close()
            raise
        store = cls(settings, ledger, vectors, emb)
        if sync:
            store._sync_quietly()
        return store

    def close(self) -> None:
        """Finish indexing what was written, snapshot the graph if it moved, then release
        files and clients."""
        self._follower.close()
        with self._glock:
            if self._graph is not None and self._graph.seq > self._graph.snapshot_seq:
                try:
                    self._graph.save(self.settings.graph_path)
                except OSError as e:
                    log.warning("could not snapshot the reasoning graph: %s", e)
        self.vectors.close()
        self.embedder.close()
        self.ledger.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- keeping the derived parts consistent ---------------------------------

    def sync(self) -> int:
        """Catch the vector index and the graph up with the ledger; returns how
        many ledger changes the index applied. Errors propagate."""
        n = self._sync_index()
        self._catch_up_graph()
        return n

    def _sync_index(
        self, *, wait: bool = True, max_batches: int | None = None, batch: int = SYNC_BATCH, defer: bool = False
    ) -> int:
        # Batch by batch: plan and embed outside the index lock (the cache
        # usually has the vectors already), then take the lock only to write
        # chroma, so other processes wait for writes, never for the model.
        # Without ``wait`` (the write path) a busy lock means another process
        # is catching up right now: skip; every read catches up in full.
        # With ``defer`` (the follower's own rounds) a batch holding another
        # process's records not embedded yet is left to that process's writer
        # for now (``_leave_to_writers``): this process embeds only its own,
        # every record it wrote since the last round first (not only the next
        # batch's), so the other processes find them in the cache file.
        applied, reset_done = 0, False
        if defer:
            with self._klock:
                own, self._unembedded = self._unembedded, {}
            if own:
                indexer.warm(self.embedder, list(own.values()))
        while True:
            seen = self.vectors.peek_seq()
            target = self.ledger.max_seq()
            if seen is not None and seen == target:
                self._forget_known(indexed=target)
                return applied
            prepared = None
            if seen is not None and seen < target:
                known = self._known_docs()
                planned = indexer.plan_after(self.ledger, seen, limit=batch, known=known)
                if defer and planned is not None and self._leave_to_writers(planned, known):
                    return applied
                prepared = indexer.prepare(self.ledger, self.embedder, seen, limit=batch, known=known, planned=planned)
            with self.vectors.session(wait=wait) as state:
                if state is None:
                    return applied
                if state["seq"] > self.ledger.committed_seq():
                    state = self.vectors.reset("it is ahead of the ledger (was the ledger restored from a backup?)")
                try:
                    n = indexer.catch_up(
                        self.ledger,
                        self.vectors,
                        self.embedder,
                        state,
                        batch=batch,
                        max_batches=1,
                        prepared=prepared,
                        known=self._known_docs(),
                    )
                except BaseException as e:
                    if isinstance(e, SkillbaseError) or not chroma_failure(e) or reset_done:
                        raise
                    self.vectors.reset(f"writing to it failed ({type(e).__name__}: {e})")
                    reset_done = True
                    continue
            applied += n
            if n == 0 or max_batches == 1:
                return applied
            if max_batches is not None:
                max_batches -= 1

    def _leave_to_writers(self, planned: indexer.Planned, known: dict[tuple[str, str], IndexDoc]) -> bool:
        """Whether the follower leaves this batch for now: it holds lessons or attempts this
        process did not write whose vectors are not in the shared cache yet, and their writer
        has had less than WRITER_GRACE_S (from this batch's first deferral) to put them there.
        This process's own documents of the batch are embedded meanwhile, so whichever process
        indexes finds them cached. Skills are never left (rare, and read back from the ledger by
        every process alike)."""
        with self._klock:
            mine = [(d.collection, d.id) in known or (d.collection, d.id) in self._mine for d in planned.docs]
        theirs = [d for d, m in zip(planned.docs, mine) if not m and d.collection != "skills"]
        if not theirs or indexer.all_cached(self.embedder, theirs):
            self._deferred = None
            return False
        now = time.monotonic()
        if self._deferred is None or self._deferred[0] != planned.after:
            self._deferred = (planned.after, now)
        elif now - self._deferred[1] >= WRITER_GRACE_S:
            self._deferred = None
            return False
        indexer.warm(self.embedder, [d for d, m in zip(planned.docs, mine) if m])
        self._left += 1
        return True

    def _sync_quietly(
        self, *, wait: bool = True, max_batches: int | None = None, batch: int = SYNC_BATCH, defer: bool = False
    ) -> int | None:
        """``_sync_index`` that turns an indexing failure into a MemoryIndexWarning; returns
        the changes applied, None after a failure (the graph is caught up either way)."""
        applied = None
        try:
            applied = self._sync_index(wait=wait, max_batches=max_batches, batch=batch, defer=defer)
        except BaseException as e:
            if not chroma_failure(e):
                raise
            msg = f"the vector index is behind the ledger and will catch up later: {e}"
            log.warning(msg)
            warnings.warn(msg, MemoryIndexWarning, stacklevel=3)
        with self._glock:
            if self._graph is not None:
                self._catch_up_graph()
        return applied

    @contextmanager
    def _pending(self, docs: list[IndexDoc]) -> Iterator[None]:
        """Keep the documents of records about to be committed, before the commit (the block):
        from the moment it lands, any search of this process may find the change in the ledger, and
        the fresh tail answers for pending changes only when it holds every one's document.
        Kept after the commit, a search that came in between gave up the tail and missed
        every pending write, anyone's (a lesson 1.6 s late to another client's recall, seen
        ~14 times a run at 16 clients). While a block runs, the follower finding the index caught
        up does not drop the kept documents (``_forget_known``): this one's commit is not in the
        ledger yet, and its document would be gone when it is. A write that fails leaves a
        document no change names."""
        with self._klock:
            for d in docs:
                self._known[d.collection, d.id] = d
                self._mine[d.collection, d.id] = None
                self._unembedded[d.collection, d.id] = d
            _bound(self._known)
            _bound(self._mine)
            _bound(self._unembedded)
            self._writing += 1
        try:
            yield
        finally:
            with self._klock:
                self._writing -= 1

    def _after_write(self) -> None:
        # The ledger commit is done and durable: the caller is answered now. The
        # follower embeds and indexes this write together with whatever else arrived
        # meanwhile (one model call, one upsert); this caller's own searches wait for it.
        written = dict(_WRITTEN.get())
        written[self._key] = self.ledger.max_seq()
        _WRITTEN.set(written)
        self._follower.poke()

    def _follow(self) -> bool | str:
        # One batch per round, so searches waiting for it are told after every batch
        # even while writes keep coming. True (a full batch: a backlog) asks for another round
        # at once; writes that came during this one asked for theirs, which gathers first.
        # A round a reader waits for embeds whatever it needs; the others may leave another
        # process's records to their writer (AGAIN_LATER: look again after the gathering pause).
        urgent, left = self._follower.round_urgent, self._left
        if urgent:
            self._deferred = None
        applied = self._sync_quietly(max_batches=1, batch=FOLLOW_BATCH, defer=not urgent)
        if self._left != left:
            return AGAIN_LATER
        if (applied or 0) < FOLLOW_BATCH:
            return False  # nothing more, or it failed (warned): wait for the next write or read
        seen = self.vectors.peek_seq()
        return seen is not None and seen < self.ledger.max_seq()

    def _await_index(self) -> tuple[int, dict[str, IndexDoc]]:
        """Make the index fresh enough for a search: it must hold every write made in the
        caller's own context (thread, or task of a server), and no change committed more
        than MAX_INDEX_LAG_S ago may be missing; newer writes of other callers are being
        indexed by the follower and appear within its round. This process's own writes
        not yet indexed count as held when the fresh tail (``_fresh_tail``) answers for
        them. Otherwise wait for the follower; if it does not get there, catch up here and
        raise what goes wrong. Returns the ledger seq the index must reflect for this
        search, and the fresh tail the search adds to the index's answer."""
        own = _WRITTEN.get().get(self._key, 0)
        seen = self.vectors.peek_seq()
        if seen is not None:
            if seen >= self.ledger.max_seq():
                return seen, {}  # the index holds every change
            tail = self._fresh_tail(seen)
            if tail is not None:
                self._follower.poke()
                return seen, tail
            if seen >= own:
                first = self.ledger.first_change_after(seen)
                if first is None or (utcnow() - first[1]).total_seconds() <= MAX_INDEX_LAG_S:
                    if first is not None:
                        self._follower.poke()  # in case no writer of this process asked (another process wrote)
                    return seen, {}
        target = max(own, self.ledger.max_seq())

        def ready() -> bool:
            now = self.vectors.peek_seq()
            return now is not None and now >= target

        if not self._follower.wait(ready, INDEX_WAIT_S):
            self._sync_index()
        return target, {}

    def _fresh_tail(self, seen: int) -> dict[str, IndexDoc] | None:
        """The writes after index seq ``seen`` as documents by id, when every indexed change
        after it is a put of a record this process wrote (its kept document) or another
        process's new lesson or attempt. Another process's record is in the tail once its
        writer has put its vector in the shared cache file (within the writer's next follower
        round); until then a search may leave it out while it is younger than MAX_INDEX_LAG_S,
        the bound for any other caller's write. None when anything else changed there (an older
        uncached write of another process, a delete, a skill, a write of this process whose
        document is not kept) or more than TAIL_MAX changes are pending. Several server
        processes over one store write between each other's writes all the time: giving up the
        tail for each of them had every search after its caller's own write wait for the index."""
        changes = self.ledger.changes_after(seen, limit=TAIL_MAX + 1)
        if len(changes) > TAIL_MAX:
            return None
        latest = indexer.latest_ops(changes)
        if not latest:
            return {}
        tail: dict[str, IndexDoc] = {}
        theirs: set[tuple[str, str]] = set()
        with self._klock:
            for (kind, item_id), op in latest.items():
                key = (indexer.COLLECTION_OF[kind], item_id)
                doc = self._known.get(key) if op == "put" else None
                if doc is not None:
                    tail[item_id] = doc
                elif op == "put" and kind != "skill" and key not in self._mine:
                    theirs.add((kind, item_id))
                else:
                    return None
        if theirs:
            ready = self._their_docs(theirs)
            tail.update(ready)
            late = {t for t in theirs if t[1] not in ready}
            if late:
                oldest = next(c.seq for c in changes if (c.kind, c.item_id) in late)
                first = self.ledger.first_change_after(oldest - 1)
                if first is None or (utcnow() - first[1]).total_seconds() > MAX_INDEX_LAG_S:
                    return None
        return tail

    def _their_docs(self, records: set[tuple[str, str]]) -> dict[str, IndexDoc]:
        """Other processes' pending lessons and attempts (kind, id) whose vectors their writers
        have cached, as documents by id; their vectors are kept for the tail's search. Never
        runs the model: the writer embeds its own records (``_leave_to_writers``)."""
        keys = {(indexer.COLLECTION_OF[kind], item_id) for kind, item_id in records}
        with self._klock:
            docs = {k: self._theirs[k] for k in keys if k in self._theirs}
        need = keys - docs.keys()
        if need:
            read = [attempt_doc(a) for a in self.ledger.get_attempts([i for c, i in need if c == "attempts"])]
            read += [experience_doc(e) for e in self.ledger.get_experiences([i for c, i in need if c == "experiences"])]
            with self._klock:
                for d in read:
                    docs[d.collection, d.id] = self._theirs[d.collection, d.id] = d
                _bound(self._theirs)
        with self._klock:
            kept = {k: self._tail_vecs.get(k) for k in docs}
        unknown = [d for k, d in docs.items() if kept[k] is None or kept[k][0] is not d]
        found = dict(zip([(d.collection, d.id) for d in unknown], indexer.cached_vectors(self.embedder, unknown)))
        with self._klock:
            for k, v in found.items():
                if v is not None:
                    self._tail_vecs[k] = (docs[k], v)
            _bound(self._tail_vecs)
        return {k[1]: d for k, d in docs.items() if found.get(k) is not None or k not in found}

    def _tail_hits(
        self,
        tail: dict[str, IndexDoc],
        collection: str,
        embedding: np.ndarray,
        k: int,
        where: dict[str, Any] | None,
        documents: bool,
    ) -> list[Hit]:
        """The fresh tail's records of ``collection`` passing ``where``, nearest first (exact
        cosine; their embeddings are the ones the follower will index, from the cache)."""
        docs = [
            d for d in tail.values() if d.collection == collection and (where is None or matches(where, d.metadata))
        ]
        if not docs:
            return []
        vecs = self._tail_vectors(docs)
        dist = 1.0 - vecs @ embedding.astype(np.float32)
        order = np.argsort(dist, kind="stable")[:k]
        return [
            Hit(
                collection=collection,
                id=docs[i].id,
                distance=float(dist[i]),
                score=1.0 - float(dist[i]),
                metadata=copy_metadata(docs[i].metadata),
                document=docs[i].text if documents else "",
            )
            for i in order
        ]

    def _tail_vectors(self, docs: list[IndexDoc]) -> np.ndarray:
        """The embeddings of fresh-tail documents (as the follower will index them), computed once each."""
        with self._klock:
            kept = [self._tail_vecs.get((d.collection, d.id)) for d in docs]
        vecs = [k[1] if k is not None and k[0] is d else None for d, k in zip(docs, kept)]
        missing = [i for i, v in enumerate(vecs) if v is None]
        if missing:
            fresh = indexer.embed_docs(self.embedder, [docs[i] for i in missing])
            with self._klock:
                for i, v in zip(missing, fresh):
                    vecs[i] = v
                    self._tail_vecs[docs[i].collection, docs[i].id] = (docs[i], v)
                _bound(self._tail_vecs)
        return np.stack(vecs)

    def _known_docs(self) -> dict[tuple[str, str], IndexDoc]:
        with self._klock:
            return dict(self._known)

    def _forget_known(self, indexed: int | None = None) -> None:
        """Drop the kept documents of this process's writes (and those read of other processes'
        pending records, and the tail's vectors). With ``indexed`` (the index holds every change up
        to it), only if no write is between keeping its document and its commit and nothing
        committed since: such a write's document is still needed (``_pending``)."""
        with self._klock:
            if indexed is not None and (self._writing or self.ledger.max_seq() != indexed):
                return
            self._known.clear()
            self._tail_vecs.clear()
            self._theirs.clear()
            self._unembedded.clear()
            if indexed is not None:  # every write of this process is in the index
                self._mine.clear()

    def reindex(self) -> int:
        """Rebuild the vector index and the graph from the ledger (cached
        embeddings are reused), then look for every record in it as
        ``check_index`` does; returns the number of records indexed."""
        with self.vectors.session():
            state = self.vectors.reset(None)
            indexer.catch_up(self.ledger, self.vectors, self.embedder, state)
            for collection in COLLECTIONS:
                self._check_collection(collection, state["seq"])
            n = sum(self.vectors.mirror_counts().values())
        with self._glock:
            self._graph = ReasoningGraph(self.ledger.store_id)
            self._graph.catch_up(self.ledger)
            self._graph.save(self.settings.graph_path)
        return n

    @property
    def graph(self) -> ReasoningGraph:
        """The reasoning graph, loaded from its snapshot on first use and
        caught up with the ledger on every access (while another thread is
        catching it up, it is returned as it is: its reads lock it)."""
        graph = self._graph
        if graph is not None and graph.seq >= self.ledger.max_seq():
            return graph  # nothing new (a pinned seq makes this check free inside a recall)
        if graph is not None and not self._glock.acquire(blocking=False):
            return graph
        if graph is not None:
            self._glock.release()
        with self._glock:
            if self._graph is None:
                self._graph = self._load_graph()
            self._catch_up_graph()
            return self._graph

    def _load_graph(self) -> ReasoningGraph:
        path = self.settings.graph_path
        if path.exists():
            try:
                return ReasoningGraph.load(path, self.ledger.store_id, self.ledger.committed_seq())
            except (ValueError, KeyError, TypeError, OSError) as e:
                msg = f"the graph snapshot {path} is not usable ({e}); rebuilding it from the ledger"
                log.warning(msg)
                warnings.warn(msg, MemoryIndexWarning, stacklevel=4)
        return ReasoningGraph(self.ledger.store_id)

    def _catch_up_graph(self) -> None:
        with self._glock:
            if self._graph is None:
                self._graph = self._load_graph()
            self._graph.catch_up(self.ledger)
            if self._graph.seq - self._graph.snapshot_seq >= SNAPSHOT_EVERY:
                try:
                    self._graph.save(self.settings.graph_path)
                except OSError as e:
                    log.warning("could not snapshot the reasoning graph: %s", e)

    # -- attempts -------------------------------------------------------------

    def record_attempt(self, attempt: Attempt) -> Attempt:
        """Record one benchmarked candidate (techniques canonicalized). The
        ledger commit comes first; indexing follows and may lag, never lose it."""
        return self.record_attempts([attempt])[0]

    def record_attempts(self, attempts: Sequence[Attempt]) -> list[Attempt]:
        """Record several attempts in one transaction (parents first)."""
        docs = [attempt_doc(self.ledger.validate_attempt(a)) for a in attempts]
        with self._pending(docs):
            stored = self.ledger.record_attempts(attempts)
        self._after_write()
        return stored

    def attempt_from_report(
        self,
        report: BenchReport,
        *,
        source: str,
        task: TaskInfo | None = None,
        parent_id: str | None = None,
        techniques: Iterable[str] = (),
        compile_report: CompileReport | None = None,
        session: str | None = None,
        agent: str | None = None,
        notes: str = "",
        run: str | None = None,
        attempt_id: str | None = None,
        created_at: datetime | None = None,
    ) -> Attempt:
        """Build (without recording) the Attempt for a benchmark report of
        ``source``; family and dtype come from ``task`` or the report's task
        signature. Technique names are canonicalized. ``attempt_id`` and ``created_at``
        fix what is otherwise fresh, so recording the same result twice is a no-op
        (a suite run recorded again after a crash)."""
        signature = task.signature if task is not None else report.task_signature
        family, dtype, _ = parse_signature(signature)
        return Attempt(
            task=task.name if task is not None else report.task,
            task_signature=signature,
            family=family,
            dtype=dtype,
            source=source,
            source_hash=content_hash(source),
            language=report.language or (compile_report.language if compile_report else None),
            parent_id=parent_id,
            techniques=self.ledger.canonical_techniques(techniques),
            compile_report=compile_report,
            bench_report=report,
            verdict=report.verdict,
            median_ms=report.timing.median_ms if report.timing else None,
            speedup_vs_eager=report.speedup_vs_eager,
            speedup_vs_compile=report.speedup_vs_compile,
            pct_sol=report.roofline.pct_sol if report.roofline else None,
            bottleneck=report.bottleneck,
            hardware=report.hardware.key,
            arch=report.hardware.arch,
            toolchain=dict(report.toolchain),
            session=session,
            agent=agent,
            notes=notes,
            run=run,
            **({"id": attempt_id} if attempt_id else {}),
            **({"created_at": created_at} if created_at else {}),
        )

    def record_benchmark(
        self, report: BenchReport, *, source: str, task: TaskInfo | None = None, **kwargs: Any
    ) -> Attempt:
        """Record a benchmark in one call: the task's info (when given) and the
        attempt built by ``attempt_from_report`` (same keyword arguments)."""
        if task is not None:
            self.ledger.put_task(task)
        return self.record_attempt(self.attempt_from_report(report, source=source, task=task, **kwargs))

    def get_attempt(self, attempt_id: str) -> Attempt:
        """The attempt with this id (NotFound otherwise)."""
        return self.ledger.get_attempt(attempt_id)

    def list_attempts(
        self,
        task: str | None = None,
        session: str | None = None,
        limit: int = 100,
        since: datetime | None = None,
        *,
        technique: str | None = None,
        verdict: str | None = None,
        run: str | None = None,
    ) -> list[Attempt]:
        """Attempts matching every filter given, newest first (``run``: the suite run they came from)."""
        return self.ledger.list_attempts(
            task=task, session=session, limit=limit, since=since, technique=technique, verdict=verdict, run=run
        )

    def record_profile(self, attempt_id: str, profile: ProfileReport) -> str:
        """Store a profile with its attempt (the graph gains its bottleneck state); returns its id."""
        pid = self.ledger.record_profile(attempt_id, profile)
        self._sync_quietly(wait=False)
        return pid

    def get_profile(self, attempt_id: str) -> ProfileReport | None:
        """The latest profile with counters stored with an attempt (else the latest of any), or None."""
        return self.ledger.get_profile(attempt_id)

    def lineage(self, attempt_id: str) -> list[Attempt]:
        """The attempt's chain of parents, root first, ending with it."""
        return self.ledger.lineage(attempt_id)

    # -- tasks ----------------------------------------------------------------

    def record_task(self, info: TaskInfo) -> TaskRecord:
        """Record (or refresh) a task's full TaskInfo."""
        rec = self.ledger.put_task(info)
        self._after_write()
        return rec

    def get_task(self, name: str) -> TaskRecord:
        return self.ledger.get_task(name)

    def rederive_task(self, info: TaskInfo) -> int:
        """Store a task's re-derived TaskInfo (its file understood anew) and move its attempts and
        lessons to the class it says; returns how many changed class. ``reindex`` then rebuilds
        what derives from them."""
        # The documents kept of this process's writes may name the old class: searches and the
        # indexer read the moved records from the ledger instead (cleared again after the commit,
        # for a write that committed just before it and kept its document just after).
        self._forget_known()
        n = self.ledger.rederive_task(info)
        self._forget_known()
        self._sync_quietly()
        return n

    def list_tasks(self, family: str | None = None) -> list[TaskRecord]:
        return self.ledger.list_tasks(family)

    # -- experiences ----------------------------------------------------------

    def record_experience(self, exp: Experience) -> Experience:
        """Record a lesson (techniques canonicalized); returns it as stored."""
        return self.record_experiences([exp])[0]

    def record_experiences(self, exps: Sequence[Experience]) -> list[Experience]:
        """Record several lessons in one transaction."""
        docs = [experience_doc(self.ledger.validate_experience(e)) for e in exps]
        with self._pending(docs):
            stored = self.ledger.record_experiences(exps)
        self._after_write()
        return stored

    def get_experience(self, experience_id: str) -> Experience:
        return self.ledger.get_experience(experience_id)

    def list_experiences(
        self,
        task: str | None = None,
        technique: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
        *,
        family: str | None = None,
    ) -> list[Experience]:
        """Experiences matching every filter given, newest first."""
        return self.ledger.list_experiences(task=task, technique=technique, family=family, since=since, limit=limit)

    # -- skills ---------------------------------------------------------------

    def put_skill(self, skill: Skill, *, author: str, reason: str) -> Skill:
        """Store a new version of a skill (version = last + 1; history kept).
        Identical content to the latest version adds no version."""
        stored = self.ledger.put_skill(skill, author=author, reason=reason)
        self._sync_quietly()
        return stored

    def get_skill(self, name: str, version: int | None = None) -> Skill:
        return self.ledger.get_skill(name, version)

    def list_skills(self, status: str | None = None) -> list[Skill]:
        return self.ledger.list_skills(status)

    def skill_history(self, name: str) -> list[SkillVersion]:
        return self.ledger.skill_history(name)

    # -- feedback and techniques ----------------------------------------------

    def record_feedback(self, fb: Feedback) -> None:
        """Record whether a recalled item was used and whether it helped."""
        self.ledger.record_feedback(fb)
        self._after_write()

    def list_feedback(
        self, item_kind: str | None = None, item_id: str | None = None, limit: int = 1000
    ) -> list[Feedback]:
        return self.ledger.list_feedback(item_kind, item_id, limit)

    def canonical_technique(self, name: str) -> str:
        """Canonical vocabulary name for a spelling or alias (UnknownTechnique
        with the closest names otherwise)."""
        return self.ledger.canonical_technique(name)

    def list_techniques(self) -> list[Technique]:
        return self.ledger.list_techniques()

    def get_technique(self, name: str) -> Technique:
        return self.ledger.get_technique(name)

    def add_technique(self, t: Technique) -> Technique:
        """Grow the vocabulary (or extend an entry's aliases)."""
        stored = self.ledger.add_technique(t)
        self._sync_quietly()
        return stored

    # -- search ---------------------------------------------------------------

    def search(
        self,
        collection: str,
        text: str,
        k: int = 10,
        where: dict[str, Any] | None = None,
        *,
        documents: bool = True,
        exhaustive: bool = True,
    ) -> list[Hit]:
        """The ``k`` records of ``collection`` (experiences, skills, attempts)
        nearest in meaning to ``text`` that pass the chroma ``where`` filter
        (keys in skillbase.memory.documents). The index is caught up first.
        ``documents=False`` returns ids, scores and metadata only (faster);
        ``exhaustive=False`` looks for filtered matches among the 2048 nearest
        records only, so it may return fewer than ``k`` (it never pays for
        chroma's own filtered scan)."""
        if collection not in COLLECTIONS:
            raise InvalidInput(f"unknown collection {collection!r}", hint=f"one of {', '.join(COLLECTIONS)}")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("the search text is empty", hint="describe what you are looking for")
        if not isinstance(k, int) or not 1 <= k <= 1000:
            raise InvalidInput(f"k must be an integer from 1 to 1000, got {k!r}")
        validate_where(where)
        embedding = self.embedder.embed_one(text[:MAX_QUERY_CHARS], max_tokens=TEXT_MAX_TOKENS)
        for retry in (False, True):
            try:
                needed, tail = self._await_index()
                fresh = self._tail_hits(tail, collection, embedding, k, where, documents) if tail else []
                with self.vectors.reading() as current:
                    if current:  # no lock: beside other queries and the follower's upserts
                        return _merge(
                            self.vectors.query(collection, embedding, k, where, documents, exhaustive), fresh, k
                        )
                # Not open yet, or another process wrote since: (re)open under the lock; catch up
                # here only if that found the index short of what this search needs (it was reset).
                with self.vectors.session():
                    state = self.vectors.ready()
                    if state["seq"] < needed:
                        indexer.catch_up(self.ledger, self.vectors, self.embedder, state)
                    return _merge(self.vectors.query(collection, embedding, k, where, documents, exhaustive), fresh, k)
            except SkillbaseError:
                raise
            except BaseException as e:
                if not chroma_failure(e) or retry:
                    raise StoreError(
                        f"the vector index failed: {type(e).__name__}: {e}", hint="run `skillbase memory reindex`"
                    ) from e
                with self.vectors.session():
                    self.vectors.reset(f"a query failed ({type(e).__name__}: {e})")
        raise AssertionError("unreachable")

    # -- export / import / stats ----------------------------------------------

    def export_jsonl(self, path: str | Path) -> int:
        """Write every record to a JSONL file; returns the number of records."""
        return export_jsonl(self.ledger, Path(path))

    def import_jsonl(self, path: str | Path) -> int:
        """Import a JSONL export: validated in full first, then one
        transaction; InvalidInput naming the line otherwise. Returns how many
        records were new."""
        n = import_jsonl(self.ledger, Path(path))
        self._sync_quietly()
        return n

    @property
    def seq(self) -> int:
        """The ledger's last change-log sequence number."""
        return self.ledger.max_seq()

    def changes(self, after: int = 0, limit: int = 1000) -> list[Change]:
        """Ledger changes after seq ``after``, oldest first (for caches that
        follow the ledger, like a lexical index)."""
        return self.ledger.changes_after(after, limit)

    def check_index(self) -> IndexCheck:
        """Catch the vector index up, then look for every record in it by its own vector: those chroma's
        search no longer reaches (its HNSW graph lost their way in after they were written) are answered
        from the index's mirror from then on (on a chroma server each is written again twice first).
        Every index write already looks again for a few older records (``VectorIndex.sweep``); this
        goes over all of them at once, a page at a time, each in a session of its own, so other
        processes' index writes wait for a page (about 0.1 s), not for the whole check."""
        start = time.monotonic()
        self._sync_index()
        found = {c: self._check_collection(c) for c in COLLECTIONS}
        with self.vectors.session():
            self.vectors.ready()
            unreached = self.vectors.unreached_counts()
        return IndexCheck(
            looked_for={c: n for c, (n, _) in found.items()},
            newly_unreached={c: m for c, (_, m) in found.items() if m},
            unreached=unreached,
            seconds=round(time.monotonic() - start, 3),
        )

    def _check_collection(self, collection: str, seq: int | None = None) -> tuple[int, int]:
        """Every record of ``collection`` looked for by its own vector (``VectorIndex.check_page``), a page
        at a time: each page in a session of its own, or, with ``seq`` (the index's), in the caller's.
        Returns (records looked for, newly kept as unreached)."""
        looked = lost = 0
        after: str | None = ""
        while after is not None:
            if seq is None:
                with self.vectors.session():
                    after, n, m = self.vectors.check_page(collection, after, self.vectors.ready()["seq"])
            else:
                after, n, m = self.vectors.check_page(collection, after, seq)
            looked, lost = looked + n, lost + m
        return looked, lost

    def holds_knowledge(self) -> bool:
        """Whether the store holds any skill or experience (an uninitialised store holds neither)."""
        counts = self.ledger.counts()
        return bool(counts["skills"] or counts["experiences"])

    def stats(self) -> StoreStats:
        """Counts per table, index and graph lag, disk sizes."""
        ledger_seq = self.ledger.max_seq()
        index_seq: int | None = None
        index_counts: dict[str, int] = {}
        index_unreached: dict[str, int] = {}
        index_graphs: dict[str, dict[str, int]] = {}
        try:
            with self.vectors.session():
                state = self.vectors.ready()
                index_seq = state["seq"]
                index_counts = self.vectors.counts()
                index_unreached = self.vectors.unreached_counts()
                index_graphs = self.vectors.graphs()
        except Exception as e:
            log.warning("the vector index could not be read: %s", e)
        with self._glock:
            graph = self._graph
            graph_seq = graph.seq if graph is not None else None
            graph_counts = graph.counts() if graph is not None else {}
        snapshot_seq = snapshot_seq_of(self.settings.graph_path)
        return StoreStats(
            home=str(self.settings.home),
            store_id=self.ledger.store_id,
            schema_version=self.ledger.schema_version,
            ledger_seq=ledger_seq,
            index_seq=index_seq,
            graph_seq=graph_seq,
            snapshot_seq=snapshot_seq,
            index_lag=ledger_seq - index_seq if index_seq is not None else None,
            counts=self.ledger.counts(),
            index_counts=index_counts,
            index_unreached=index_unreached,
            index_graphs=index_graphs,
            index_sparser=self.vectors.sparser_than_made_now(index_graphs),
            graph_counts=graph_counts,
            disk_bytes=self._disk(),
            chroma=self.vectors.where,
            embedding_model=self.embedder.name,
        )

    def _disk(self) -> dict[str, int]:
        def size(p: Path) -> int:
            if p.is_file():
                return p.stat().st_size
            return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.exists() else 0

        return {
            "ledger": self.ledger.disk_bytes(),
            "chroma": size(self.settings.chroma_dir),
            "graph": size(self.settings.graph_path),
            "cache": size(self.settings.cache_dir / "embeddings.sqlite3"),
        }


def _merge(indexed: list[Hit], fresh: list[Hit], k: int) -> list[Hit]:
    """The ``k`` nearest of the index's hits and the fresh tail's (a record the follower
    indexed meanwhile is in both: kept once)."""
    if not fresh:
        return indexed
    ids = {h.id for h in fresh}
    both = fresh + [h for h in indexed if h.id not in ids]
    both.sort(key=lambda h: h.distance)
    return both[:k]
