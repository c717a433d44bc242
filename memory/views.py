"""Read-only views of the ledger for pages that list and aggregate (the curation UI).

A ``LedgerView`` opens its own read-only SQLite connections (one per thread), so
a page never waits on the Store's connection lock while a writer holds it (a
benchmark being recorded, an ingest batch), and SQLite's WAL lets a reader see
the last committed state while a write is in flight. Every list takes an offset
and a limit: at 100k attempts nothing is read whole. Aggregates that scan every
attempt (the facet lists) are cached until the ledger's change log moves.

    view = LedgerView(settings.ledger_path)
    rows, total = view.task_rows(family="softmax", limit=50)
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from skillbase.errors import NotFound, StoreError

# Light attempt columns (no source, no reports), with a few report fields pulled from the JSON record.
_ATTEMPT_COLUMNS = (
    "a.id, a.task, a.parent_id, a.verdict, a.median_ms, a.speedup_vs_eager, a.speedup_vs_compile, a.pct_sol, "
    "a.bottleneck, a.hardware, a.arch, a.language, a.session, a.agent, a.created_at, "
    "json_extract(a.record, '$.run') AS run"
)
_ROOFLINE_COLUMNS = (
    ", json_extract(a.record, '$.bench_report.roofline.bytes_moved') AS bytes_moved"
    ", json_extract(a.record, '$.bench_report.roofline.flops') AS flops"
    ", json_extract(a.record, '$.bench_report.roofline.achieved_gbps') AS achieved_gbps"
    ", json_extract(a.record, '$.bench_report.roofline.achieved_tflops') AS achieved_tflops"
    ", json_extract(a.record, '$.bench_report.roofline.peak_gbps') AS peak_gbps"
    ", json_extract(a.record, '$.bench_report.roofline.peak_tflops') AS peak_tflops"
)
TASK_SORTS = {
    "last": "last_activity DESC",
    "name": "t.name ASC",
    "attempts": "attempts DESC",
    "eager": "best_vs_eager IS NULL, best_vs_eager DESC",
    "compile": "best_vs_compile IS NULL, best_vs_compile DESC",
    "sol": "best_pct_sol IS NULL, best_pct_sol DESC",
}


class LedgerView:
    """Paginated, aggregated reads of one ledger file, on read-only connections."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._local = threading.local()
        self._cache: dict[str, tuple[int, Any]] = {}
        self._cache_lock = threading.Lock()
        self._opened: list[sqlite3.Connection] = []

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if not self.path.exists():
                raise StoreError(f"no ledger at {self.path}", hint="run `skillbase init` to create the store")
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False, timeout=10)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._cache_lock:
                self._opened.append(conn)
        return conn

    def _rows(self, sql: str, params: tuple | list = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self._conn().execute(sql, params).fetchall()]

    def close(self) -> None:
        """Close every connection opened (a thread that reads again opens a new one)."""
        with self._cache_lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
        self._local = threading.local()

    def seq(self) -> int:
        """The ledger's last committed change: what a cached aggregate is valid for."""
        return self._conn().execute("SELECT COALESCE(MAX(seq), 0) FROM outbox").fetchone()[0]

    def _cached(self, key: str, compute) -> Any:
        seq = self.seq()
        with self._cache_lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] == seq:
            return hit[1]
        value = compute()
        with self._cache_lock:
            self._cache[key] = (seq, value)
        return value

    # -- tasks -----------------------------------------------------------------

    def facets(self) -> dict[str, list[str]]:
        """The families, hardware and suite runs present, for the tasks list's filters."""
        def compute() -> dict[str, list[str]]:
            fams = [r["family"] for r in self._rows("SELECT DISTINCT family FROM tasks ORDER BY family")]
            hws = [r["hardware"] for r in self._rows(
                "SELECT DISTINCT hardware FROM attempts WHERE hardware IS NOT NULL ORDER BY hardware")]
            runs = [r["run"] for r in self._rows(
                "SELECT DISTINCT json_extract(record, '$.run') AS run FROM attempts "
                "WHERE json_extract(record, '$.run') IS NOT NULL ORDER BY run")]
            return {"families": fams, "hardware": hws, "runs": runs}

        return self._cached("facets", compute)

    def task_rows(self, *, family: str | None = None, hardware: str | None = None, run: str | None = None,
                  name: str | None = None, sort: str = "last", offset: int = 0,
                  limit: int = 50) -> tuple[list[dict[str, Any]], int]:
        """One row per task: family, dtype, regime, attempts, best speedup vs eager and vs
        torch.compile and best % of speed of light over its correct attempts (on ``hardware``
        and in ``run`` when given), last activity. Returns (rows of the page, tasks matching)."""
        joins, params = [], []
        if hardware:
            joins.append("a.hardware = ?")
            params.append(hardware)
        if run:
            joins.append("json_extract(a.record, '$.run') = ?")
            params.append(run)
        on = " AND ".join(["a.task = t.name", *joins])
        where, wparams = [], []
        if family:
            where.append("t.family = ?")
            wparams.append(family)
        if name:
            where.append("t.name LIKE ?")
            wparams.append(f"%{name}%")
        having = " HAVING attempts > 0" if (hardware or run) else ""
        base = (
            "SELECT t.name AS task, t.family, t.dtype, t.regime, COUNT(a.id) AS attempts, "
            "SUM(a.verdict = 'correct') AS correct, "
            "MAX(CASE WHEN a.verdict = 'correct' THEN a.speedup_vs_eager END) AS best_vs_eager, "
            "MAX(CASE WHEN a.verdict = 'correct' THEN a.speedup_vs_compile END) AS best_vs_compile, "
            "MAX(CASE WHEN a.verdict = 'correct' THEN a.pct_sol END) AS best_pct_sol, "
            "COALESCE(MAX(a.created_at), t.updated_at) AS last_activity "
            f"FROM tasks t LEFT JOIN attempts a ON {on}"
            + (f" WHERE {' AND '.join(where)}" if where else "") + f" GROUP BY t.name{having}"
        )
        order = TASK_SORTS.get(sort, TASK_SORTS["last"])
        # One aggregate pass; tasks are few next to attempts, so the page is cut here.
        rows = self._rows(f"{base} ORDER BY {order}, t.name", [*params, *wparams])
        return rows[offset:offset + limit], len(rows)

    def task_row(self, name: str) -> dict[str, Any]:
        """A task's stored description (family, dtype, regime, the TaskInfo when recorded)."""
        rows = self._rows("SELECT name, signature, family, dtype, regime, info, first_seen, updated_at "
                          "FROM tasks WHERE name = ?", (name,))
        if not rows:
            raise NotFound(f"no task {name!r} in the store", hint="pick one from the tasks list")
        row = rows[0]
        row["info"] = json.loads(row["info"]) if row["info"] else None
        return row

    # -- attempts --------------------------------------------------------------

    def attempt_rows(self, *, task: str, offset: int = 0, limit: int = 50, roofline: bool = False,
                     oldest_first: bool = False) -> tuple[list[dict[str, Any]], int]:
        """A page of a task's attempts (newest first unless ``oldest_first``), light columns and
        techniques; with ``roofline`` also each report's bytes, FLOPs, achieved rates and peaks."""
        cols = _ATTEMPT_COLUMNS + (_ROOFLINE_COLUMNS if roofline else "")
        rows = self._rows(f"SELECT {cols} FROM attempts a WHERE a.task = ? "
                          f"ORDER BY a.seq {'ASC' if oldest_first else 'DESC'} LIMIT ? OFFSET ?",
                          (task, limit, offset))
        total = self._rows("SELECT COUNT(*) AS n FROM attempts WHERE task = ?", (task,))[0]["n"]
        self._add_techniques(rows, "attempt_techniques", "attempt_id")
        return rows, total

    def newest_attempt_rows(self, *, task: str, limit: int, roofline: bool = True) -> list[dict[str, Any]]:
        """The newest ``limit`` attempts of a task, oldest first (what the lineage and plots draw)."""
        cols = _ATTEMPT_COLUMNS + (_ROOFLINE_COLUMNS if roofline else "")
        rows = self._rows(f"SELECT * FROM (SELECT a.seq AS seq, {cols} FROM attempts a WHERE a.task = ? "
                          "ORDER BY a.seq DESC LIMIT ?) ORDER BY seq ASC", (task, limit))
        self._add_techniques(rows, "attempt_techniques", "attempt_id")
        return rows

    def _add_techniques(self, rows: list[dict[str, Any]], table: str, column: str) -> None:
        ids = [r["id"] for r in rows]
        found: dict[str, list[str]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            for r in self._rows(f"SELECT {column} AS item, technique FROM {table} "
                                f"WHERE {column} IN ({','.join('?' * len(chunk))}) ORDER BY {column}, pos", chunk):
                found.setdefault(r["item"], []).append(r["technique"])
        for r in rows:
            r["techniques"] = found.get(r["id"], [])

    # -- lessons ---------------------------------------------------------------

    def experience_rows(self, *, task: str | None = None, ids: list[str] | None = None, offset: int = 0,
                        limit: int = 20) -> tuple[list[dict[str, Any]], int]:
        """A page of lessons (newest first) about ``task``, or those with ``ids``."""
        if ids is not None:
            if not ids:
                return [], 0
            cond, params = f"id IN ({','.join('?' * len(ids))})", list(ids)
        else:
            cond, params = "task = ?", [task]
        rows = self._rows(f"SELECT record FROM experiences WHERE {cond} ORDER BY seq DESC LIMIT ? OFFSET ?",
                          [*params, limit, offset])
        total = self._rows(f"SELECT COUNT(*) AS n FROM experiences WHERE {cond}", params)[0]["n"]
        return [json.loads(r["record"]) for r in rows], total

    # -- skills ----------------------------------------------------------------

    def known_attempts(self, ids: list[str]) -> set[str]:
        """Which of ``ids`` are attempts in this ledger (evidence links that resolve)."""
        out: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            out |= {r["id"] for r in self._rows(
                f"SELECT id FROM attempts WHERE id IN ({','.join('?' * len(chunk))})", chunk)}
        return out
