"""BM25 over skills, experiences and attempts, so exact identifiers are found.

The index follows the ledger's change log. Each record becomes a short
document (an attempt is indexed by its summary, techniques, notes and notable
identifiers, not its whole source) whose tokens are kept in a small SQLite
table under ``settings.cache_dir/lexical``. Per collection there is a *main*
bm25s index, saved to disk with the ledger seq it reflects, plus a *delta* of
records written since, scored with the main index's statistics. Each process
reads new changes straight from the ledger into its delta, under no lock other
processes take. A delta that grows past a tenth of the main index (or 500
records) triggers a rebuild from the token table, which is brought up to date
first (under a file lock the processes share), so recall never re-reads the
whole ledger and a fresh lesson is searchable on the very next query.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
import sqlite3
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout
from skillbase.memory.filters import matches
from skillbase.retrievers.features import _notable
from skillbase.retrievers.tokens import tokenize

from skillbase.models import Attempt, Experience, Skill

log = logging.getLogger("skillbase.retrievers")

KIND_COLLECTION = {"skill": "skills", "experience": "experiences", "attempt": "attempts"}
FORMAT = 1
K1, B = 1.5, 0.75
MIN_REBUILD = 500
REBUILD_FRACTION = 0.1
CHANGE_PAGE = 2000
BACKLOG_FACTOR = 4  # a delta this many times its bound waits for the token table's lock to rebuild


@dataclass
class Doc:
    """One record as the lexical index sees it."""

    id: str
    tokens: list[str]
    meta: dict[str, Any]


# ---------------------------------------------------------------------------
# Documents
# ---------------------------------------------------------------------------


def skill_doc(s: Skill) -> Doc:
    w = s.applies_when
    text = " ".join(
        [
            s.name.replace("-", " "),
            s.name,
            s.description,
            " ".join(s.techniques),
            " ".join(t.replace("-", " ") for t in s.techniques),
            " ".join(w.families),
            " ".join(w.bottlenecks),
            s.expected_effect,
            " ".join(s.pitfalls),
            s.body[:6000],
        ]
    )
    meta = {"status": s.status, "techniques": list(s.techniques), "families": list(w.families), "version": s.version}
    return Doc(s.name, tokenize(text), meta)


def experience_doc(e: Experience) -> Doc:
    text = " ".join(
        x
        for x in [
            e.title,
            e.lesson,
            e.conditions,
            e.family or "",
            e.dtype or "",
            f"{e.bottleneck}-bound" if e.bottleneck else "",
            e.arch or "",
            e.task or "",
            " ".join(e.techniques),
            " ".join(t.replace("-", " ") for t in e.techniques),
        ]
        if x
    )
    meta = _meta(
        family=e.family,
        dtype=e.dtype,
        arch=e.arch,
        gain=e.gain,
        task=e.task,
        signature=e.task_signature,
        bottleneck=e.bottleneck,
        techniques=list(e.techniques),
        created=e.created_at.timestamp(),
        source=e.source,
    )
    return Doc(e.id, tokenize(text), meta)


def attempt_doc(a: Attempt) -> Doc:
    outcome = a.verdict + (f" {a.speedup_vs_eager:.2f}x" if a.speedup_vs_eager is not None else "")
    kernels = re.findall(r"def\s+(\w+)\s*\(|__global__\s+void\s+(\w+)", a.source[:20000])
    text = " ".join(
        [
            a.task,
            a.task_signature.replace(":", " "),
            outcome,
            a.bottleneck,
            a.language or "",
            " ".join(a.techniques),
            " ".join(t.replace("-", " ") for t in a.techniques),
            a.notes[:300],
            " ".join(_notable(a.source[:20000])),
            " ".join(sorted(set(re.findall(r"\btl\.\w+", a.source[:20000])))),
            " ".join(n.replace("_", " ") for pair in kernels for n in pair if n),
        ]
    )
    meta = _meta(
        task=a.task,
        signature=a.task_signature,
        family=a.family,
        dtype=a.dtype,
        arch=a.arch,
        verdict=a.verdict,
        speedup=a.speedup_vs_eager,
        techniques=list(a.techniques),
        created=a.created_at.timestamp(),
        has_parent=a.parent_id is not None,
    )
    return Doc(a.id, tokenize(text), meta)


def _meta(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None and v != [] and v != ""}


# ---------------------------------------------------------------------------
# One collection's index: a saved bm25s main index plus an in-memory delta
# ---------------------------------------------------------------------------


@dataclass
class Segment:
    """The main (bm25s) index of one collection."""

    ids: list[str]
    metas: list[dict[str, Any]]
    model: Any  # bm25s.BM25
    idf: dict[str, float]
    avgdl: float
    seq: int
    row: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.ids)


class CollectionIndex:
    """BM25 over one collection: ``search(tokens, n, where)``."""

    def __init__(self, collection: str):
        self.collection = collection
        self.main: Segment | None = None
        self.delta: dict[str, Doc] = {}
        self.hidden: set[int] = set()  # main rows superseded by the delta
        # The delta's postings (token -> {id: term frequency}) and lengths, kept as records come and
        # go: a query scores only the delta records that share a word with it.
        self._postings: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._total_length = 0

    @property
    def size(self) -> int:
        return (
            (self.main.n if self.main else 0)
            - len(self.hidden)
            + sum(1 for i in self.delta if not self.main or i not in self.main.row)
        )

    def put(self, doc: Doc) -> None:
        self._unpost(doc.id)
        self.delta[doc.id] = doc
        for token, f in Counter(doc.tokens).items():
            self._postings.setdefault(token, {})[doc.id] = f
        self._lengths[doc.id] = len(doc.tokens)
        self._total_length += len(doc.tokens)
        if self.main is not None and doc.id in self.main.row:
            self.hidden.add(self.main.row[doc.id])

    def remove(self, doc_id: str) -> None:
        self._unpost(doc_id)
        self.delta.pop(doc_id, None)
        if self.main is not None and doc_id in self.main.row:
            self.hidden.add(self.main.row[doc_id])

    def clear_delta(self) -> None:
        """Forget the delta (its records are in a new main index)."""
        self.delta.clear()
        self._postings.clear()
        self._lengths.clear()
        self._total_length = 0

    def _unpost(self, doc_id: str) -> None:
        old = self.delta.get(doc_id)
        if old is None:
            return
        for token in set(old.tokens):
            post = self._postings.get(token)
            if post is not None:
                post.pop(doc_id, None)
                if not post:
                    del self._postings[token]
        self._total_length -= self._lengths.pop(doc_id, 0)

    def needs_rebuild(self, slack: float = 1.0) -> bool:
        """Whether the delta outgrew its bound (``slack`` times it) or there is no main index yet."""
        n = self.main.n if self.main else 0
        bound = slack * max(MIN_REBUILD, REBUILD_FRACTION * n)
        return len(self.delta) > bound or (self.main is None and len(self.delta) > (slack - 1) * MIN_REBUILD)

    def search(self, tokens: list[str], n: int, where: dict[str, Any] | None = None) -> list[tuple[str, float, dict]]:
        """The ``n`` best (id, score, meta) for the query tokens, best first;
        only documents that share a token with the query (score > 0)."""
        qtok = list(dict.fromkeys(tokens))
        out: list[tuple[str, float, dict]] = []
        if self.main is not None and self.main.n:
            out += self._search_main(qtok, n, where)
        if self.delta:
            out += self._search_delta(qtok, where)
        out.sort(key=lambda x: -x[1])
        return out[:n]

    def _search_main(self, qtok: list[str], n: int, where) -> list[tuple[str, float, dict]]:
        m = self.main
        ids = m.model.get_tokens_ids(qtok)
        if not ids:
            return []
        scores = m.model.get_scores_from_ids(ids)
        if self.hidden:
            scores[list(self.hidden)] = 0.0
        want = min(len(scores), n * 4 if where else n)
        top = np.argpartition(-scores, want - 1)[:want] if want < len(scores) else np.arange(len(scores))
        res = []
        for i in top[np.argsort(-scores[top])]:
            s = float(scores[i])
            if s <= 0:
                break
            meta = m.metas[i]
            if where is None or matches(where, meta):
                res.append((m.ids[i], s, meta))
        return res[:n]

    def _search_delta(self, qtok: list[str], where) -> list[tuple[str, float, dict]]:
        if not self.delta:
            return []
        n_docs = max(self.size, 1)
        avgdl = self.main.avgdl if self.main else self._total_length / len(self.delta)
        avgdl = max(avgdl, 1e-9)
        scores: dict[str, float] = {}
        for t in qtok:  # the query's words in order, so each record's sum adds up as a scan would
            post = self._postings.get(t)
            if not post:
                continue
            idf = self.main.idf.get(t) if self.main else None
            if idf is None:  # a word the main index has never seen: as rare as can be
                idf = math.log(1 + (n_docs - 1 + 0.5) / 1.5)
            for doc_id, f in post.items():
                dl = self._lengths[doc_id]
                scores[doc_id] = scores.get(doc_id, 0.0) + idf * f / (K1 * ((1 - B) + B * dl / avgdl) + f)
        res = []
        for doc_id, doc in self.delta.items():  # in the delta's order: ties rank as they always did
            s = scores.get(doc_id)
            if s and s > 0 and (where is None or matches(where, doc.meta)):
                res.append((doc_id, s, doc.meta))
        return res


def _bm25s():
    """bm25s, imported without JAX. Where JAX is installed, importing bm25s ran a JAX operation to
    pick its optional top-k backend, which starts JAX on the default device: on a GPU machine every
    server process took about three quarters of the GPU's memory that way (JAX preallocates), the
    memory the kernels being measured need, and eight `serve --workers` processes ran the GPU out of
    memory (recalls failed). This index never uses that backend. A JAX the caller imported already
    is left as it is.

    bm25s also sets its own logger to DEBUG when imported, so an application with any root handler
    (``logging.basicConfig(level=logging.WARNING)``, or the MCP SDK's) printed "Building index from
    tokens" on every index built: imported here first, that logger goes to WARNING."""
    if "bm25s" not in sys.modules:
        hide_jax = "jax" not in sys.modules
        if hide_jax:
            sys.modules["jax"] = None  # type: ignore[assignment]  # `import jax` raises ImportError meanwhile
        try:
            import bm25s  # noqa: F401
        finally:
            if hide_jax and sys.modules.get("jax", 0) is None:
                del sys.modules["jax"]
        if logging.getLogger("bm25s").level == logging.DEBUG:
            logging.getLogger("bm25s").setLevel(logging.WARNING)
    import bm25s

    return bm25s


def build_segment(docs: list[Doc], seq: int) -> Segment:
    """A bm25s index over ``docs`` (at least one)."""
    bm25s = _bm25s()
    model = bm25s.BM25(k1=K1, b=B, method="lucene")
    corpus = [d.tokens or [""] for d in docs]
    model.index(corpus, show_progress=False)
    return _segment(model, [d.id for d in docs], [d.meta for d in docs], seq)


def _segment(model, ids: list[str], metas: list[dict], seq: int) -> Segment:
    indptr = model.scores["indptr"]
    df = np.diff(indptr)
    n = model.scores["num_docs"]
    idf = {
        tok: math.log(1 + (n - int(df[i]) + 0.5) / (int(df[i]) + 0.5))
        for tok, i in model.vocab_dict.items()
        if i < len(df)
    }
    # bm25s keeps no document lengths: the caller sets avgdl (computed at
    # build time, saved beside the index).
    return Segment(
        ids=ids, metas=metas, model=model, idf=idf, avgdl=1.0, seq=seq, row={i: r for r, i in enumerate(ids)}
    )


# ---------------------------------------------------------------------------
# The retriever: keeps the indexes in step with the ledger
# ---------------------------------------------------------------------------


class LexicalRetriever:
    """BM25 search over the store's skills, experiences and attempts.

    ``search(tokens, kind, n, where)`` brings the index up to date with the
    ledger first (cheap when nothing changed). Safe to share between threads;
    several processes may share one cache directory.
    """

    def __init__(self, store, cache_dir: Path):
        self.store = store
        self.dir = Path(cache_dir) / "lexical"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._flock = FileLock(str(self.dir / "lexical.lock"))
        self._db = _open_docs(self.dir / "docs.sqlite3")
        self.indexes = {kind: CollectionIndex(col) for kind, col in KIND_COLLECTION.items()}
        self.seq = 0
        self._store_id = store.ledger.store_id
        self._loaded = False

    # -- reading -------------------------------------------------------------

    def search(self, tokens: list[str], kind: str, n: int, where: dict[str, Any] | None = None):
        """The ``n`` best (id, score, meta) of one kind ('skill', 'experience',
        'attempt') for the query tokens, best first."""
        self.refresh()
        with self._lock:
            return self.indexes[kind].search(tokens, n, where)

    # -- keeping up ----------------------------------------------------------

    def refresh(self) -> None:
        """Apply ledger changes since the last call; rebuild an index whose
        delta grew too large.

        The changes come straight from the ledger into this process's indexes, under no lock
        other processes take: several server processes over one store all found new changes at
        nearly every search, and each took the token table's file lock to write them there first.
        That lock is polled (a waiter sleeps between tries), so eight processes queued on it: the
        lexical step was the largest part of recall's slowest 5 % on 16 cores. The shared token table is written when an index is rebuilt, which reads it."""
        with self._lock:
            if not self._loaded:
                self._load()
            target = self.store.seq
            if target <= self.seq:  # nothing new (a recall's pinned seq may be behind this index)
                return
            self._apply_changes(target)
            if not any(idx.needs_rebuild() for idx in self.indexes.values()):
                return
            # Another process writing the table or rebuilding: the delta answers meanwhile, and the
            # next refresh tries again; only a delta grown far past its bound waits for the lock.
            if not self._flock_now(wait=any(idx.needs_rebuild(slack=BACKLOG_FACTOR) for idx in self.indexes.values())):
                return
            try:
                self._catch_up_docs()
                for kind, idx in self.indexes.items():
                    if idx.needs_rebuild():
                        self._rebuild(kind)
            finally:
                self._flock.release()

    def _flock_now(self, wait: bool) -> bool:
        """Take the token table's file lock; without ``wait``, only if nobody holds it now."""
        try:
            self._flock.acquire(timeout=-1 if wait else 0)
        except Timeout:
            return False
        return True

    def _apply_changes(self, target: int) -> None:
        """Ledger changes after this index's seq, up to ``target``, into the indexes in memory."""
        seq = self.seq
        while seq < target:
            changes = self.store.changes(after=seq, limit=CHANGE_PAGE)
            if not changes:
                break
            for kind, doc_id, change_seq, doc in self._docs_of(changes):
                idx = self.indexes[kind]
                if idx.main is not None and change_seq <= idx.main.seq:
                    continue
                if doc is None:
                    idx.remove(doc_id)
                else:
                    idx.put(doc)
            seq = changes[-1].seq
        self.seq = max(self.seq, seq)

    def _load(self) -> None:
        state = dict(self._db.execute("SELECT key, value FROM state").fetchall())
        if state.get("store_id") not in (None, self._store_id) or int(state.get("format", FORMAT)) != FORMAT:
            log.warning("the lexical cache in %s belongs to another store; rebuilding it", self.dir)
            with self._flock:
                self._db.execute("DELETE FROM docs")
                self._db.execute("DELETE FROM state")
                shutil.rmtree(self.dir / "segments", ignore_errors=True)
        self._db.execute("INSERT OR IGNORE INTO state(key, value) VALUES ('store_id', ?)", (self._store_id,))
        self._db.execute("INSERT OR IGNORE INTO state(key, value) VALUES ('format', ?)", (str(FORMAT),))
        if self._docs_seq() > self.store.ledger.committed_seq():
            with self._flock:
                self._catch_up_docs()  # the ledger was restored from an older copy: start the table again
        for kind, idx in self.indexes.items():
            idx.main = self._load_segment(kind)
        # Every change after the oldest saved index comes from the ledger at the first refresh.
        self.seq = min((idx.main.seq if idx.main else 0) for idx in self.indexes.values())
        self._loaded = True

    def _docs_seq(self) -> int:
        row = self._db.execute("SELECT value FROM state WHERE key='seq'").fetchone()
        return int(row[0]) if row else 0

    def _catch_up_docs(self) -> None:
        """Turn ledger changes after the token table's seq into documents."""
        seq = self._docs_seq()
        target = self.store.seq
        if seq > self.store.ledger.committed_seq():  # the ledger was restored from an older copy
            self._db.execute("DELETE FROM docs")
            shutil.rmtree(self.dir / "segments", ignore_errors=True)
            for idx in self.indexes.values():
                idx.main, idx.hidden = None, set()
                idx.clear_delta()
            seq = self.seq = 0
        while seq < target:
            changes = self.store.changes(after=seq, limit=CHANGE_PAGE)
            if not changes:
                break
            self._write_docs(changes)
            seq = changes[-1].seq

    def _docs_of(self, changes) -> list[tuple[str, str, int, Doc | None]]:
        """(kind, id, seq of its last change, its document; None when it is gone) of each record the
        changes touch, read from the ledger."""
        latest: dict[tuple[str, str], tuple[int, str]] = {}
        for c in changes:
            if c.kind in KIND_COLLECTION:
                latest[c.kind, c.item_id] = (c.seq, c.op)
        puts = {k: [i for (kk, i), (_, op) in latest.items() if kk == k and op == "put"] for k in KIND_COLLECTION}
        docs: list[tuple[str, Doc]] = []
        ledger = self.store.ledger
        docs += [("attempt", attempt_doc(a)) for a in ledger.get_attempts(puts["attempt"])]
        docs += [("experience", experience_doc(e)) for e in ledger.get_experiences(puts["experience"])]
        for name in puts["skill"]:
            docs.append(("skill", skill_doc(ledger.get_skill(name))))
        found = {(k, d.id) for k, d in docs}
        return [(k, d.id, latest[k, d.id][0], d) for k, d in docs] + [
            (k, i, s, None) for (k, i), (s, op) in latest.items() if op != "put" or (k, i) not in found
        ]

    def _write_docs(self, changes) -> None:
        out = self._docs_of(changes)
        rows = [(k, d.id, s, " ".join(d.tokens), json.dumps(d.meta)) for k, _, s, d in out if d is not None]
        gone = [(s, k, i) for k, i, s, d in out if d is None]
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(
                "INSERT INTO docs(kind, id, seq, tokens, meta) VALUES (?, ?, ?, ?, ?) ON CONFLICT(kind, id) DO UPDATE "
                "SET seq=excluded.seq, tokens=excluded.tokens, meta=excluded.meta",
                rows,
            )
            self._db.executemany("UPDATE docs SET seq=?, tokens=NULL WHERE kind=? AND id=?", gone)
            self._db.execute(
                "INSERT INTO state(key, value) VALUES ('seq', ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (str(changes[-1].seq),),
            )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _rebuild(self, kind: str) -> None:
        rows = self._db.execute(
            "SELECT id, seq, tokens, meta FROM docs WHERE kind=? AND tokens IS NOT NULL ORDER BY rowid", (kind,)
        ).fetchall()
        idx = self.indexes[kind]
        if not rows:
            idx.main, idx.hidden = None, set()
            idx.clear_delta()
            return
        seq = max(r[1] for r in rows)
        docs = [Doc(i, t.split(" ") if t else [], json.loads(m)) for i, _, t, m in rows]
        seg = build_segment(docs, max(seq, self._docs_seq()))
        seg.avgdl = float(np.mean([len(d.tokens) for d in docs]))
        idx.main, idx.hidden = seg, set()
        idx.clear_delta()
        self._save(kind, seg)

    # -- segments on disk ----------------------------------------------------

    def _save(self, kind: str, seg: Segment) -> None:
        target = self.dir / "segments" / kind
        tmp = self.dir / "segments" / f".{kind}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        seg.model.save(str(tmp), show_progress=False)
        (tmp / "skillbase.json").write_text(
            json.dumps(
                {"format": FORMAT, "store_id": self._store_id, "seq": seg.seq, "avgdl": seg.avgdl, "ids": seg.ids}
            )
        )
        old = self.dir / "segments" / f".{kind}.old"
        shutil.rmtree(old, ignore_errors=True)
        if target.exists():
            target.rename(old)
        tmp.rename(target)
        shutil.rmtree(old, ignore_errors=True)

    def _load_segment(self, kind: str) -> Segment | None:
        bm25s = _bm25s()
        path = self.dir / "segments" / kind
        try:
            info = json.loads((path / "skillbase.json").read_text())
            if info.get("format") != FORMAT or info.get("store_id") != self._store_id or info["seq"] > self.store.seq:
                return None
            model = bm25s.BM25.load(str(path), show_progress=False, verbosity=0)
        except (OSError, ValueError, KeyError) as e:
            if path.exists():
                log.warning("the lexical index %s is not usable (%s); it will be rebuilt", path, e)
            return None
        metas = self._metas(kind, info["ids"])
        if metas is None:
            return None
        seg = _segment(model, info["ids"], metas, info["seq"])
        seg.avgdl = float(info.get("avgdl") or 1.0)
        return seg

    def _metas(self, kind: str, ids: list[str]) -> list[dict] | None:
        found = dict(self._db.execute("SELECT id, meta FROM docs WHERE kind=?", (kind,)).fetchall())
        if any(i not in found for i in ids):
            return None
        return [json.loads(found[i]) for i in ids]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _open_docs(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
    db.execute("PRAGMA busy_timeout=60000")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # a lost row is rebuilt from the ledger
    db.execute("CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        "CREATE TABLE IF NOT EXISTS docs (kind TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "tokens TEXT, meta TEXT NOT NULL, PRIMARY KEY (kind, id))"
    )
    db.execute("CREATE INDEX IF NOT EXISTS docs_seq ON docs(seq)")
    return db
