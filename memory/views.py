"""Read-only views of the ledger for pages that list and aggregate (the curation UI).

A ``LedgerView`` opens its own read-only SQLite connections (one per thread), so
a page never waits on the Store's connection lock while a writer holds it (a
benchmark being recorded, an ingest batch), and SQLite's WAL lets a reader see
the last committed state while a write is in flight. Every list takes an offset
and a limit: at 100k attempts nothing is read whole on a page. The per-task
aggregates of the tasks list are built by one scan of the attempts' light columns
on first use and then follow the ledger, reading only attempts recorded since.

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
TASK_SORTS = {  # sort name -> (row key, descending)
    "last": ("last_activity", True),
    "name": ("task", False),
    "attempts": ("attempts", True),
    "eager": ("best_vs_eager", True),
    "compile": ("best_vs_compile", True),
    "sol": ("best_pct_sol", True),
    "family": ("family", False),
}


class LedgerView:
    """Paginated, aggregated reads of one ledger file, on read-only connections."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._local = threading.local()
        self._cache_lock = threading.Lock()
        self._opened: list[sqlite3.Connection] = []
        self._stats: dict[str, dict[tuple[str | None, str | None], list]] = {}
        self._stats_seq = 0
        self._stats_lock = threading.Lock()
        # Reads in flight: close() waits for them, a query on a connection being closed crashes the process.
        self._reads = 0
        self._closing = False  # new reads wait while close() runs, so it is not starved by a busy page
        self._idle = threading.Condition()

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
        with self._idle:
            self._idle.wait_for(lambda: not self._closing)
            self._reads += 1
        try:
            return [dict(r) for r in self._conn().execute(sql, params).fetchall()]
        finally:
            with self._idle:
                self._reads -= 1
                self._idle.notify_all()

    def close(self, timeout: float = 30.0) -> None:
        """Close every connection opened, once the reads in flight are done (a thread that reads
        again opens a new one). A UI warm-up thread may be reading while a server shuts down."""
        with self._idle:
            self._closing = True
            try:
                self._idle.wait_for(lambda: self._reads == 0, timeout=timeout)
                with self._cache_lock:
                    opened, self._opened = self._opened, []
                for conn in opened:
                    conn.close()
                self._local = threading.local()
            finally:
                self._closing = False
                self._idle.notify_all()

    # -- tasks -----------------------------------------------------------------

    def facets(self) -> dict[str, list[str]]:
        """The families, hardware and suite runs present, for the tasks list's filters."""
        keys = {k for per_task in self._task_groups().values() for k in per_task}
        fams = [r["family"] for r in self._rows("SELECT DISTINCT family FROM tasks ORDER BY family")]
        return {
            "families": fams,
            "hardware": sorted({hw for hw, _ in keys if hw}),
            "runs": sorted({run for _, run in keys if run}),
        }

    def task_rows(
        self,
        *,
        family: str | None = None,
        hardware: str | None = None,
        run: str | None = None,
        name: str | None = None,
        sort: str = "last",
        order: str | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> tuple[list[dict[str, Any]], int]:
        """One row per task: family, dtype, regime, attempts, best speedup vs eager and vs
        torch.compile and best % of speed of light over its correct attempts (on ``hardware``
        and in ``run`` when given), last activity. Returns (rows of the page, tasks matching)."""
        groups = self._task_groups()
        tasks = self._rows(
            "SELECT name, family, dtype, regime, updated_at FROM tasks" + (" WHERE family = ?" if family else ""),
            (family,) if family else (),
        )
        rows = []
        for t in tasks:
            if name and name.lower() not in t["name"].lower():
                continue
            row = {
                "task": t["name"],
                "family": t["family"],
                "dtype": t["dtype"],
                "regime": t["regime"],
                "attempts": 0,
                "correct": 0,
                "best_vs_eager": None,
                "best_vs_compile": None,
                "best_pct_sol": None,
                "last_activity": None,
            }
            for (hw, rn), g in groups.get(t["name"], {}).items():
                if (hardware and hw != hardware) or (run and rn != run):
                    continue
                row["attempts"] += g[0]
                row["correct"] += g[1]
                for i, key in ((2, "best_vs_eager"), (3, "best_vs_compile"), (4, "best_pct_sol"), (5, "last_activity")):
                    if g[i] is not None and (row[key] is None or g[i] > row[key]):
                        row[key] = g[i]
            if (hardware or run) and not row["attempts"]:
                continue
            row["last_activity"] = row["last_activity"] or t["updated_at"]
            rows.append(row)
        rows.sort(key=lambda r: r["task"])
        key, reverse = TASK_SORTS.get(sort, TASK_SORTS["last"])
        if order in ("asc", "desc"):  # a column header clicked again turns its order round
            reverse = order == "desc"
        known = [r for r in rows if r[key] is not None]
        known.sort(key=lambda r: r[key], reverse=reverse)
        rows = known + [r for r in rows if r[key] is None]  # rows without the figure last, either way
        return rows[offset : offset + limit], len(rows)

    def summary(self, recent: int = 5) -> dict[str, Any]:
        """The home page's figures: tasks, attempts and correct attempts in the store, and the
        ``recent`` newest attempts (light columns)."""
        groups = self._task_groups()
        attempts = sum(g[0] for per_task in groups.values() for g in per_task.values())
        correct = sum(g[1] for per_task in groups.values() for g in per_task.values())
        tasks = self._rows("SELECT COUNT(*) AS n FROM tasks")[0]["n"]
        rows = self._rows(f"SELECT {_ATTEMPT_COLUMNS} FROM attempts a ORDER BY a.seq DESC LIMIT ?", (recent,))
        return {"tasks": tasks, "attempts": attempts, "correct": correct, "recent": rows}

    def _task_groups(self) -> dict[str, dict[tuple[str | None, str | None], list]]:
        """Per task, per (hardware, run): [attempts, correct, best vs eager, best vs torch.compile,
        best % of SOL, last created_at]. Built by one scan, then kept up to date by reading only
        the attempts recorded since (attempts are append-only; ``seq`` grows), so a page costs
        the new rows, not 100k."""
        with self._stats_lock:
            rows = self._rows(
                "SELECT seq, task, hardware, json_extract(record, '$.run') AS run, verdict, speedup_vs_eager, "
                "speedup_vs_compile, pct_sol, created_at FROM attempts WHERE seq > ? ORDER BY seq",
                (self._stats_seq,),
            )
            for r in rows:
                g = self._stats.setdefault(r["task"], {}).setdefault(
                    (r["hardware"], r["run"]), [0, 0, None, None, None, None]
                )
                g[0] += 1
                if r["verdict"] == "correct":
                    g[1] += 1
                    for i, v in ((2, r["speedup_vs_eager"]), (3, r["speedup_vs_compile"]), (4, r["pct_sol"])):
                        if v is not None and (g[i] is None or v > g[i]):
                            g[i] = v
                if g[5] is None or r["created_at"] > g[5]:
                    g[5] = r["created_at"]
                self._stats_seq = r["seq"]
            return self._stats

    def task_row(self, name: str) -> dict[str, Any]:
        """A task's stored description (family, dtype, regime, the TaskInfo when recorded)."""
        rows = self._rows(
            "SELECT name, signature, family, dtype, regime, info, first_seen, updated_at FROM tasks WHERE name = ?",
            (name,),
        )
        if not rows:
            raise NotFound(f"no task {name!r} in the store", hint="pick one from the tasks list")
        row = rows[0]
        row["info"] = json.loads(row["info"]) if row["info"] else None
        return row

    # -- attempts --------------------------------------------------------------

    def attempt_rows(
        self, *, task: str, offset: int = 0, limit: int = 50, roofline: bool = False, oldest_first: bool = False
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of a task's attempts (newest first unless ``oldest_first``), light columns and
        techniques; with ``roofline`` also each report's bytes, FLOPs, achieved rates and peaks."""
        cols = _ATTEMPT_COLUMNS + (_ROOFLINE_COLUMNS if roofline else "")
        rows = self._rows(
            f"SELECT {cols} FROM attempts a WHERE a.task = ? "
            f"ORDER BY a.seq {'ASC' if oldest_first else 'DESC'} LIMIT ? OFFSET ?",
            (task, limit, offset),
        )
        total = self._rows("SELECT COUNT(*) AS n FROM attempts WHERE task = ?", (task,))[0]["n"]
        self._add_techniques(rows, "attempt_techniques", "attempt_id")
        return rows, total

    def best_attempt_row(self, *, task: str) -> dict[str, Any] | None:
        """The correct attempt of a task with the highest speedup vs eager (any GPU), or None."""
        rows = self._rows(
            f"SELECT {_ATTEMPT_COLUMNS} FROM attempts a WHERE a.task = ? AND a.verdict = 'correct' "
            "AND a.speedup_vs_eager IS NOT NULL ORDER BY a.speedup_vs_eager DESC LIMIT 1",
            (task,),
        )
        return rows[0] if rows else None

    def newest_attempt_rows(self, *, task: str, limit: int, roofline: bool = True) -> list[dict[str, Any]]:
        """The newest ``limit`` attempts of a task, oldest first (what the lineage and plots draw)."""
        cols = _ATTEMPT_COLUMNS + (_ROOFLINE_COLUMNS if roofline else "")
        rows = self._rows(
            f"SELECT * FROM (SELECT a.seq AS seq, {cols} FROM attempts a WHERE a.task = ? "
            "ORDER BY a.seq DESC LIMIT ?) ORDER BY seq ASC",
            (task, limit),
        )
        self._add_techniques(rows, "attempt_techniques", "attempt_id")
        return rows

    def _add_techniques(self, rows: list[dict[str, Any]], table: str, column: str) -> None:
        ids = [r["id"] for r in rows]
        found: dict[str, list[str]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            for r in self._rows(
                f"SELECT {column} AS item, technique FROM {table} "
                f"WHERE {column} IN ({','.join('?' * len(chunk))}) ORDER BY {column}, pos",
                chunk,
            ):
                found.setdefault(r["item"], []).append(r["technique"])
        for r in rows:
            r["techniques"] = found.get(r["id"], [])

    # -- lessons ---------------------------------------------------------------

    def experience_rows(
        self, *, task: str | None = None, ids: list[str] | None = None, offset: int = 0, limit: int = 20
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of lessons (newest first) about ``task``, or those with ``ids``."""
        if ids is not None:
            if not ids:
                return [], 0
            cond, params = f"id IN ({','.join('?' * len(ids))})", list(ids)
        else:
            cond, params = "task = ?", [task]
        rows = self._rows(
            f"SELECT record FROM experiences WHERE {cond} ORDER BY seq DESC LIMIT ? OFFSET ?", [*params, limit, offset]
        )
        total = self._rows(f"SELECT COUNT(*) AS n FROM experiences WHERE {cond}", params)[0]["n"]
        return [json.loads(r["record"]) for r in rows], total

    # -- skills ----------------------------------------------------------------

    def known_attempts(self, ids: list[str]) -> set[str]:
        """Which of ``ids`` are attempts in this ledger (evidence links that resolve)."""
        out: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            out |= {
                r["id"]
                for r in self._rows(f"SELECT id FROM attempts WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            }
        return out
