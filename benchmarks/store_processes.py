"""Processes sharing one store: how often the embedding model runs for each record written.

    python benchmarks/store_processes.py                                   # 1 then 2 processes
    python benchmarks/store_processes.py --processes 1,2,4 --chroma server --out /tmp/sp.json

Several server processes over one ``SKILLBASE_HOME`` share its ledger, its vector index and its
embedding cache file. Each record needs its text embedded once; a process that embeds another
process's records (or its own twice) spends model time, the largest piece of a loaded server's CPU,
for nothing. For each process count N: a fresh store; N processes open it, warm their model, and,
released together, each runs 3 writer threads (a unique lesson every 20 ms each) and 1 reader thread
(a search every 20 ms, 5 distinct queries cycled, so a query is embedded once per process). Then each
waits until the index holds every change and reports the texts its model embedded. Reported: model
texts per lesson over all processes (1.0 is every lesson once; the queries add 5 a process), the
seconds until everything was indexed, and each process's count.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

WRITERS = 3
QUERIES = ["tile the K loop", "unroll twice", "stage the bias in shared memory", "hide the load latency",
           "keep the tile in registers"]


def _settings(home: str, url: str | None):
    from skillbase.config import Settings

    return Settings.from_env(env={}, home=Path(home), chroma_url=url)


def one_process(home: str, url: str | None, wid: int, lessons: int, barrier, out) -> None:
    from skillbase.memory.store import Store
    from skillbase.models import Experience

    store = Store.open(_settings(home, url))
    try:
        store.embedder.embed(["warm up"])
        before = store.embedder.computed
        barrier.wait(300)
        t0 = time.perf_counter()

        def write(t: int) -> None:
            for i in range(lessons):
                store.record_experience(Experience(
                    lesson=f"process {wid} thread {t} lesson {i}: tile the K loop by {i % 7 + 2}, unroll twice",
                    family="matmul"))
                time.sleep(0.02)

        def read() -> None:
            for i in range(lessons):
                store.search("experiences", QUERIES[i % len(QUERIES)], k=5)
                time.sleep(0.02)

        threads = [threading.Thread(target=write, args=(t,)) for t in range(WRITERS)]
        threads.append(threading.Thread(target=read))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        barrier.wait(300)  # every process has written everything
        store.sync()
        indexed_s = time.perf_counter() - t0
        out.put({"process": wid, "model_texts": store.embedder.computed - before, "lessons": WRITERS * lessons,
                 "indexed_after_s": round(indexed_s, 2), "index_lag": store.stats().index_lag})
    finally:
        store.close()


def run(n: int, lessons: int, url: str | None, tmp: Path) -> dict:
    from skillbase.memory.store import Store

    home = tmp / f"home-{n}"
    Store.open(_settings(str(home), url)).close()  # created and seeded once, before the processes race
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=one_process, args=(str(home), url, w, lessons, barrier, out)) for w in range(n)]
    for p in procs:
        p.start()
    rows = sorted((out.get(timeout=600) for _ in procs), key=lambda r: r["process"])
    for p in procs:
        p.join(60)
    written = sum(r["lessons"] for r in rows)
    texts = sum(r["model_texts"] for r in rows)
    queries = n * len(QUERIES)
    return {"processes": n, "lessons": written, "model_texts": texts, "query_texts_at_most": queries,
            "model_texts_per_lesson": round((texts - queries) / written, 3),
            "model_texts_per_lesson_queries_included": round(texts / written, 3),
            "indexed_after_s": max(r["indexed_after_s"] for r in rows),
            "index_lag_after": max(r["index_lag"] for r in rows), "per_process": rows}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", default="1,2", help="comma-separated process counts (default 1,2)")
    ap.add_argument("--lessons", type=int, default=60, help="lessons per writer thread (default 60)")
    ap.add_argument("--chroma", choices=("embedded", "server"), default="embedded")
    ap.add_argument("--out", type=Path, help="write the JSON here")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="skillbase-procs-"))
    chroma = None
    try:
        url = None
        if args.chroma == "server":
            from mcp_load import start_chroma

            chroma, url = start_chroma(tmp)
        runs = []
        for n in [int(x) for x in args.processes.split(",")]:
            r = run(n, args.lessons, url, tmp)
            runs.append(r)
            print(f"{n} process(es): {r['lessons']} lessons, {r['model_texts']} texts through the model "
                  f"({r['model_texts_per_lesson']} per lesson, the <= {r['query_texts_at_most']} query texts "
                  f"aside); everything indexed {r['indexed_after_s']} s after the start "
                  f"(per process: {[p['model_texts'] for p in r['per_process']]})")
        result = {"benchmark": "store_processes", "chroma": args.chroma, "writers_per_process": WRITERS,
                  "lessons_per_writer": args.lessons, "runs": runs,
                  "machine": {"platform": platform.platform(), "python": platform.python_version()}}
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
            print(f"wrote {args.out}")
        return result
    finally:
        if chroma is not None:
            from mcp_load import stop

            stop(chroma)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
