"""Which chroma calls stop every other thread of the process (the many-clients load bar).

An embedded chroma client runs in the server's process. A call that keeps the interpreter
lock while its native code works stops every other thread (tool calls, the event loop) for
as long as it takes. This script measures that directly: a ticker thread wakes every 0.5 ms
and records how long it was away; while a chroma call runs, the ticker's longest absence is
how long that call kept everyone else waiting. Compared with the call's own wall time:
a call that lets go of the lock leaves the ticker at ~0.5 ms, one that keeps it leaves it
away for the whole call.

    python benchmarks/chroma_gil.py [--records 20000] [--repeat 30] [--payloads] [--out results.json]

``--payloads`` adds upserts of 1, 16 and 64 records carrying vectors, metadata and texts (as the
index wrote them until 2026-11-28), vectors and metadata, and vectors only (as it writes them now).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

DIM = 384  # the packaged model's embedding size
TICK_S = 0.0005


class Ticker:
    """A thread that sleeps TICK_S at a time and records how long each sleep really took."""

    def __init__(self):
        self.gaps: list[float] = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop:
            time.sleep(TICK_S)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now

    def __enter__(self) -> "Ticker":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop = True
        self._thread.join()


def _metadata(i: int) -> dict:
    return {"family": "softmax", "dtype": "fp32", "task_signature": "softmax:fp32:large", "gain": 1.5,
            "techniques": ["online-softmax", "vectorized-loads"], "arch": "sm_90", "session": f"s{i % 97}"}


def _document(i: int) -> str:
    return f"lesson {i}: rows wider than the register file spill; split each row over two programs. " * 4


PAYLOADS = {"vectors, metadata, texts": (True, True), "vectors, metadata": (True, False), "vectors only": (False, False)}


def measure(records: int, repeat: int, payloads: bool = False) -> list[dict]:
    import chromadb
    from chromadb.config import Settings

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="chroma-gil-") as tmp:
        client = chromadb.PersistentClient(path=tmp, settings=Settings(anonymized_telemetry=False))
        col = client.get_or_create_collection("experiences", metadata={"hnsw:space": "cosine"},
                                              embedding_function=None)
        for lo in range(0, records, 1000):
            ids = range(lo, min(records, lo + 1000))
            col.upsert(ids=[f"r{i}" for i in ids], embeddings=rng.standard_normal((len(ids), DIM)).astype(np.float32),
                       metadatas=[_metadata(i) for i in ids], documents=[_document(i) for i in ids])
        query = rng.standard_normal((1, DIM)).astype(np.float32)
        fresh = iter(range(records, 10 ** 9))

        def upsert(n: int, metadata: bool = True, texts: bool = True):
            def call():
                ids = [next(fresh) for _ in range(n)]
                col.upsert(ids=[f"r{i}" for i in ids], embeddings=rng.standard_normal((n, DIM)).astype(np.float32),
                           metadatas=[_metadata(i) for i in ids] if metadata else None,
                           documents=[_document(i) for i in ids] if texts else None)
            return call

        ops = [(f"upsert {n} record{'s' if n > 1 else ''}", upsert(n)) for n in (1, 4, 16, 32)]
        if payloads:
            ops += [(f"upsert {n}: {name}", upsert(n, *flags)) for n in (1, 16, 64) for name, flags in PAYLOADS.items()]
        ops += [("query k=10", lambda: col.query(query_embeddings=query, n_results=10, include=["distances"])),
                ("query k=256", lambda: col.query(query_embeddings=query, n_results=256, include=["distances"])),
                ("get 10 documents", lambda: col.get(ids=[f"r{i}" for i in range(10)], include=["documents"])),
                ("count", col.count)]
        rows = []
        for name, call in ops:
            call()  # once before timing
            walls, held = [], []
            with Ticker() as ticker:
                for _ in range(repeat):
                    time.sleep(0.01)  # the ticker's gaps settle between calls
                    before = len(ticker.gaps)
                    t0 = time.perf_counter()
                    call()
                    walls.append(time.perf_counter() - t0)
                    time.sleep(0.002)  # the ticker's first wake after the call closes its gap
                    held.append(max(ticker.gaps[before:], default=0.0))
            rows.append({"op": name, "wall_ms_median": 1e3 * float(np.median(walls)),
                         "ticker_longest_gap_ms_median": 1e3 * float(np.median(held)),
                         "ticker_longest_gap_ms_max": 1e3 * float(np.max(held)), "repeat": repeat})
        return rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20000, help="records in the collection first (default 20000)")
    ap.add_argument("--repeat", type=int, default=30, help="calls timed per operation (default 30)")
    ap.add_argument("--payloads", action="store_true", help="also upserts with less in them (see above)")
    ap.add_argument("--out", type=Path, help="write the JSON here")
    args = ap.parse_args(argv)
    import chromadb

    rows = measure(args.records, args.repeat, args.payloads)
    print(f"chroma {chromadb.__version__}, embedded, {args.records} records of {DIM} dims; "
          f"a ticker thread wakes every {TICK_S * 1e3:.1f} ms")
    print(f"{'operation':<38} {'wall ms':>8} {'ticker away ms (median / max)':>32}")
    for r in rows:
        print(f"{r['op']:<38} {r['wall_ms_median']:>8.2f} {r['ticker_longest_gap_ms_median']:>20.2f} / "
              f"{r['ticker_longest_gap_ms_max']:.2f}")
    result = {"benchmark": "chroma_gil", "chroma": chromadb.__version__, "records": args.records, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
        print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
