"""The vector index: chroma collections derived from the ledger, rebuildable.

Collections ``experiences``, ``skills`` and ``attempts`` hold ids and our own
embeddings, nothing else (chroma never loads a model). An embedded ``PersistentClient`` under
``settings.chroma_dir`` by default; a chroma server when
``settings.chroma_url`` is set (its collections are prefixed with the store id,
so several stores can share one server).

Beside chroma sits a small SQLite *mirror*: the ledger seq the index
reflects, a generation token that changes whenever chroma is written, and
every record's metadata (the keys listed in ``skillbase.memory.documents``)
and document text, and the vectors of the few records chroma's search does
not reach (``VectorIndex._unreached_of``: checked at each write, and older
records again by ``VectorIndex.sweep``), which every query adds. The seq
lets any process catch the index up from the ledger's change log; the
generation token tells a process that another one wrote chroma since, so it
reopens its client (an embedded chroma client does not see other processes'
writes); the metadata answers filters (see ``query``). All of it is guarded
by a file lock under ``settings.home``; nobody writes chroma outside
``session()``.

Why chroma holds vectors only: an embedded chroma upsert keeps the interpreter
lock for its whole call, stopping every other thread of the process, and
writing metadata and documents cost it twice as long as the vectors alone
(``benchmarks/chroma_gil.py``; docs/performance.md). An index built
by an older release, with both in chroma, is rebuilt from the ledger once
(``INDEX_FORMAT``); cached embeddings make that a rewrite, not a re-embedding.

A chroma directory that cannot be opened or read is moved aside and rebuilt
from the ledger, with a ``MemoryIndexWarning``.

A server-backed index mirrors one ledger: the processes that share it share
one ``SKILLBASE_HOME`` (where the lock and the mirror live).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout
from pydantic import BaseModel, Field
from skillbase.memory.documents import COLLECTIONS, IndexDoc
from skillbase.memory.filters import matches, to_sql

from skillbase.config import Settings
from skillbase.errors import InvalidInput, StoreError

log = logging.getLogger("skillbase.memory")

MIRROR_FILE = "skillbase-index.sqlite3"
# Over-fetch sizes for filtered queries: nearest ids first, filtered on the
# mirror; chroma's own (slow, exact) filter only when these do not fill k.
OVERFETCH = (256, 2048)
INDEX_FORMAT = "2"  # 2: chroma holds ids and vectors; metadata and documents live in the mirror
METADATA_CACHE = 8192  # decoded metadata rows kept per process
QUERY_ANSWERS = 512  # kNN answers kept per process
# Each collection's HNSW graph: 32 links a node, built with a candidate list of 200 (chroma's defaults are
# 16 and 100). Lessons and attempts are often near-duplicates (the same advice on several tasks, one kernel
# benchmarked again), where chroma's graph leaves records out of every search's reach: in
# `benchmarks/index_sweep.py` (8,600-9,000 records in tight clusters, written for 40 s beside three
# readers) 10 records ended out of reach against 87 with the defaults, 6 of them unknown to the index until
# a full check against 68; writes cost 20.3 ms against 18.8, 16 clients x 150 calls moved within the
# runs' spread, and a chroma server taking eight workers' inserts spent about a tenth more CPU a call
# (docs/performance.md). chroma keeps a collection's graph settings from its
# creation: a store made before keeps its graph until `skillbase memory reindex` makes it again.
GRAPH_LINKS, GRAPH_CANDIDATES = 32, 200
COLLECTION_METADATA = {"hnsw:space": "cosine", "hnsw:M": GRAPH_LINKS, "hnsw:construction_ef": GRAPH_CANDIDATES}


class MemoryIndexWarning(UserWarning):
    """The vector index was rebuilt or could not be brought up to date."""


class Hit(BaseModel):
    """One search result."""

    collection: str
    id: str
    distance: float = Field(description="cosine distance (0 = same direction)")
    score: float = Field(description="1 - distance: cosine similarity")
    metadata: dict[str, Any]
    document: str = Field(description="the indexed text; empty when the search asked for metadata only")


def chroma_failure(exc: BaseException) -> bool:
    """Whether an exception came from chroma failing (including a Rust panic,
    which is not an Exception subclass)."""
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"


SAME_VECTOR = 1e-5  # a cosine distance this small: the same vector (the same text embedded again)
# A record found when written can lose its way in later, as later writes rewrite the graph's links. So a
# process writing a collection also looks again for SWEEP_BATCH older records of it, at most once every
# SWEEP_EVERY_S, from a cursor that goes round the collection (``VectorIndex.sweep``): chroma answers a
# search by a record's own vector in about 0.23 ms (32 at once, 3,000 records, this 2-core machine), so
# this costs under 1 % of a core while writes come, nothing while none do, and goes round 10,000 records
# in about five minutes of writing. ``skillbase memory check`` looks for every record at once.
SWEEP_BATCH = 32
SWEEP_EVERY_S = 1.0
SWEEP_PAGE = 512  # records a full check reads and queries at a time


class Mirror:
    """The index's bookkeeping in SQLite: state (seq, generation, store id,
    model) and a copy of each record's metadata."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
        self.conn.execute("PRAGMA busy_timeout=60000")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS meta (collection TEXT NOT NULL, id TEXT NOT NULL, metadata TEXT NOT NULL, "
            "PRIMARY KEY (collection, id)) WITHOUT ROWID"
        )
        # Texts apart from the metadata: a filter's scan of ``meta`` never pages through them.
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS docs (collection TEXT NOT NULL, id TEXT NOT NULL, document TEXT NOT NULL, "
            "PRIMARY KEY (collection, id)) WITHOUT ROWID"
        )
        # Records chroma's nearest-neighbour search does not reach even by their own vectors (its HNSW graph
        # left them without a way in), with their vectors: every query adds them by exact cosine.
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS unreached (collection TEXT NOT NULL, id TEXT NOT NULL, vector BLOB NOT NULL, "
            "PRIMARY KEY (collection, id)) WITHOUT ROWID"
        )
        self.inode = os.stat(path).st_ino
        # Reads from any thread, beside a writer's transaction on ``conn`` (WAL).
        self._idle: list[sqlite3.Connection] = []
        self._closed = False
        # Decoded metadata by (collection, id), kept in step with this process's puts and deletes;
        # ``forget()`` drops it when another process may have written (the index's generation moved).
        # A query reads some 300 rows; decoding them again each time was 7% of a recall.
        self._metas: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._metas_lock = threading.Lock()
        # Query answers by (collection, query vector, k, filter, ...), each with its collection's stamp
        # when it was computed: valid while no write to that collection committed since (a skills kNN
        # asked again for the same task text is answered without chroma). A stamp is (times forgotten,
        # this process's writes to the collection); a decoded row is kept under the same rule.
        self._forgotten = 0
        self._writes: dict[str, int] = {}
        self._results: OrderedDict[tuple, tuple[tuple[int, int], list]] = OrderedDict()
        self._unreached: dict[str, tuple[tuple[int, int], list[str], np.ndarray | None]] = {}

    def replaced(self) -> bool:
        """Whether the file on disk is no longer the one this mirror opened."""
        try:
            return os.stat(self.path).st_ino != self.inode
        except FileNotFoundError:
            return True

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        try:
            conn = self._idle.pop()
        except IndexError:
            if self._closed:
                raise sqlite3.ProgrammingError("the index mirror is closed")
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
            conn.execute("PRAGMA query_only=1")
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            if self._closed:
                conn.close()
            else:
                self._idle.append(conn)

    def state(self) -> dict[str, str]:
        return dict(self._read("SELECT key, value FROM state"))

    def set_state(self, **values: Any) -> None:
        with self._tx():
            self.conn.executemany(
                "INSERT INTO state(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                [(k, str(v)) for k, v in values.items()],
            )

    def put(
        self,
        collection: str,
        ids: Sequence[str],
        metadatas: Sequence[dict[str, Any]],
        documents: Sequence[str],
        unreached: dict[str, np.ndarray] | None = None,
    ) -> None:
        """Write the records' rows; ``unreached``: those of them chroma's search does not find, with
        their vectors (the others written again are found now)."""
        try:
            with self._tx():
                self.conn.executemany(
                    "DELETE FROM unreached WHERE collection=? AND id=?", [(collection, i) for i in ids]
                )
                self._insert_unreached(collection, unreached or {})
                self.conn.executemany(
                    "INSERT INTO meta(collection, id, metadata) VALUES (?, ?, ?) "
                    "ON CONFLICT(collection, id) DO UPDATE SET metadata=excluded.metadata",
                    [(collection, i, json.dumps(m, separators=(",", ":"))) for i, m in zip(ids, metadatas)],
                )
                self.conn.executemany(
                    "INSERT INTO docs(collection, id, document) VALUES (?, ?, ?) "
                    "ON CONFLICT(collection, id) DO UPDATE SET document=excluded.document",
                    [(collection, i, d) for i, d in zip(ids, documents)],
                )
        finally:
            self._drop(collection, ids)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        try:
            with self._tx():
                for table in ("meta", "docs", "unreached"):
                    self.conn.executemany(
                        f"DELETE FROM {table} WHERE collection=? AND id=?", [(collection, i) for i in ids]
                    )
        finally:
            self._drop(collection, ids)

    def _drop(self, collection: str, ids: Sequence[str]) -> None:
        """After a write: its rows are read again, and the new stamp tells a ``get`` or a query
        that read before the commit not to keep what it read."""
        with self._metas_lock:
            self._writes[collection] = self._writes.get(collection, 0) + 1
            for i in ids:
                self._metas.pop((collection, i), None)

    def forget(self) -> None:
        """Drop the decoded metadata and query answers: another process may have written."""
        with self._metas_lock:
            self._forgotten += 1
            self._metas.clear()
            self._results.clear()
            self._unreached.clear()

    def stamp(self, collection: str) -> tuple[int, int]:
        """What ``collection``'s kept rows and answers are valid for: it moves with every write."""
        with self._metas_lock:
            return self._stamp(collection)

    def _stamp(self, collection: str) -> tuple[int, int]:
        return self._forgotten, self._writes.get(collection, 0)

    def answer(self, key: tuple) -> list | None:
        """A kept query answer, if no write to its collection (``key[0]``) committed since."""
        with self._metas_lock:
            got = self._results.get(key)
            if got is None or got[0] != self._stamp(key[0]):
                return None
            self._results.move_to_end(key)
            return got[1]

    def keep_answer(self, key: tuple, stamp: tuple[int, int], hits: list) -> None:
        """Keep ``hits`` for ``key`` unless its collection was written since ``stamp`` was read."""
        with self._metas_lock:
            if stamp != self._stamp(key[0]):
                return
            self._results[key] = (stamp, hits)
            while len(self._results) > QUERY_ANSWERS:
                self._results.popitem(last=False)

    def get(self, collection: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Metadata by id of the ``ids`` the mirror holds (shared dicts: read them, never change them)."""
        out: dict[str, dict[str, Any]] = {}
        missing: list[str] = []
        with self._metas_lock:
            cached, stamp = self._metas, self._stamp(collection)
            for i in ids:
                m = cached.get((collection, i))
                if m is None:
                    missing.append(i)
                else:
                    out[i] = m
        for i in range(0, len(missing), 900):
            chunk = missing[i : i + 900]
            rows = self._read(
                f"SELECT id, metadata FROM meta WHERE collection=? AND id IN ({','.join('?' * len(chunk))})",
                [collection, *chunk],
            )
            got = {r[0]: json.loads(r[1]) for r in rows}
            out.update(got)
            with self._metas_lock:
                if self._stamp(collection) != stamp:  # a write committed meanwhile: what was read may be older
                    continue
                for k, m in got.items():
                    cached[collection, k] = m
                while len(cached) > METADATA_CACHE:
                    cached.popitem(last=False)
        return out

    def documents(self, collection: str, ids: Sequence[str]) -> dict[str, str]:
        """Document text by id of the ``ids`` the mirror holds."""
        out: dict[str, str] = {}
        for i in range(0, len(ids), 900):
            chunk = list(ids[i : i + 900])
            out.update(
                self._read(
                    f"SELECT id, document FROM docs WHERE collection=? AND id IN ({','.join('?' * len(chunk))})",
                    [collection, *chunk],
                )
            )
        return out

    def select(self, collection: str, where: dict[str, Any]) -> list[str]:
        """Every id of ``collection`` whose metadata passes ``where`` (chroma's semantics, in SQLite:
        the interpreter lock is free meanwhile)."""
        condition, params = to_sql(where)
        return [
            r[0] for r in self._read(f"SELECT id FROM meta WHERE collection=? AND {condition}", [collection, *params])
        ]

    def count(self, collection: str) -> int:
        return self._read("SELECT COUNT(*) FROM meta WHERE collection=?", (collection,))[0][0]

    def unreached(self, collection: str) -> tuple[list[str], np.ndarray | None]:
        """The ids and vectors (rows) of ``collection``'s records chroma's search does not reach; kept
        in memory until the collection is written (a query reads them at every call)."""
        with self._metas_lock:
            stamp = self._stamp(collection)
            got = self._unreached.get(collection)
            if got is not None and got[0] == stamp:
                return got[1], got[2]
        rows = self._read("SELECT id, vector FROM unreached WHERE collection=?", (collection,))
        ids = [r[0] for r in rows]
        vecs = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]) if rows else None
        with self._metas_lock:
            if self._stamp(collection) == stamp:
                self._unreached[collection] = (stamp, ids, vecs)
        return ids, vecs

    def unreached_counts(self) -> dict[str, int]:
        return dict(self._read("SELECT collection, COUNT(*) FROM unreached GROUP BY collection"))

    def add_unreached(self, collection: str, vectors: dict[str, np.ndarray]) -> None:
        """Keep records already written as unreached (found so by a sweep), with their vectors."""
        try:
            with self._tx():
                self._insert_unreached(collection, vectors)
        finally:
            self._drop(collection, [])

    def _insert_unreached(self, collection: str, vectors: dict[str, np.ndarray]) -> None:
        self.conn.executemany(
            "INSERT INTO unreached(collection, id, vector) VALUES (?, ?, ?) "
            "ON CONFLICT(collection, id) DO UPDATE SET vector=excluded.vector",
            [(collection, i, np.asarray(v, dtype=np.float32).tobytes()) for i, v in vectors.items()],
        )

    def ids_after(self, collection: str, after: str, limit: int) -> list[str]:
        """Up to ``limit`` of ``collection``'s ids greater than ``after``, in order."""
        return [
            r[0]
            for r in self._read(
                "SELECT id FROM meta WHERE collection=? AND id>? ORDER BY id LIMIT ?", (collection, after, limit)
            )
        ]

    @contextmanager
    def _tx(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()
        self.conn.close()


class VectorIndex:
    """Chroma collections plus their mirror, for one store.

    Use ``with index.session() as state:`` around every read or write, and
    ``state = index.ready()`` inside it before touching chroma;
    ``state['seq']`` is the ledger seq the index reflects.
    """

    def __init__(self, settings: Settings, *, store_id: str, model: str):
        self.settings = settings
        self.store_id = store_id
        self.model = model
        self.mode = "server" if settings.chroma_url else "embedded"
        self._flock = FileLock(str(settings.home / "index.lock"))
        self._tlock = threading.RLock()
        self._client = None
        self._cols: dict[str, Any] = {}
        self._mirror: Mirror | None = None
        self._gen: str | None = None
        self._prev_gen: str | None = None  # the generation before this process's last write
        self._seen_dirty: str | None = None  # another process's write in progress, read beside (``_current``)
        self._holding = 0  # this process's threads inside the index lock
        self._sweep_at: dict[str, str] = {}  # sweep cursors moved by the write in progress (``sweep``)
        self._swept: dict[str, float] = {}  # when this process last swept each collection (monotonic)
        self._counts: dict[str, int] = {}
        self.rebuilds = 0  # times this process rebuilt the index from scratch
        # Queries that run without the index lock (``reading``); closing the client waits for them.
        self._rcv = threading.Condition()
        self._readers = 0
        self._closing = 0

    @property
    def where(self) -> str:
        """'embedded <path>' or 'server <url>'."""
        return f"server {self.settings.chroma_url}" if self.mode == "server" else f"embedded {self.settings.chroma_dir}"

    def _mirror_path(self) -> Path:
        if self.mode == "embedded":
            return self.settings.chroma_dir / MIRROR_FILE
        url = hashlib.sha256(self.settings.chroma_url.encode()).hexdigest()[:12]
        return self.settings.home / f"index-mirror-{url}.sqlite3"

    def _name(self, collection: str) -> str:
        return collection if self.mode == "embedded" else f"sb-{self.store_id[:16]}-{collection}"

    # -- sessions ------------------------------------------------------------

    @contextmanager
    def session(self, *, wait: bool = True) -> Iterator[dict[str, Any] | None]:
        """Hold the index lock; yields the state (seq, gen, ...). Opens no
        chroma client: a session that finds nothing to do stays cheap.

        With ``wait=False`` it yields None at once when another thread or
        process holds the lock (that holder is catching the index up anyway).
        """
        if wait:
            with self._tlock, self._flock, self._held():
                yield self._ensure_open()
            return
        if not self._tlock.acquire(blocking=False):
            yield None
            return
        try:
            try:
                self._flock.acquire(timeout=0)
            except Timeout:
                yield None
                return
            try:
                with self._held():
                    yield self._ensure_open()
            finally:
                self._flock.release()
        finally:
            self._tlock.release()

    @contextmanager
    def _held(self) -> Iterator[None]:
        # This process holds the index lock (for ``_writer_at_work``).
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1

    def peek_seq(self) -> int | None:
        """The ledger seq the index reflects, read without any lock (None when
        the index is not open yet or was replaced): enough to see that there
        is nothing to do."""
        mirror = self._mirror
        if mirror is None or mirror.replaced():
            return None
        try:
            return int(mirror.state().get("seq", 0))
        except (sqlite3.Error, ValueError):
            return None

    @contextmanager
    def reading(self) -> Iterator[bool]:
        """For ``query``: yields True when this process's chroma client is current (no other
        process wrote since it was opened), and holds no lock meanwhile, so queries run beside
        each other and beside this process's own index writes (chroma serializes inside).
        Yields False otherwise: then query inside ``session()`` after ``ready()``."""
        with self._rcv:
            fast = self._current()
            if fast:
                self._readers += 1
        try:
            yield fast
        finally:
            if fast:
                with self._rcv:
                    self._readers -= 1
                    self._rcv.notify_all()

    def _current(self) -> bool:
        mirror = self._mirror
        if self._closing or self._client is None or mirror is None or mirror.replaced():
            return False
        try:
            state = mirror.state()
        except sqlite3.Error:
            return False
        gen = state.get("gen")
        if gen is None:
            return False
        if gen in (self._gen, self._prev_gen):
            return True
        if self.mode == "server" and state.get("dirty") == "0":
            # Another process wrote, and finished. A chroma server is one view for every client, so
            # nothing is reopened: this process's kept answers and counts are dropped, as ``ready``
            # does, without the index lock (reading() calls this under its condition). Under the lock,
            # every search after another process's write waited behind whatever write held it next
            # (four workers on 16 cores: 4-21 % more calls/s without it, and another worker's lesson
            # found in half the time). A reset replaces the mirror file
            # (``replaced``), which still takes the slow way, and so does a write in progress (dirty):
            # its batch may be half in chroma.
            self._forget_kept(mirror)
            self._gen = gen
            return True
        if self.mode == "server" and self._writer_at_work():
            # Another process's write in progress (its generation, dirty): its batch may be half in
            # chroma, which a search may see. A hit is kept only when its id is in the mirror, and
            # the writer adds its rows there after chroma, so a half-written batch of new records is
            # simply not there yet, as any other caller's write may not be for up to a second; a
            # record it changes may read its new vector with its old metadata meanwhile. Waiting for
            # the index lock instead put whole writes of other processes (their upsert, the write
            # check, the mirror) in front of about one search in twenty, 100-240 ms each, and the
            # more processes write, the more often. Kept answers and counts
            # are dropped once per generation seen, so nothing kept from before this write or an
            # earlier one outlives it; the writer's own end (dirty 0) is adopted above as before.
            if gen != self._seen_dirty:
                self._forget_kept(mirror)
                self._seen_dirty = gen
            return True
        return False

    def _forget_kept(self, mirror: Mirror) -> None:
        """Drop this process's kept answers and decoded rows, and count the collections again from
        the mirror: another process wrote, or is writing."""
        mirror.forget()
        self._counts = {c: mirror.count(c) for c in COLLECTIONS}

    def _writer_at_work(self) -> bool:
        """Whether another process holds the index lock now. A writer holds it from marking the
        index dirty to marking it clean, so another process's dirty mark with the lock free, or
        held by this process (then no other process holds it), was left by a writer that died:
        that takes the locked way, which checks that the index reads back."""
        if self._holding:
            return False
        try:
            self._flock.acquire(timeout=0)
        except Timeout:
            return True
        self._flock.release()
        return False

    def _ensure_open(self) -> dict[str, Any]:
        if self._mirror is not None and self._mirror.replaced():
            self._close_all()
        if self._mirror is None:
            path = self._mirror_path()
            if not path.exists():
                d = self.settings.chroma_dir
                has_data = self.mode == "embedded" and d.exists() and any(d.iterdir())
                return self.reset("it has no bookkeeping file" if has_data else None)
            try:
                self._mirror = Mirror(path)
                if not self._mirror.state():
                    return self.reset("its bookkeeping file is empty")
            except sqlite3.DatabaseError as e:
                return self.reset(f"its bookkeeping file is unreadable ({e})")
        state = self._state()
        if state.get("store_id") != self.store_id:
            return self.reset("it belongs to another store")
        if state.get("model") != self.model:
            return self.reset(f"it was built with embedding model {state.get('model')!r}, not {self.model!r}")
        if state.get("format") != INDEX_FORMAT:
            return self.reset("it was built by an older release, with texts and metadata in chroma", keep=False)
        return state

    def ready(self) -> dict[str, Any]:
        """Open (or reopen, if another process wrote since) the chroma client;
        a directory chroma cannot open or read back is moved aside and the
        index reset (then ``state['seq']`` is 0). Returns the state. Call
        inside ``session()`` before touching chroma."""
        state = self._state()
        if state.get("gen") != self._gen and self._mirror is not None:
            self._mirror.forget()
        if self._client is not None and self.mode == "server" and state.get("gen") != self._gen:
            # A server is one consistent view for every client: only our
            # cached counts need refreshing after another process wrote.
            self.refresh_counts()
            self._gen = state.get("gen")
        if self._client is None or state.get("gen") != self._gen:
            try:
                self._open_client()
            except BaseException as e:
                if not chroma_failure(e):
                    raise
                return self.reset(f"chroma cannot open it ({type(e).__name__}: {e})")
            self._gen = state.get("gen")
        if state.get("dirty") == "1":
            try:
                self._probe()
            except BaseException as e:
                if not chroma_failure(e):
                    raise
                return self.reset(f"a writer died mid-write and it does not read back ({type(e).__name__}: {e})")
        return state

    def _state(self) -> dict[str, Any]:
        assert self._mirror is not None
        raw = self._mirror.state()
        out: dict[str, Any] = dict(raw)
        out["seq"] = int(raw.get("seq", 0))
        return out

    def _open_client(self) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        self._close_client()
        chroma_settings = ChromaSettings(anonymized_telemetry=False)
        if self.mode == "embedded":
            self.settings.chroma_dir.mkdir(parents=True, exist_ok=True)
            try:
                client = chromadb.PersistentClient(path=str(self.settings.chroma_dir), settings=chroma_settings)
            except BaseException:
                _forget_system(str(self.settings.chroma_dir))
                raise
        else:
            client = _http_client(self.settings.chroma_url, self.settings.chroma_token, chroma_settings)
        self._client = client
        self._cols = {
            c: client.get_or_create_collection(
                self._name(c), metadata=dict(COLLECTION_METADATA), embedding_function=None
            )
            for c in COLLECTIONS
        }
        self.refresh_counts()
        if self.mode == "server":
            self._check_server_marker(client)

    def _check_server_marker(self, client) -> None:
        # The server may have been wiped or re-pointed while our mirror says
        # otherwise: a marker collection carries the generation we wrote.
        marker = client.get_or_create_collection(self._name("marker"), embedding_function=None)
        theirs = (marker.metadata or {}).get("gen")
        if theirs is not None and theirs != self._state().get("gen"):
            raise StoreError("the chroma server holds another generation of this index")
        if theirs is None and self._state().get("seq", 0) > 0:
            raise StoreError("the chroma server lost this index")

    def _probe(self) -> None:
        dim = int(self._state().get("dim", 0))
        if not dim:
            return
        probe = np.zeros(dim, dtype=np.float32)
        probe[0] = 1.0
        for col in self._cols.values():
            if col.count():
                col.query(query_embeddings=[probe], n_results=1, include=["distances"])

    # -- writing -------------------------------------------------------------

    def begin_write(self) -> None:
        """Mark the index dirty with a new generation before touching chroma,
        so a crash mid-write is noticed and other processes reopen."""
        gen = uuid.uuid4().hex
        # Known as this process's own before it is published, so lock-free readers never
        # mistake this write for another process's (which would send them the slow way).
        self._prev_gen, self._gen = self._gen, gen
        self._sweep_at = {}
        self._mirror.set_state(gen=gen, dirty=1)
        if self.mode == "server":
            self._client.get_or_create_collection(self._name("marker"), embedding_function=None).modify(
                metadata={"gen": gen, "store_id": self.store_id}
            )

    def end_write(self, seq: int, dim: int | None = None) -> None:
        """Record that the index now reflects the ledger up to ``seq`` (and where the sweeps stand)."""
        extra = {"dim": dim} if dim else {}
        cursors, self._sweep_at = self._sweep_at, {}
        self._mirror.set_state(seq=seq, dirty=0, **extra, **cursors)

    def upsert(self, docs: Sequence[IndexDoc], embeddings: np.ndarray) -> None:
        """Write documents (all of one collection) with their embeddings."""
        if not docs:
            return
        collection = docs[0].collection
        ids = [d.id for d in docs]
        vecs = np.asarray(embeddings, dtype=np.float32)
        self._cols[collection].upsert(ids=ids, embeddings=vecs)
        unreached = self._unreached_of(collection, ids, vecs)
        self._mirror.put(collection, ids, [d.metadata for d in docs], [d.text for d in docs], unreached)
        now = time.monotonic()
        if now - self._swept.get(collection, -SWEEP_EVERY_S) >= SWEEP_EVERY_S:
            self._swept[collection] = now
            self.sweep(collection, SWEEP_BATCH, skip=set(ids))

    def sweep(self, collection: str, limit: int, skip: set[str] = frozenset()) -> tuple[int, int]:
        """Look again for up to ``limit`` older records of ``collection`` by their own vectors, from where the
        last sweep of it stopped (the cursor goes round the collection in id order, shared by every process
        through the mirror; it is saved by ``end_write``), and keep those chroma's search no longer reaches
        as unreached (``_unreached_of``; on a server each is written again twice first). Records already kept
        so and those in ``skip`` (just checked) are passed over. Returns (records looked for, newly kept).
        Call between ``begin_write`` and ``end_write``."""
        if limit <= 0:
            return 0, 0
        key = f"sweep.{collection}"
        after = self._sweep_at[key] if key in self._sweep_at else self._mirror.state().get(key, "")
        ids = self._mirror.ids_after(collection, after, limit)
        # At the end of the collection the next sweep starts again from its first record.
        self._sweep_at[key] = ids[-1] if len(ids) == limit else ""
        return self._look_again(collection, [i for i in ids if i not in skip])

    def check_page(self, collection: str, after: str, seq: int) -> tuple[str | None, int, int]:
        """One page of a full check (``skillbase memory check``, and after a rebuild): look for the next
        SWEEP_PAGE records of ``collection`` after id ``after`` by their own vectors, as ``sweep`` does.
        Only when some are no longer reached is anything written: they are kept as unreached in a write of
        their own that leaves the index at ``seq``, so a check beside live servers makes them reopen
        nothing. Returns (the last id looked at, None past the end; records looked for; newly kept). Call
        inside ``session()`` after ``ready()``."""
        ids = self._mirror.ids_after(collection, after, SWEEP_PAGE)
        if not ids:
            return None, 0, 0
        looked, lost = self._look_again(collection, ids, report=False, seq=seq)
        return ids[-1], looked, lost

    def _look_again(
        self, collection: str, ids: list[str], report: bool = True, seq: int | None = None
    ) -> tuple[int, int]:
        """Look for records by their own vectors (from chroma), passing over those already kept as
        unreached, and keep those its search does not reach; returns (records looked for, newly kept).
        Inside a write, or with ``seq`` outside one: then a write of its own is begun only when some are
        lost, and only those are looked for again in it."""
        kept = set(self._mirror.unreached(collection)[0])
        ids = [i for i in ids if i not in kept]
        if not ids:
            return 0, 0
        got = self._cols[collection].get(ids=ids, include=["embeddings"])
        if not got["ids"]:
            return 0, 0
        ids, vecs = list(got["ids"]), np.asarray(got["embeddings"], dtype=np.float32)
        looked = len(ids)
        if seq is not None:
            missing = self._missing(collection, ids, vecs)
            if not missing:
                return looked, 0
            ids, vecs = [ids[n] for n in missing], vecs[missing]
            self.begin_write()
        lost = self._unreached_of(collection, ids, vecs, report)
        if lost:
            self._mirror.add_unreached(collection, lost)
        if seq is not None:
            self.end_write(seq)
        return looked, len(lost)

    def _missing(self, collection: str, ids: list[str], vecs: np.ndarray) -> list[int]:
        """The positions of the records chroma's search does not return among the four nearest to their own
        vectors, not counting one merely behind four exact copies of its vector (the same text stored again)."""
        got = self._cols[collection].query(query_embeddings=vecs, n_results=4, include=["distances"])
        return [
            n
            for n, (i, near, dist) in enumerate(zip(ids, got["ids"], got["distances"]))
            if i not in near and (len(near) < 4 or dist[-1] > SAME_VECTOR)
        ]

    def _unreached_of(
        self, collection: str, ids: list[str], vecs: np.ndarray, report: bool = True
    ) -> dict[str, np.ndarray]:
        """The records (just written, or older ones a ``sweep`` looks for again) that chroma's
        nearest-neighbour search does not find by their own vectors, with those vectors: the mirror keeps
        them and every query adds them by exact cosine.

        Chroma's HNSW graph can leave a record without a way in: no search reaches it, even asking for
        every record, while ``get`` returns it. Seen on a chroma server (a lesson missing from every
        search for a minute, about one start in five of two workers) and embedded (two records in about
        3,900 write batches under 16 clients; chroma alone, batches of near-duplicate vectors written
        beside queries lost one record in about 70 batches, still lost after reopening). On a server,
        deleting and adding the record again made it found; embedded it did not. A record found when
        written can still lose its way in later, as later writes rewrite the graph's links: each write's
        ``sweep`` looks for older records again, and ``check_page`` for all of them (figures on
        docs/performance.md). Without ``report`` nothing is
        logged (a full check reports its totals instead)."""
        col = self._cols[collection]
        rewrites = 2 if self.mode == "server" else 0
        for attempt in range(rewrites + 1):
            lost = self._missing(collection, ids, vecs)
            if not lost:
                return {}
            ids, vecs = [ids[n] for n in lost], vecs[lost]
            if attempt < rewrites:
                # Handled, not the user's problem: kept to debug logs (a newcomer read it as corruption).
                if report:
                    log.debug(
                        "chroma left %d record(s) of %s out of its search; writing them again: %s",
                        len(ids),
                        collection,
                        ids[:5],
                    )
                col.delete(ids=ids)
                col.add(ids=ids, embeddings=vecs)
        if report:
            log.debug(
                "chroma's search at %s does not reach %d record(s) of %s by their own vectors; the index "
                "answers them from its mirror: %s",
                self.where,
                len(ids),
                collection,
                ids[:5],
            )
        return dict(zip(ids, vecs))

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        if ids:
            self._cols[collection].delete(ids=list(ids))
            self._mirror.delete(collection, ids)

    def refresh_counts(self) -> dict[str, int]:
        self._counts = {c: self._mirror.count(c) for c in COLLECTIONS}
        return dict(self._counts)

    # -- reading -------------------------------------------------------------

    def query(
        self,
        collection: str,
        embedding: np.ndarray,
        k: int,
        where: dict[str, Any] | None,
        documents: bool = True,
        exhaustive: bool = True,
    ) -> list[Hit]:
        """The ``k`` nearest records of a collection that pass ``where``.

        chroma answers the kNN with distances only; metadata and texts come
        from the mirror, filtered there with chroma's semantics over the
        nearest k (unfiltered) or 256 then 2048 ids. When even that does not
        fill ``k`` and the collection is larger, the mirror selects every
        matching id and chroma searches among those only, unless
        ``exhaustive=False``, which returns the matches among the 2048 nearest
        instead. ``documents=False`` leaves ``Hit.document`` empty and skips
        fetching the texts. Call inside ``session()``.
        """
        if collection not in self._cols:
            raise InvalidInput(f"unknown collection {collection!r}", hint=f"one of {', '.join(COLLECTIONS)}")
        mirror = self._mirror
        key = (
            collection,
            embedding.tobytes(),
            k,
            json.dumps(where, sort_keys=True) if where else None,
            documents,
            exhaustive,
        )
        kept = mirror.answer(key)
        if kept is not None:
            return [_copy_hit(h) for h in kept]
        stamp = mirror.stamp(collection)
        hits = self._query(collection, embedding, k, where, documents, exhaustive)
        mirror.keep_answer(key, stamp, hits)
        return [_copy_hit(h) for h in hits]

    def _query(
        self,
        collection: str,
        embedding: np.ndarray,
        k: int,
        where: dict[str, Any] | None,
        documents: bool,
        exhaustive: bool,
    ) -> list[Hit]:
        cols = self._cols
        total = self._counts.get(collection) or cols[collection].count()
        if total == 0:
            return []
        col = cols[collection]
        for n in (k,) if where is None else OVERFETCH:
            n = min(n, total)
            res = col.query(query_embeddings=[embedding], n_results=n, include=["distances"])
            ids, dists = res["ids"][0], res["distances"][0]
            metas = self._mirror.get(collection, ids)
            want = n
            while where is None and len(ids) == n and (short := want - sum(i in metas for i in ids)) > 0:
                # Records in chroma but not in the mirror: another process's write in progress (chroma
                # first). They are not answered yet; the nearest ones that are take their places.
                n += short
                res = col.query(query_embeddings=[embedding], n_results=n, include=["distances"])
                ids, dists = res["ids"][0], res["distances"][0]
                metas = self._mirror.get(collection, ids)
            keep = [(i, d) for i, d in zip(ids, dists) if i in metas and (where is None or matches(where, metas[i]))][
                :k
            ]
            if len(keep) == k or n >= total or where is None or (not exhaustive and n == OVERFETCH[-1]):
                return self._fetch(
                    collection, *self._add_unreached(collection, embedding, k, where, keep, metas), documents
                )
        allowed = self._mirror.select(collection, where)
        if not allowed:
            return []
        res = col.query(
            query_embeddings=[embedding], n_results=min(k, len(allowed)), ids=allowed, include=["distances"]
        )
        ids, dists = res["ids"][0], res["distances"][0]
        metas = self._mirror.get(collection, ids)
        keep = [(i, d) for i, d in zip(ids, dists) if i in metas]
        return self._fetch(collection, *self._add_unreached(collection, embedding, k, where, keep, metas), documents)

    def _add_unreached(
        self,
        collection: str,
        embedding: np.ndarray,
        k: int,
        where: dict[str, Any] | None,
        keep: list[tuple[str, float]],
        metas: dict[str, dict],
    ) -> tuple[list[tuple[str, float]], dict[str, dict]]:
        """``keep`` (id, distance), nearest first, with the records chroma's search does not reach
        (``_unreached_of``) that pass ``where`` put in their places by exact cosine distance."""
        ids, vecs = self._mirror.unreached(collection)
        if not ids:
            return keep, metas
        dist = 1.0 - vecs @ np.asarray(embedding, dtype=np.float32)
        extra = self._mirror.get(collection, ids)
        seen = {i for i, _ in keep}
        found = [
            (i, float(d))
            for i, d in zip(ids, dist)
            if i in extra and i not in seen and (where is None or matches(where, extra[i]))
        ]
        if not found:
            return keep, metas
        return sorted(keep + found, key=lambda x: x[1])[:k], {**metas, **extra}

    def _fetch(
        self, collection: str, keep: list[tuple[str, float]], metas: dict[str, dict], documents: bool
    ) -> list[Hit]:
        if not keep:
            return []
        docs = self._mirror.documents(collection, [i for i, _ in keep]) if documents else {}
        return [
            Hit(
                collection=collection,
                id=i,
                distance=float(d),
                score=1.0 - float(d),
                metadata=metas[i],
                document=docs.get(i) or "",
            )
            for i, d in keep
        ]

    def counts(self) -> dict[str, int]:
        """Records per collection, as chroma counts them. Call inside ``session()``."""
        return {c: col.count() for c, col in self._cols.items()}

    def unreached_counts(self) -> dict[str, int]:
        """Records per collection that chroma's search does not reach (answered from the mirror)."""
        return self._mirror.unreached_counts()

    def graphs(self) -> dict[str, dict[str, int]]:
        """Each collection's HNSW graph as chroma made it: links a node and the candidates each insert
        weighs (``COLLECTION_METADATA`` for collections made by this release). Call inside ``session()``."""
        out = {}
        for c, col in self._cols.items():
            hnsw = (getattr(col, "configuration", None) or {}).get("hnsw") or {}
            if hnsw.get("max_neighbors") and hnsw.get("ef_construction"):
                out[c] = {"links": int(hnsw["max_neighbors"]), "candidates": int(hnsw["ef_construction"])}
        return out

    @staticmethod
    def sparser_than_made_now(graphs: dict[str, dict[str, int]]) -> list[str]:
        """The collections whose graph is sparser than this release makes (``memory reindex`` makes them again)."""
        return sorted(c for c, g in graphs.items() if g["links"] < GRAPH_LINKS or g["candidates"] < GRAPH_CANDIDATES)

    def mirror_counts(self) -> dict[str, int]:
        """Records per collection in the metadata mirror. Call inside ``session()``."""
        return {c: self._mirror.count(c) for c in COLLECTIONS}

    # -- rebuilding ----------------------------------------------------------

    def reset(self, reason: str | None, keep: bool | None = None) -> dict[str, Any]:
        """Empty the index so the next catch-up rebuilds it from the ledger.
        ``reason`` (when given) is reported as a MemoryIndexWarning; an
        embedded chroma dir is then moved aside for inspection unless ``keep``
        is False (by default, kept exactly when there is a reason). Call inside
        ``session()``."""
        if reason:
            where = self.where
            msg = f"the vector index at {where} is rebuilt from the ledger: {reason}"
            log.warning(msg)
            warnings.warn(msg, MemoryIndexWarning, stacklevel=4)
        self._close_all()
        self._sweep_at = {}
        if self.mode == "embedded":
            self._move_aside(keep=bool(reason) if keep is None else keep)
        else:
            self._drop_server_collections()
            self._mirror_path().unlink(missing_ok=True)
            for suffix in ("-wal", "-shm"):
                Path(str(self._mirror_path()) + suffix).unlink(missing_ok=True)
        self._mirror = Mirror(self._mirror_path())
        gen = uuid.uuid4().hex
        self._mirror.set_state(seq=0, gen=gen, dirty=0, store_id=self.store_id, model=self.model, format=INDEX_FORMAT)
        self._open_client()
        self._gen = gen
        if self.mode == "server":
            self._client.get_or_create_collection(self._name("marker"), embedding_function=None).modify(
                metadata={"gen": gen, "store_id": self.store_id}
            )
        self.rebuilds += 1
        return self._state()

    def _move_aside(self, keep: bool) -> None:
        d = self.settings.chroma_dir
        if not d.exists():
            return
        if keep:
            for old in d.parent.glob(f"{d.name}.broken-*"):
                shutil.rmtree(old, ignore_errors=True)
            d.rename(d.with_name(f"{d.name}.broken-{time.strftime('%Y%m%dT%H%M%S')}"))
        else:
            shutil.rmtree(d)

    def _drop_server_collections(self) -> None:
        from chromadb.config import Settings as ChromaSettings

        client = _http_client(
            self.settings.chroma_url, self.settings.chroma_token, ChromaSettings(anonymized_telemetry=False)
        )
        try:
            existing = {c.name for c in client.list_collections()}
            for c in (*COLLECTIONS, "marker"):
                if self._name(c) in existing:
                    client.delete_collection(self._name(c))
        finally:
            _close_http_session(client)
            client.close()

    def _close_client(self) -> None:
        with self._draining():
            if self._client is not None:
                _close_http_session(self._client)
                try:
                    self._client.close()
                except Exception as e:  # a broken client must not block reopening
                    log.debug("closing the chroma client failed: %s", e)
            self._client, self._cols, self._gen, self._prev_gen, self._seen_dirty = None, {}, None, None, None

    @contextmanager
    def _draining(self) -> Iterator[None]:
        # Lock-free queries in flight finish first, and none starts until the swap is done.
        with self._rcv:
            self._closing += 1
            while self._readers:
                self._rcv.wait()
        try:
            yield
        finally:
            with self._rcv:
                self._closing -= 1

    def _close_all(self) -> None:
        with self._draining():
            self._close_client()
            if self._mirror is not None:
                self._mirror.close()
                self._mirror = None

    def close(self) -> None:
        with self._tlock:
            self._close_all()


def copy_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """A caller's own copy of a record's index metadata (its values are scalars or lists of them)."""
    return {k: list(v) if isinstance(v, list) else v for k, v in meta.items()}


def _copy_hit(h: Hit) -> Hit:
    """A caller's own copy of a kept hit."""
    return Hit.model_construct(
        collection=h.collection,
        id=h.id,
        distance=h.distance,
        score=h.score,
        metadata=copy_metadata(h.metadata),
        document=h.document,
    )


def _close_http_session(client) -> None:
    # chromadb's HTTP client does not close its httpx session when the client
    # is closed; its sockets would linger until garbage collection.
    # Its admin client holds a second session of its own.
    for c in (client, getattr(client, "_admin_client", None)):
        session = getattr(getattr(c, "_server", None), "_session", None)
        if session is not None:
            try:
                session.close()
            except Exception as e:
                log.debug("closing the chroma HTTP session failed: %s", e)


def _forget_system(path: str) -> None:
    # chromadb caches one System per path and keeps it even when starting it
    # failed; every later client for the path would reuse the broken one.
    from chromadb.api.shared_system_client import SharedSystemClient

    system = SharedSystemClient._identifier_to_system.pop(path, None)
    SharedSystemClient._identifier_to_refcount.pop(path, None)
    if system is not None:
        try:
            system.stop()
        except Exception as e:
            log.debug("stopping a broken chroma system failed: %s", e)


def _http_client(url: str, token: str | None, chroma_settings):
    from urllib.parse import urlparse

    import chromadb

    u = urlparse(url if "://" in url else f"http://{url}")
    if not u.hostname:
        raise StoreError(f"SKILLBASE_CHROMA_URL={url!r} has no host", hint="e.g. http://127.0.0.1:8000")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return chromadb.HttpClient(
        host=u.hostname,
        port=u.port or (443 if u.scheme == "https" else 8000),
        ssl=u.scheme == "https",
        headers=headers,
        settings=chroma_settings,
    )
