"""Where a live server's recall spends its time, phase by phase (a diagnostic for benchmarks/mcp_load.py).

Put this folder on PYTHONPATH and set SKILLBASE_PHASES_DIR: every process that then imports the
retriever (the server, each `serve --workers` worker) writes one line per recall to
``$SKILLBASE_PHASES_DIR/<pid>.jsonl``: its wall time in the retriever and the seconds spent inside each
timed step (nested steps count in their parents too), with the count of each. Nothing changes
otherwise; without SKILLBASE_PHASES_DIR this file does nothing. `python benchmarks/recall_phases.py DIR`
sums the lines up.

    SKILLBASE_PHASES_DIR=/tmp/ph PYTHONPATH=benchmarks/phases python benchmarks/mcp_load.py --clients 16
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
import threading
import time

_DIR = os.environ.get("SKILLBASE_PHASES_DIR")

# module -> [(class, method, phase)]; the retriever's recall opens a record, the rest add to it.
STEPS = {
    "skillbase.retrievers.retriever": [("Retriever", "recall", "recall"), ("Retriever", "_retrieve", "retrieve")],
    "skillbase.retrievers.vector": [("VectorRetriever", "search", "vector")],
    "skillbase.retrievers.lexical": [("LexicalRetriever", "search", "lexical")],
    "skillbase.retrievers.graph": [("GraphRetriever", "skills", "graph"), ("GraphRetriever", "experiences", "graph"),
                                   ("GraphRetriever", "attempts", "graph")],
    "skillbase.memory.store": [("Store", "search", "store.search"), ("Store", "_await_index", "await_index"),
                               ("Store", "_fresh_tail", "fresh_tail"), ("Store", "_tail_hits", "tail_hits"),
                               ("Store", "_sync_index", "sync_index")],
    "skillbase.memory.vectors": [("VectorIndex", "query", "index.query"), ("VectorIndex", "session", "index.session"),
                                 ("VectorIndex", "ready", "index.ready")],
    "skillbase.memory.embeddings": [("Embedder", "embed", "embed"), ("_Model", "_encode", "model.run")],
    "skillbase.memory.follower": [("Follower", "wait", "follower.wait")],
}

_local = threading.local()
_files: dict[int, object] = {}
_flock = threading.Lock()


def _write(line: dict) -> None:
    pid = os.getpid()
    with _flock:
        f = _files.get(pid)
        if f is None:
            os.makedirs(_DIR, exist_ok=True)
            f = _files[pid] = open(os.path.join(_DIR, f"{pid}.jsonl"), "a", buffering=1)
        f.write(json.dumps(line) + "\n")


def _timed(fn, phase: str):
    if phase == "recall":
        def opener(*a, **k):
            rec: dict[str, list[float]] = {}
            outer, _local.rec = getattr(_local, "rec", None), rec
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                _local.rec = outer
                _write({"t": round(time.time(), 4), "wall_ms": round((time.perf_counter() - t0) * 1e3, 3),
                        "thread_cpu_ms": round((time.thread_time() - c0) * 1e3, 3),
                        "phases": {p: [round(s * 1e3, 3), n] for p, (s, n) in rec.items()}})
        return opener

    if phase == "index.session":  # a context manager: time from entering to leaving
        from contextlib import contextmanager

        @contextmanager
        def session(*a, **k):
            rec = getattr(_local, "rec", None)
            t0 = time.perf_counter()
            with fn(*a, **k) as state:
                if rec is not None:
                    e = rec.setdefault("index.session_wait", [0.0, 0])
                    e[0] += time.perf_counter() - t0
                    e[1] += 1
                yield state
        return session

    def step(*a, **k):
        rec = getattr(_local, "rec", None)
        if rec is None:
            return fn(*a, **k)
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            e = rec.setdefault(phase, [0.0, 0])
            e[0] += time.perf_counter() - t0
            e[1] += 1
    return step


def _patch(module) -> None:
    for cls_name, meth, phase in STEPS[module.__name__]:
        cls = getattr(module, cls_name, None)
        fn = getattr(cls, meth, None) if cls is not None else None
        if fn is not None:
            setattr(cls, meth, _timed(fn, phase))


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in STEPS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


if _DIR:
    sys.meta_path.insert(0, _Hook())
