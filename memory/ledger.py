"""The ledger: SQLite in WAL mode, the source of truth of the memory.

Every write is one ``BEGIN IMMEDIATE`` transaction that also appends to the
change log (``outbox``); the vector index and the reasoning graph are derived
from the ledger by following that log, so a record committed here is never
lost, whatever happens to indexing afterwards. Normalized columns hold what
queries filter on; the full pydantic record is kept as JSON so records read
back exactly as written.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from skillbase.memory.batching import Batcher
from skillbase.memory.records import Change, TaskRecord, check_finite, parse_signature, sort_time
from skillbase.memory.schema import migrate, read_version
from skillbase.memory.techniques import Vocabulary, technique_key

from skillbase.errors import InvalidInput, LimitExceeded, NotFound, StoreError, UnknownTechnique
from skillbase.models import (
    Attempt,
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

_ATTEMPT_COLUMNS = (
    "id, task, task_signature, family, dtype, regime, source_hash, language, parent_id, verdict, "
    "median_ms, speedup_vs_eager, speedup_vs_compile, pct_sol, bottleneck, hardware, arch, "
    "session, agent, created_at, record"
)
_EXPERIENCE_COLUMNS = (
    "id, task, task_signature, family, dtype, before_attempt, after_attempt, gain, bottleneck, "
    "arch, hardware, source, session, agent, created_at, record"
)


class Ledger:
    """The SQLite ledger. Thread-safe; safe to share between processes.

    Build with ``Ledger.open(path, ...)``. Read methods return pydantic
    records; write methods validate, canonicalize technique names and commit
    in one transaction, returning the record as stored.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, *, max_text_bytes: int):
        self._conn = conn
        self.path = path
        self.max_text_bytes = max_text_bytes
        self._lock = threading.RLock()
        # Reads go through a pool of read-only connections: in WAL mode they see the last
        # commit without waiting for the writer's lock, its transaction or its fsync.
        self._idle: list[sqlite3.Connection] = []
        self._local = threading.local()
        self._closed = False
        self._busy_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
        # Group commit: concurrent record_* calls share one transaction and one fsync.
        self._group: Batcher[Callable[[sqlite3.Cursor], Any], _Outcome] = Batcher(self._run_group, max_items=64)
        self._vocab = Vocabulary()
        self.store_id = self._meta("store_id")
        self.schema_version = read_version(conn)
        self.reload_vocabulary()

    # -- opening -------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        max_text_bytes: int = 256_000,
        seed_techniques: Sequence[Technique] = (),
        busy_timeout_s: float = 60.0,
    ) -> "Ledger":
        """Open (creating and migrating as needed) the ledger at ``path``.

        Raises SchemaTooNew for a store written by a newer skillbase and
        StoreError when the file is not a readable SQLite database.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s)
            conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            # FULL: a commit survives power loss, not only a killed process.
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as e:
            raise StoreError(
                f"cannot open the ledger {path}: {e}",
                hint="the file is not a SQLite database; move it aside or restore it from an export",
            ) from e
        if mode.lower() != "wal":
            raise StoreError(f"the ledger {path} cannot use WAL mode (got {mode!r})", hint="use a local filesystem")
        migrate(conn, str(path))
        ledger = cls(conn, path, max_text_bytes=max_text_bytes)
        if seed_techniques:
            ledger.seed_techniques(seed_techniques)
        return ledger

    def close(self) -> None:
        with self._lock:
            self._closed = True
            while self._idle:
                self._idle.pop().close()
            self._conn.close()

    def _meta(self, key: str) -> str:
        row = self._conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        if row is None:
            raise StoreError(f"the ledger {self.path} has no {key!r}", hint="it was not created by skillbase")
        return row[0]

    # -- transactions and the change log -------------------------------------

    @contextmanager
    def write(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction (``BEGIN IMMEDIATE``): all or nothing."""
        self._local.pinned = None  # a pinned seq would hide this block's own change
        with self._lock:
            cur = self._conn.cursor()
            self._local.writing = getattr(self._local, "writing", 0) + 1
            try:
                cur.execute("BEGIN IMMEDIATE")
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    cur.execute("ROLLBACK")
                raise
            finally:
                self._local.writing -= 1
                cur.close()

    def _commit(self, job: Callable[[sqlite3.Cursor], Any]) -> Any:
        """Run ``job(cur)`` in a write transaction shared with the jobs other threads submit
        meanwhile (one commit, one fsync for all), each inside its own savepoint: a job that
        raises is rolled back alone and its error raised to its caller only. Returns once the
        transaction holding it is committed."""
        if getattr(self._local, "writing", 0):  # already inside a transaction of this thread
            return job(self._conn.cursor())
        self._local.pinned = None
        outcome = self._group.submit([job])[0]
        if outcome.error is not None:
            raise outcome.error
        return outcome.value

    def _run_group(self, jobs: list[Callable[[sqlite3.Cursor], Any]]) -> list["_Outcome"]:
        out = []
        with self.write() as cur:
            for job in jobs:
                cur.execute("SAVEPOINT job")
                try:
                    out.append(_Outcome(value=job(cur)))
                    cur.execute("RELEASE job")
                except Exception as e:
                    cur.execute("ROLLBACK TO job")
                    cur.execute("RELEASE job")
                    out.append(_Outcome(error=e))
        return out

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection from the pool (the writer's own inside ``write()``, so a
        transaction reads what it has written so far)."""
        if getattr(self._local, "writing", 0):
            with self._lock:
                yield self._conn
            return
        try:
            conn = self._idle.pop()
        except IndexError:
            conn = self._open_reader()
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if self._closed:
                conn.close()
            else:
                self._idle.append(conn)

    def _open_reader(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"the ledger {self.path} is closed", hint="open the store again")
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=self._busy_ms / 1000)
        conn.execute(f"PRAGMA busy_timeout={self._busy_ms}")
        conn.execute("PRAGMA query_only=1")
        return conn

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Cursor]:
        """A read transaction: every query inside sees one consistent state."""
        with self._reader() as conn:
            cur = conn.cursor()
            try:
                cur.execute("BEGIN")
                yield cur
            finally:
                if conn.in_transaction:
                    cur.execute("COMMIT")
                cur.close()

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._reader() as conn:
            return conn.execute(sql, params).fetchall()

    @staticmethod
    def _change(cur: sqlite3.Cursor, kind: str, item_id: str, op: str = "put") -> None:
        cur.execute(
            "INSERT INTO outbox(kind, item_id, op, created_at) VALUES (?, ?, ?, ?)",
            (kind, item_id, op, sort_time(utcnow())),
        )

    def max_seq(self) -> int:
        """The last change-log sequence number committed (inside ``pinned_seq``: the one read
        when the block began)."""
        pinned = getattr(self._local, "pinned", None)
        if pinned is not None:
            return pinned
        return self.committed_seq()

    def committed_seq(self) -> int:
        """The last change-log sequence number committed, read now even inside ``pinned_seq``:
        for checks that a cache is ahead of the ledger (it was restored), which a pinned seq
        older than a cache another thread just advanced would fake."""
        return self._query("SELECT COALESCE(MAX(seq), 0) FROM outbox")[0][0]

    @contextmanager
    def pinned_seq(self) -> Iterator[int]:
        """Within this block, this thread's ``max_seq`` answers the seq read when it began. A
        read-only operation that checks the seq through many caches (a recall asked 14 times)
        reads it once; what commits meanwhile is seen by the next one. A write in the block
        (``write`` or a group commit) ends the pin: its own change must be seen."""
        outer = getattr(self._local, "pinned", None)
        if outer is not None:
            yield outer
            return
        self._local.pinned = seq = self.committed_seq()
        try:
            yield seq
        finally:
            self._local.pinned = None

    def first_change_after(self, seq: int) -> tuple[int, datetime] | None:
        """The seq and commit time (UTC) of the oldest change after ``seq``, or None."""
        rows = self._query("SELECT seq, created_at FROM outbox WHERE seq > ? ORDER BY seq LIMIT 1", (seq,))
        return (rows[0][0], datetime.fromisoformat(rows[0][1])) if rows else None

    def changes_after(self, seq: int, limit: int = 1000) -> list[Change]:
        """Changes committed after ``seq``, oldest first, at most ``limit``."""
        rows = self._query("SELECT seq, kind, item_id, op FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit))
        return [Change(*r) for r in rows]

    def counts(self) -> dict[str, int]:
        """Rows per table."""
        tables = ("tasks", "attempts", "experiences", "skill_versions", "techniques", "feedback", "outbox")
        with self.snapshot() as cur:
            out = {t: cur.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}
            out["skills"] = cur.execute("SELECT COUNT(DISTINCT name) FROM skill_versions").fetchone()[0]
        return out

    # -- techniques ----------------------------------------------------------

    def reload_vocabulary(self) -> None:
        """Rebuild the in-memory vocabulary from the techniques table."""
        rows = self._query("SELECT record FROM techniques")
        self._vocab = Vocabulary(Technique.model_validate_json(r[0]) for r in rows)

    def canonical_technique(self, name: str) -> str:
        """Canonical name of a technique spelling or alias (UnknownTechnique
        with the closest names otherwise)."""
        return self.canonical_techniques([name])[0]

    def canonical_techniques(self, names: Iterable[str]) -> list[str]:
        """Canonical names in order, duplicates removed."""
        names = list(names)
        try:
            return self._vocab.canonical_list(names)
        except UnknownTechnique:
            self.reload_vocabulary()  # another process may have added it
            return self._vocab.canonical_list(names)

    def list_techniques(self) -> list[Technique]:
        self.reload_vocabulary()
        return self._vocab.all()

    def get_technique(self, name: str) -> Technique:
        canonical = self.canonical_technique(name)
        t = self._vocab.get(canonical)
        assert t is not None
        return t

    def seed_techniques(self, techniques: Sequence[Technique]) -> int:
        """Add the seed techniques this ledger lacks; returns how many."""
        missing = [t for t in techniques if t.name not in self._vocab]
        if not missing:
            return 0
        with self.write() as cur:
            added = sum(self._put_technique(cur, t) for t in missing)
        self.reload_vocabulary()
        return added

    def add_technique(self, t: Technique) -> Technique:
        """Add a technique, or extend an existing one (aliases are merged; title,
        category and description are replaced). Returns the stored record."""
        with self.write() as cur:
            self._put_technique(cur, t)
            stored = cur.execute("SELECT record FROM techniques WHERE name=?", (t.name,)).fetchone()[0]
        self.reload_vocabulary()
        return Technique.model_validate_json(stored)

    def _put_technique(self, cur: sqlite3.Cursor, t: Technique) -> bool:
        row = cur.execute("SELECT record FROM techniques WHERE name=?", (t.name,)).fetchone()
        if row is not None:
            old = Technique.model_validate_json(row[0])
            aliases = list(old.aliases) + [a for a in t.aliases if a not in old.aliases]
            t = t.model_copy(update={"aliases": aliases})
            if t == old:
                return False
        for spelling in [t.name, *t.aliases]:
            owner = cur.execute("SELECT name FROM technique_aliases WHERE key=?", (technique_key(spelling),)).fetchone()
            if owner is not None and owner[0] != t.name:
                raise InvalidInput(
                    f"{spelling!r} already names technique {owner[0]!r}",
                    hint=f"drop it from {t.name!r} or add it to {owner[0]!r}",
                )
        cur.execute(
            "INSERT INTO techniques(name, title, category, record) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET title=excluded.title, category=excluded.category, record=excluded.record",
            (t.name, t.title, t.category, t.model_dump_json()),
        )
        for spelling in [t.name, *t.aliases]:
            cur.execute(
                "INSERT OR IGNORE INTO technique_aliases(key, name) VALUES (?, ?)", (technique_key(spelling), t.name)
            )
        self._change(cur, "technique", t.name)
        return True

    # -- validation ----------------------------------------------------------

    def _check_size(self, text: str | None, what: str) -> None:
        if text is None:
            return
        n = len(text.encode("utf-8", "surrogatepass"))
        if n > self.max_text_bytes:
            raise LimitExceeded(
                f"{what} is {n} bytes; the limit is {self.max_text_bytes} bytes",
                hint="shorten it, or raise SKILLBASE_MAX_SOURCE_BYTES (settings.max_source_bytes)",
            )

    def _canon(self, names: Iterable[str], vocab: Vocabulary | None) -> list[str]:
        return vocab.canonical_list(names) if vocab is not None else self.canonical_techniques(names)

    def validate_attempt(self, a: Attempt, vocab: Vocabulary | None = None) -> Attempt:
        """Check an attempt and return it with canonical technique names
        (from ``vocab`` when given, else the ledger's vocabulary)."""
        self._check_size(a.source, f"the source of attempt {a.id}")
        self._check_size(a.notes, f"the notes of attempt {a.id}")
        if a.source_hash != content_hash(a.source):
            raise InvalidInput(
                f"attempt {a.id}: source_hash {a.source_hash!r} does not match its source",
                hint="set source_hash=skillbase.models.content_hash(source), or build it with attempt_from_report",
            )
        family, dtype, _ = parse_signature(a.task_signature)
        if (family, dtype) != (a.family, a.dtype):
            raise InvalidInput(
                f"attempt {a.id}: family/dtype {a.family}/{a.dtype} disagree with signature {a.task_signature!r}"
            )
        if not a.task.strip():
            raise InvalidInput(f"attempt {a.id} has an empty task name")
        check_finite(a.model_dump(mode="python", exclude={"source"}), f"attempt {a.id}")
        return a.model_copy(update={"techniques": self._canon(a.techniques, vocab)})

    def validate_experience(self, e: Experience, vocab: Vocabulary | None = None) -> Experience:
        """Check an experience and return it with canonical technique names."""
        if not e.lesson.strip():
            raise InvalidInput(f"experience {e.id} has an empty lesson", hint="say what was learned")
        self._check_size(e.lesson, f"the lesson of experience {e.id}")
        self._check_size(e.conditions, f"the conditions of experience {e.id}")
        if e.task_signature is not None:
            family, dtype, _ = parse_signature(e.task_signature)
            if (e.family or family, e.dtype or dtype) != (family, dtype):
                raise InvalidInput(f"experience {e.id}: family/dtype disagree with signature {e.task_signature!r}")
        if e.gain is not None and not e.gain > 0:
            raise InvalidInput(f"experience {e.id}: gain {e.gain} must be a positive speedup ratio")
        check_finite(e.model_dump(mode="python"), f"experience {e.id}")
        return e.model_copy(update={"techniques": self._canon(e.techniques, vocab)})

    def validate_skill(self, s: Skill, vocab: Vocabulary | None = None) -> Skill:
        """Check a skill and return it with canonical technique names."""
        self._check_size(s.body, f"the body of skill {s.name}")
        check_finite(s.model_dump(mode="python"), f"skill {s.name}")
        return s.model_copy(update={"techniques": self._canon(s.techniques, vocab)})

    # -- attempts ------------------------------------------------------------

    def record_attempts(self, attempts: Sequence[Attempt]) -> list[Attempt]:
        """Record attempts in one transaction. A parent must be recorded
        already or come earlier in ``attempts``. Re-recording an identical
        attempt is a no-op; the same id with other content is refused."""
        checked = [self.validate_attempt(a) for a in attempts]
        self._commit(lambda cur: [self._insert_attempt(cur, a) for a in checked])
        return checked

    def _insert_attempt(self, cur: sqlite3.Cursor, a: Attempt) -> bool:
        record = a.model_dump_json(exclude={"source"})
        row = cur.execute("SELECT record FROM attempts WHERE id=?", (a.id,)).fetchone()
        if row is not None:
            if row[0] == record:
                return False
            raise InvalidInput(f"attempt {a.id} is already recorded with different content", hint="use a new id")
        if a.parent_id is not None and a.parent_id != a.id:
            if cur.execute("SELECT 1 FROM attempts WHERE id=?", (a.parent_id,)).fetchone() is None:
                raise InvalidInput(
                    f"attempt {a.id}: parent {a.parent_id} is not in the ledger",
                    hint="record the parent first, or leave parent_id empty",
                )
        elif a.parent_id == a.id:
            raise InvalidInput(f"attempt {a.id} names itself as its parent")
        family, dtype, regime = parse_signature(a.task_signature)
        created = sort_time(a.created_at)
        cur.execute("INSERT OR IGNORE INTO sources(hash, text) VALUES (?, ?)", (a.source_hash, a.source))
        self._touch_task(cur, a.task, a.task_signature, created)
        cur.execute(
            f"INSERT INTO attempts({_ATTEMPT_COLUMNS}) VALUES ({','.join('?' * 21)})",
            (
                a.id,
                a.task,
                a.task_signature,
                family,
                dtype,
                regime,
                a.source_hash,
                a.language,
                a.parent_id,
                a.verdict,
                a.median_ms,
                a.speedup_vs_eager,
                a.speedup_vs_compile,
                a.pct_sol,
                a.bottleneck,
                a.hardware,
                a.arch,
                a.session,
                a.agent,
                created,
                record,
            ),
        )
        cur.executemany(
            "INSERT INTO attempt_techniques(attempt_id, technique, pos) VALUES (?, ?, ?)",
            [(a.id, t, i) for i, t in enumerate(a.techniques)],
        )
        self._change(cur, "attempt", a.id)
        return True

    def _touch_task(self, cur: sqlite3.Cursor, name: str, signature: str, when: str) -> None:
        family, dtype, regime = parse_signature(signature)
        cur.execute(
            "INSERT INTO tasks(name, signature, family, dtype, regime, info, first_seen, updated_at) "
            "VALUES (?, ?, ?, ?, ?, NULL, ?, ?) ON CONFLICT(name) DO UPDATE SET "
            "signature=CASE WHEN excluded.updated_at >= tasks.updated_at THEN excluded.signature ELSE tasks.signature END, "
            "family=CASE WHEN excluded.updated_at >= tasks.updated_at THEN excluded.family ELSE tasks.family END, "
            "dtype=CASE WHEN excluded.updated_at >= tasks.updated_at THEN excluded.dtype ELSE tasks.dtype END, "
            "regime=CASE WHEN excluded.updated_at >= tasks.updated_at THEN excluded.regime ELSE tasks.regime END, "
            "first_seen=MIN(tasks.first_seen, excluded.first_seen), "
            "updated_at=MAX(tasks.updated_at, excluded.updated_at)",
            (name, signature, family, dtype, regime, when, when),
        )

    def _attempt_from_row(self, record: str, source: str) -> Attempt:
        data = json.loads(record)
        data["source"] = source
        return Attempt.model_validate(data)

    def get_attempt(self, attempt_id: str) -> Attempt:
        """The attempt with this id (NotFound otherwise)."""
        found = self.get_attempts([attempt_id])
        if not found:
            raise NotFound(f"no attempt {attempt_id!r} in the ledger", hint="list attempts with list_attempts()")
        return found[0]

    def get_attempts(self, ids: Sequence[str]) -> list[Attempt]:
        """Attempts with these ids, in the order given; unknown ids are skipped."""
        out: dict[str, Attempt] = {}
        for chunk in _chunks(list(ids), 500):
            rows = self._query(
                f"SELECT a.id, a.record, s.text FROM attempts a JOIN sources s ON s.hash = a.source_hash "
                f"WHERE a.id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            out.update({r[0]: self._attempt_from_row(r[1], r[2]) for r in rows})
        return [out[i] for i in ids if i in out]

    def existing_attempt_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` the ledger holds: an index lookup, without reading the attempts."""
        found: set[str] = set()
        for chunk in _chunks(list(dict.fromkeys(ids)), 500):
            rows = self._query(f"SELECT id FROM attempts WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            found.update(r[0] for r in rows)
        return found

    def list_attempts(
        self,
        *,
        task: str | None = None,
        session: str | None = None,
        technique: str | None = None,
        verdict: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
        run: str | None = None,
    ) -> list[Attempt]:
        """Attempts matching every filter given, newest first. ``run``: the suite run (run directory
        name) they were evaluated in."""
        where, params = _filters(
            ("a.task = ?", task),
            ("a.session = ?", session),
            ("json_extract(a.record, '$.run') = ?", run),
            ("a.verdict = ?", verdict),
            ("a.created_at >= ?", sort_time(since) if since is not None else None),
            (
                "a.id IN (SELECT attempt_id FROM attempt_techniques WHERE technique = ?)",
                self.canonical_technique(technique) if technique is not None else None,
            ),
        )
        sql = f"SELECT a.record, s.text FROM attempts a JOIN sources s ON s.hash = a.source_hash{where}"
        rows = self._query(sql + " ORDER BY a.seq DESC LIMIT ?", [*params, _limit(limit)])
        return [self._attempt_from_row(r[0], r[1]) for r in rows]

    def attempts_mark(self, task: str) -> tuple[int, int]:
        """(last seq, count) of ``task``'s attempts: it changes whenever one is added or removed."""
        row = self._query("SELECT COALESCE(MAX(seq), 0), COUNT(*) FROM attempts WHERE task = ?", (task,))[0]
        return int(row[0]), int(row[1])

    def attempt_ids_of_run(self, run: str) -> set[str]:
        """The ids of every attempt recorded from the suite run named ``run``."""
        rows = self._query("SELECT id FROM attempts WHERE json_extract(record, '$.run') = ?", (run,))
        return {r[0] for r in rows}

    def lineage(self, attempt_id: str) -> list[Attempt]:
        """The chain of parents of an attempt, root first, ending with it."""
        rows = self._query(
            "WITH RECURSIVE chain(id, parent_id, depth) AS ("
            " SELECT id, parent_id, 0 FROM attempts WHERE id = ?"
            " UNION ALL SELECT a.id, a.parent_id, c.depth + 1 FROM attempts a JOIN chain c ON a.id = c.parent_id"
            " WHERE c.depth < 100000) SELECT id FROM chain ORDER BY depth DESC",
            (attempt_id,),
        )
        if not rows:
            raise NotFound(f"no attempt {attempt_id!r} in the ledger", hint="list attempts with list_attempts()")
        return self.get_attempts([r[0] for r in rows])

    def attempt_rows(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Light rows (no source, no reports) for building the graph."""
        out: list[dict[str, Any]] = []
        for chunk in _chunks(list(ids), 500):
            marks = ",".join("?" * len(chunk))
            rows = self._query(
                "SELECT id, task, task_signature, family, dtype, regime, parent_id, verdict, median_ms, "
                "speedup_vs_eager, bottleneck, hardware, arch, created_at, language "
                f"FROM attempts WHERE id IN ({marks})",
                chunk,
            )
            techs = self._techniques_of("attempt_techniques", "attempt_id", chunk)
            keys = (
                "id",
                "task",
                "signature",
                "family",
                "dtype",
                "regime",
                "parent_id",
                "verdict",
                "median_ms",
                "speedup",
                "bottleneck",
                "hardware",
                "arch",
                "created_at",
                "language",
            )
            for r in rows:
                d = dict(zip(keys, r))
                d["techniques"] = techs.get(d["id"], [])
                out.append(d)
        order = {i: n for n, i in enumerate(ids)}
        return sorted(out, key=lambda d: order[d["id"]])

    def _techniques_of(self, table: str, column: str, ids: Sequence[str]) -> dict[str, list[str]]:
        rows = self._query(
            f"SELECT {column}, technique FROM {table} WHERE {column} IN ({','.join('?' * len(ids))}) "
            f"ORDER BY {column}, pos",
            list(ids),
        )
        out: dict[str, list[str]] = {}
        for item, tech in rows:
            out.setdefault(item, []).append(tech)
        return out

    # -- tasks ---------------------------------------------------------------

    def put_task(self, info: TaskInfo) -> TaskRecord:
        """Record (or refresh) a task's full TaskInfo."""
        parse_signature(info.signature)
        now = sort_time(utcnow())
        with self.write() as cur:
            self._touch_task(cur, info.name, info.signature, now)
            cur.execute("UPDATE tasks SET info=? WHERE name=?", (info.model_dump_json(), info.name))
            self._change(cur, "task", info.name)
        return self.get_task(info.name)

    def get_task(self, name: str) -> TaskRecord:
        rows = self._query(
            "SELECT name, signature, family, dtype, regime, info, first_seen, updated_at FROM tasks WHERE name=?",
            (name,),
        )
        if not rows:
            raise NotFound(f"no task {name!r} in the ledger", hint="tasks appear when an attempt on them is recorded")
        return _task_from_row(rows[0])

    def list_task_records(self, names: Sequence[str]) -> list[TaskRecord]:
        """The tasks with these names that the ledger knows (unknown names are skipped)."""
        out = []
        for chunk in _chunks(list(names), 500):
            out += [
                _task_from_row(r)
                for r in self._query(
                    "SELECT name, signature, family, dtype, regime, info, first_seen, updated_at FROM tasks "
                    f"WHERE name IN ({','.join('?' * len(chunk))})",
                    chunk,
                )
            ]
        return out

    def rederive_task(self, info: TaskInfo) -> int:
        """Store a task's re-derived TaskInfo and give its attempts and lessons the class it says
        (family, dtype, regime); returns how many attempts and lessons changed class."""
        sig = info.signature
        family, dtype, regime = parse_signature(sig)
        changed = 0
        with self.write() as cur:
            for table, kind in (("attempts", "attempt"), ("experiences", "experience")):
                rows = cur.execute(
                    f"SELECT id, record FROM {table} WHERE task=? AND task_signature IS NOT NULL "
                    "AND task_signature != ?",
                    (info.name, sig),
                ).fetchall()
                for item_id, record in rows:
                    data = json.loads(record)
                    data.update(task_signature=sig, family=family, dtype=dtype)
                    extra = ", regime=?" if table == "attempts" else ""
                    cur.execute(
                        f"UPDATE {table} SET task_signature=?, family=?, dtype=?{extra}, record=? WHERE id=?",
                        (
                            sig,
                            family,
                            dtype,
                            *([regime] if extra else []),
                            json.dumps(data, separators=(",", ":")),
                            item_id,
                        ),
                    )
                    self._change(cur, kind, item_id)
                    changed += 1
            self._touch_task(cur, info.name, sig, sort_time(utcnow()))
            cur.execute(
                "UPDATE tasks SET signature=?, family=?, dtype=?, regime=?, info=? WHERE name=?",
                (sig, family, dtype, regime, info.model_dump_json(), info.name),
            )
            self._change(cur, "task", info.name)
        return changed

    def list_tasks(self, family: str | None = None) -> list[TaskRecord]:
        sql = "SELECT name, signature, family, dtype, regime, info, first_seen, updated_at FROM tasks"
        rows = (
            self._query(sql + " WHERE family=? ORDER BY name", (family,))
            if family
            else self._query(sql + " ORDER BY name")
        )
        return [_task_from_row(r) for r in rows]

    # -- experiences ---------------------------------------------------------

    def record_experiences(self, experiences: Sequence[Experience]) -> list[Experience]:
        """Record experiences in one transaction (identical re-records are no-ops)."""
        checked = [self.validate_experience(e) for e in experiences]
        self._commit(lambda cur: [self._insert_experience(cur, e) for e in checked])
        return checked

    def _insert_experience(self, cur: sqlite3.Cursor, e: Experience) -> bool:
        record = e.model_dump_json()
        row = cur.execute("SELECT record FROM experiences WHERE id=?", (e.id,)).fetchone()
        if row is not None:
            if row[0] == record:
                return False
            raise InvalidInput(f"experience {e.id} is already recorded with different content", hint="use a new id")
        cur.execute(
            f"INSERT INTO experiences({_EXPERIENCE_COLUMNS}) VALUES ({','.join('?' * 16)})",
            (
                e.id,
                e.task,
                e.task_signature,
                e.family,
                e.dtype,
                e.before_attempt,
                e.after_attempt,
                e.gain,
                e.bottleneck,
                e.arch,
                e.hardware,
                e.source,
                e.session,
                e.agent,
                sort_time(e.created_at),
                record,
            ),
        )
        cur.executemany(
            "INSERT INTO experience_techniques(experience_id, technique, pos) VALUES (?, ?, ?)",
            [(e.id, t, i) for i, t in enumerate(e.techniques)],
        )
        self._change(cur, "experience", e.id)
        return True

    def get_experience(self, experience_id: str) -> Experience:
        found = self.get_experiences([experience_id])
        if not found:
            raise NotFound(f"no experience {experience_id!r} in the ledger", hint="list them with list_experiences()")
        return found[0]

    def get_experiences(self, ids: Sequence[str]) -> list[Experience]:
        """Experiences with these ids, in the order given; unknown ids are skipped."""
        out: dict[str, Experience] = {}
        for chunk in _chunks(list(ids), 500):
            rows = self._query(f"SELECT id, record FROM experiences WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            out.update({r[0]: Experience.model_validate_json(r[1]) for r in rows})
        return [out[i] for i in ids if i in out]

    def list_experiences(
        self,
        *,
        task: str | None = None,
        technique: str | None = None,
        family: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[Experience]:
        """Experiences matching every filter given, newest first."""
        where, params = _filters(
            ("task = ?", task),
            ("family = ?", family),
            ("created_at >= ?", sort_time(since) if since is not None else None),
            (
                "id IN (SELECT experience_id FROM experience_techniques WHERE technique = ?)",
                self.canonical_technique(technique) if technique is not None else None,
            ),
        )
        rows = self._query(f"SELECT record FROM experiences{where} ORDER BY seq DESC LIMIT ?", [*params, _limit(limit)])
        return [Experience.model_validate_json(r[0]) for r in rows]

    def experience_rows(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Light rows for building the graph."""
        out: list[dict[str, Any]] = []
        keys = (
            "id",
            "task",
            "signature",
            "family",
            "dtype",
            "before",
            "after",
            "gain",
            "bottleneck",
            "arch",
            "created_at",
            "source",
        )
        for chunk in _chunks(list(ids), 500):
            rows = self._query(
                "SELECT id, task, task_signature, family, dtype, before_attempt, after_attempt, gain, bottleneck, "
                f"arch, created_at, source FROM experiences WHERE id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            techs = self._techniques_of("experience_techniques", "experience_id", chunk)
            for r in rows:
                d = dict(zip(keys, r))
                d["techniques"] = techs.get(d["id"], [])
                out.append(d)
        return out

    # -- skills --------------------------------------------------------------

    def put_skill(self, skill: Skill, *, author: str, reason: str) -> Skill:
        """Store a new version of a skill (version = last + 1) with who and why.
        A skill identical to its latest version (apart from ``version``) adds
        no version; the latest is returned."""
        if not author.strip() or not reason.strip():
            raise InvalidInput("a skill version needs an author and a reason", hint="say who changed it and why")
        skill = self.validate_skill(skill)
        with self.write() as cur:
            row = cur.execute(
                "SELECT version, record FROM skill_versions WHERE name=? ORDER BY version DESC LIMIT 1", (skill.name,)
            ).fetchone()
            if row is not None:
                latest = SkillVersion.model_validate_json(row[1]).skill
                if latest == skill.model_copy(update={"version": latest.version}):
                    return latest
            version = (row[0] + 1) if row else 1
            sv = SkillVersion(
                name=skill.name,
                version=version,
                status=skill.status,
                author=author,
                reason=reason,
                created_at=utcnow(),
                skill=skill.model_copy(update={"version": version}),
            )
            self._insert_skill_version(cur, sv)
        return sv.skill

    def _insert_skill_version(self, cur: sqlite3.Cursor, sv: SkillVersion) -> bool:
        record = sv.model_dump_json()
        row = cur.execute(
            "SELECT record FROM skill_versions WHERE name=? AND version=?", (sv.name, sv.version)
        ).fetchone()
        if row is not None:
            if row[0] == record:
                return False
            raise InvalidInput(f"skill {sv.name} version {sv.version} already exists with different content")
        cur.execute(
            "INSERT INTO skill_versions(name, version, status, author, reason, created_at, record) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sv.name, sv.version, sv.status, sv.author, sv.reason, sort_time(sv.created_at), record),
        )
        self._change(cur, "skill", sv.name)
        return True

    def get_skill(self, name: str, version: int | None = None) -> Skill:
        """A skill's latest version, or the version asked for (NotFound otherwise)."""
        if version is None:
            rows = self._query("SELECT record FROM skill_versions WHERE name=? ORDER BY version DESC LIMIT 1", (name,))
        else:
            rows = self._query("SELECT record FROM skill_versions WHERE name=? AND version=?", (name, version))
        if not rows:
            what = f"skill {name!r}" + (f" version {version}" if version is not None else "")
            raise NotFound(f"no {what} in the ledger", hint="list skills with list_skills()")
        return SkillVersion.model_validate_json(rows[0][0]).skill

    def list_skills(self, status: str | None = None) -> list[Skill]:
        """The latest version of every skill, optionally only those with ``status``."""
        rows = self._query(
            "SELECT record FROM skill_versions sv WHERE version = "
            "(SELECT MAX(version) FROM skill_versions WHERE name = sv.name) ORDER BY name"
        )
        skills = [SkillVersion.model_validate_json(r[0]).skill for r in rows]
        return [s for s in skills if status is None or s.status == status]

    def skill_history(self, name: str) -> list[SkillVersion]:
        """Every version of a skill, oldest first."""
        rows = self._query("SELECT record FROM skill_versions WHERE name=? ORDER BY version", (name,))
        if not rows:
            raise NotFound(f"no skill {name!r} in the ledger", hint="list skills with list_skills()")
        return [SkillVersion.model_validate_json(r[0]) for r in rows]

    # -- feedback ------------------------------------------------------------

    def record_feedback(self, fb: Feedback) -> str:
        """Record whether a recalled item was used; returns the feedback id."""
        if fb.item_kind == "technique":
            fb = fb.model_copy(update={"item_id": self.canonical_technique(fb.item_id)})
        with self.write() as cur:
            fid, _ = self._insert_feedback(cur, fb)
        return fid

    def _insert_feedback(self, cur: sqlite3.Cursor, fb: Feedback) -> tuple[str, bool]:
        self._check_size(fb.query, "the feedback query")
        table, column = {
            "skill": ("skill_versions", "name"),
            "experience": ("experiences", "id"),
            "attempt": ("attempts", "id"),
            "technique": ("techniques", "name"),
        }[fb.item_kind]
        if cur.execute(f"SELECT 1 FROM {table} WHERE {column}=?", (fb.item_id,)).fetchone() is None:
            raise InvalidInput(f"feedback names {fb.item_kind} {fb.item_id!r}, which is not in the ledger")
        if (
            fb.attempt_id is not None
            and cur.execute("SELECT 1 FROM attempts WHERE id=?", (fb.attempt_id,)).fetchone() is None
        ):
            raise InvalidInput(f"feedback names attempt {fb.attempt_id!r}, which is not in the ledger")
        record = fb.model_dump_json()
        fid = "fb_" + content_hash(record)
        if cur.execute("SELECT 1 FROM feedback WHERE id=?", (fid,)).fetchone() is not None:
            return fid, False
        cur.execute(
            "INSERT INTO feedback(id, item_kind, item_id, used, attempt_id, improved, created_at, record) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                fid,
                fb.item_kind,
                fb.item_id,
                int(fb.used),
                fb.attempt_id,
                None if fb.improved is None else int(fb.improved),
                sort_time(fb.created_at),
                record,
            ),
        )
        self._change(cur, "feedback", fid)
        return fid, True

    def list_feedback(
        self, item_kind: str | None = None, item_id: str | None = None, limit: int = 1000
    ) -> list[Feedback]:
        """Feedback records, newest first."""
        where, params = _filters(("item_kind = ?", item_kind), ("item_id = ?", item_id))
        rows = self._query(f"SELECT record FROM feedback{where} ORDER BY seq DESC LIMIT ?", [*params, _limit(limit)])
        return [Feedback.model_validate_json(r[0]) for r in rows]

    def feedback_rows(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for chunk in _chunks(list(ids), 500):
            rows = self._query(
                f"SELECT id, item_kind, item_id, used, improved FROM feedback WHERE id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            out += [dict(zip(("id", "item_kind", "item_id", "used", "improved"), r)) for r in rows]
        return out

    # -- profiles ------------------------------------------------------------

    def record_profile(self, attempt_id: str, profile: ProfileReport) -> str:
        """Store a profile with its attempt; returns the profile id. The same profile stored twice is one row."""
        # The raw CSV stays with the caller: the ledger keeps the parsed counters, bounded in size.
        profile = profile.model_copy(update={"attempt_id": attempt_id, "raw_csv": ""})
        with self.write() as cur:
            if cur.execute("SELECT 1 FROM attempts WHERE id=?", (attempt_id,)).fetchone() is None:
                raise NotFound(f"no attempt {attempt_id!r} in the ledger", hint="benchmark the candidate first")
            return self._insert_profile(cur, profile)[0]

    def _insert_profile(self, cur: sqlite3.Cursor, profile: ProfileReport) -> tuple[str, bool]:
        record = profile.model_dump_json()
        self._check_size(record, "the profile")
        pid = "prf_" + content_hash(profile.attempt_id or "", record)
        if cur.execute("SELECT 1 FROM profiles WHERE id=?", (pid,)).fetchone() is not None:
            return pid, False
        cur.execute(
            "INSERT INTO profiles(id, attempt_id, state, created_at, record) VALUES (?, ?, ?, ?, ?)",
            (pid, profile.attempt_id, profile.state, sort_time(utcnow()), record),
        )
        self._change(cur, "profile", pid)
        return pid, True

    def get_profile(self, attempt_id: str) -> ProfileReport | None:
        """The latest profile with counters stored with an attempt (else the latest of any), or None."""
        rows = self._query(
            "SELECT record FROM profiles WHERE attempt_id=? ORDER BY state IS NOT NULL DESC, seq DESC LIMIT 1",
            (attempt_id,),
        )
        return ProfileReport.model_validate_json(rows[0][0]) if rows else None

    def profile_rows(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """(id, attempt_id, state) of profiles, for the graph."""
        out = []
        for chunk in _chunks(list(ids), 500):
            rows = self._query(
                f"SELECT id, attempt_id, state FROM profiles WHERE id IN ({','.join('?' * len(chunk))})", chunk
            )
            out += [dict(zip(("id", "attempt_id", "state"), r)) for r in rows]
        return out

    # -- bulk reads for export -----------------------------------------------

    def iter_export_rows(self, cur: sqlite3.Cursor) -> Iterator[tuple[str, str]]:
        """(kind, record JSON) for every record, in an order that imports
        cleanly: techniques, tasks, attempts (parents first), experiences,
        skill versions, feedback, profiles. ``cur`` must be inside ``snapshot()``."""
        for (record,) in cur.execute("SELECT record FROM techniques ORDER BY name"):
            yield "technique", record
        for row in cur.execute(
            "SELECT name, signature, family, dtype, regime, info, first_seen, updated_at FROM tasks ORDER BY name"
        ).fetchall():
            yield "task", _task_from_row(row).model_dump_json()
        for record, source in cur.execute(
            "SELECT a.record, s.text FROM attempts a JOIN sources s ON s.hash = a.source_hash ORDER BY a.seq"
        ):
            yield "attempt", self._attempt_from_row(record, source).model_dump_json()
        for (record,) in cur.execute("SELECT record FROM experiences ORDER BY seq"):
            yield "experience", record
        for (record,) in cur.execute("SELECT record FROM skill_versions ORDER BY seq"):
            yield "skill_version", record
        for (record,) in cur.execute("SELECT record FROM feedback ORDER BY seq"):
            yield "feedback", record
        for (record,) in cur.execute("SELECT record FROM profiles ORDER BY seq"):
            yield "profile", record

    def import_records(self, records: Sequence[tuple[int, str, Any]]) -> int:
        """Insert validated records (line number, kind, model) in one
        transaction. Identical records already present are skipped; a record
        that conflicts with one present refuses the whole import, naming its
        line. Returns how many records were added."""
        added = 0
        with self.write() as cur:
            for line, kind, rec in records:
                try:
                    added += self._import_one(cur, kind, rec)
                except InvalidInput as e:
                    raise type(e)(f"line {line}: {e.message}", hint="nothing was imported") from e
                except sqlite3.IntegrityError as e:
                    raise InvalidInput(f"line {line}: {e}", hint="nothing was imported") from e
        self.reload_vocabulary()
        return added

    def _import_one(self, cur: sqlite3.Cursor, kind: str, rec: Any) -> int:
        if kind == "technique":
            return int(self._put_technique(cur, rec))
        if kind == "task":
            return int(self._import_task(cur, rec))
        if kind == "attempt":
            return int(self._insert_attempt(cur, rec))
        if kind == "experience":
            return int(self._insert_experience(cur, rec))
        if kind == "skill_version":
            return int(self._insert_skill_version(cur, rec))
        if kind == "feedback":
            return int(self._insert_feedback(cur, rec)[1])
        if kind == "profile":
            if (
                not rec.attempt_id
                or cur.execute("SELECT 1 FROM attempts WHERE id=?", (rec.attempt_id,)).fetchone() is None
            ):
                raise InvalidInput(f"profile of attempt {rec.attempt_id!r}, which is not in the ledger")
            return int(self._insert_profile(cur, rec)[1])
        raise InvalidInput(f"unknown record kind {kind!r}")

    def _import_task(self, cur: sqlite3.Cursor, t: TaskRecord) -> bool:
        row = cur.execute(
            "SELECT name, signature, family, dtype, regime, info, first_seen, updated_at FROM tasks WHERE name=?",
            (t.name,),
        ).fetchone()
        if row is not None:
            # The upsert below keeps local info and widens the time span: a record that would
            # leave the row as it is adds nothing (re-seeding must report 0 new records).
            have = _task_from_row(row)
            merged = t.model_copy(
                update={
                    "info": t.info or have.info,
                    "first_seen": min(have.first_seen, t.first_seen),
                    "updated_at": max(have.updated_at, t.updated_at),
                }
            )
            if merged == have:
                return False
        cur.execute(
            "INSERT INTO tasks(name, signature, family, dtype, regime, info, first_seen, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET signature=excluded.signature, "
            "family=excluded.family, dtype=excluded.dtype, regime=excluded.regime, "
            "info=COALESCE(excluded.info, tasks.info), first_seen=MIN(tasks.first_seen, excluded.first_seen), "
            "updated_at=MAX(tasks.updated_at, excluded.updated_at)",
            (
                t.name,
                t.signature,
                t.family,
                t.dtype,
                t.regime,
                t.info.model_dump_json() if t.info else None,
                sort_time(t.first_seen),
                sort_time(t.updated_at),
            ),
        )
        self._change(cur, "task", t.name)
        return True

    # -- disk ----------------------------------------------------------------

    def disk_bytes(self) -> int:
        """Bytes of the database file plus its WAL and shared-memory files."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    def checkpoint(self) -> None:
        """Fold the WAL back into the database file (keeps the WAL small)."""
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@dataclass
class _Outcome:
    """One job's result in a group commit: its value, or the error that rolled it back."""

    value: Any = None
    error: Exception | None = None


def _task_from_row(row: Sequence[Any]) -> TaskRecord:
    name, signature, family, dtype, regime, info, first_seen, updated_at = row
    return TaskRecord(
        name=name,
        signature=signature,
        family=family,
        dtype=dtype,
        regime=regime,
        info=TaskInfo.model_validate_json(info) if info else None,
        first_seen=datetime.fromisoformat(first_seen),
        updated_at=datetime.fromisoformat(updated_at),
    )


def _filters(*clauses: tuple[str, Any]) -> tuple[str, list[Any]]:
    """A WHERE clause joining the conditions whose value is not None."""
    used = [(sql, value) for sql, value in clauses if value is not None]
    if not used:
        return "", []
    return " WHERE " + " AND ".join(sql for sql, _ in used), [value for _, value in used]


def _chunks(items: list, n: int) -> Iterator[list]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _limit(limit: int) -> int:
    if not isinstance(limit, int) or limit < 1:
        raise InvalidInput(f"limit must be a positive integer, got {limit!r}")
    return min(limit, 100_000)
