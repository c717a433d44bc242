"""The ledger's versioned schema and its ordered migrations.

``meta.schema_version`` records the last migration applied. Opening a store
applies the missing migrations in order, each in its own ``BEGIN IMMEDIATE``
transaction, so two processes opening a fresh store at once cannot both apply
one. A store whose version is newer than this code knows is refused: reading
it could silently drop fields that a newer skillbase relies on.
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass

from skillbase.errors import SchemaTooNew, StoreError
from skillbase.models import utcnow


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


_V1 = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # The change log the vector index and the graph follow. Writers append to it
    # in the same transaction as the change, so seq order is commit order.
    """CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        item_id TEXT NOT NULL,
        op TEXT NOT NULL,
        created_at TEXT NOT NULL)""",
    """CREATE TABLE techniques (
        name TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        category TEXT NOT NULL,
        record TEXT NOT NULL)""",
    """CREATE TABLE technique_aliases (
        key TEXT PRIMARY KEY,
        name TEXT NOT NULL REFERENCES techniques(name)) WITHOUT ROWID""",
    """CREATE TABLE tasks (
        name TEXT PRIMARY KEY,
        signature TEXT NOT NULL,
        family TEXT NOT NULL,
        dtype TEXT NOT NULL,
        regime TEXT NOT NULL,
        info TEXT,
        first_seen TEXT NOT NULL,
        updated_at TEXT NOT NULL)""",
    # Sources are stored once per content hash: re-benchmarking a candidate
    # does not duplicate its text.
    "CREATE TABLE sources (hash TEXT PRIMARY KEY, text TEXT NOT NULL) WITHOUT ROWID",
    """CREATE TABLE attempts (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        task TEXT NOT NULL,
        task_signature TEXT NOT NULL,
        family TEXT NOT NULL,
        dtype TEXT NOT NULL,
        regime TEXT NOT NULL,
        source_hash TEXT NOT NULL REFERENCES sources(hash),
        language TEXT,
        parent_id TEXT,
        verdict TEXT NOT NULL,
        median_ms REAL,
        speedup_vs_eager REAL,
        speedup_vs_compile REAL,
        pct_sol REAL,
        bottleneck TEXT NOT NULL,
        hardware TEXT,
        arch TEXT,
        session TEXT,
        agent TEXT,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL)""",
    """CREATE TABLE attempt_techniques (
        attempt_id TEXT NOT NULL,
        technique TEXT NOT NULL,
        pos INTEGER NOT NULL,
        PRIMARY KEY (attempt_id, technique)) WITHOUT ROWID""",
    """CREATE TABLE experiences (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        task TEXT,
        task_signature TEXT,
        family TEXT,
        dtype TEXT,
        before_attempt TEXT,
        after_attempt TEXT,
        gain REAL,
        bottleneck TEXT,
        arch TEXT,
        hardware TEXT,
        source TEXT NOT NULL,
        session TEXT,
        agent TEXT,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL)""",
    """CREATE TABLE experience_techniques (
        experience_id TEXT NOT NULL,
        technique TEXT NOT NULL,
        pos INTEGER NOT NULL,
        PRIMARY KEY (experience_id, technique)) WITHOUT ROWID""",
    """CREATE TABLE skill_versions (
        seq INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        status TEXT NOT NULL,
        author TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL,
        UNIQUE (name, version))""",
    """CREATE TABLE feedback (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        item_kind TEXT NOT NULL,
        item_id TEXT NOT NULL,
        used INTEGER NOT NULL,
        attempt_id TEXT,
        improved INTEGER,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL)""",
)

# Indexes for the list and lineage queries the API serves.
_V2 = (
    "CREATE INDEX attempts_task ON attempts(task, seq)",
    "CREATE INDEX attempts_session ON attempts(session, seq)",
    "CREATE INDEX attempts_parent ON attempts(parent_id)",
    "CREATE INDEX attempts_created ON attempts(created_at)",
    "CREATE INDEX attempt_techniques_technique ON attempt_techniques(technique)",
    "CREATE INDEX experiences_task ON experiences(task, seq)",
    "CREATE INDEX experiences_created ON experiences(created_at)",
    "CREATE INDEX experience_techniques_technique ON experience_techniques(technique)",
    "CREATE INDEX feedback_item ON feedback(item_kind, item_id)",
)

# Profiles (Nsight Compute counters, diagnosis, bottleneck state), each stored with its attempt.
_V3 = (
    """CREATE TABLE profiles (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        attempt_id TEXT NOT NULL,
        state TEXT,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL)""",
    "CREATE INDEX profiles_attempt ON profiles(attempt_id, seq)",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "records, techniques and the change log", _V1),
    Migration(2, "indexes for list, lineage and technique queries", _V2),
    Migration(3, "profiles stored with their attempts", _V3),
)

SCHEMA_VERSION = MIGRATIONS[-1].version


def read_version(conn: sqlite3.Connection) -> int:
    """Schema version of an open ledger; 0 for an empty database."""
    has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else 0


def check_not_newer(version: int, where: str) -> None:
    """Refuse a store written by a newer skillbase."""
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"the store at {where} has schema version {version}; this skillbase reads up to {SCHEMA_VERSION}",
            hint="upgrade skillbase, or point SKILLBASE_HOME at another store",
        )


def migrate(conn: sqlite3.Connection, where: str, target: int = SCHEMA_VERSION) -> int:
    """Apply the migrations missing from ``conn`` up to ``target``; returns the
    version reached. ``conn`` must be in autocommit mode (isolation_level None)."""
    check_not_newer(read_version(conn), where)
    for m in MIGRATIONS:
        if m.version > target:
            break
        try:
            conn.execute("BEGIN IMMEDIATE")
            current = read_version(conn)  # re-read: another process may have migrated
            check_not_newer(current, where)
            if current < m.version:
                for stmt in m.statements:
                    conn.execute(stmt)
                _set_meta(conn, "schema_version", str(m.version))
                if current == 0:
                    _set_meta(conn, "store_id", uuid.uuid4().hex)
                    _set_meta(conn, "created_at", utcnow().isoformat())
            conn.execute("COMMIT")
        except BaseException as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(e, sqlite3.Error):
                raise StoreError(f"migration {m.version} ({m.description}) failed on {where}: {e}") from e
            raise
    return read_version(conn)


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
        (key, value),
    )
