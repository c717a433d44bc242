"""Processes sharing one store: how often the embedding model runs for each record written.

    python benchmarks/store_processes.py                                   # 1 then 2 processes
    python benchmarks/store_processes.py --processes 1,2,4 --chroma server --out /tmp/sp.json
    python benchmarks/store_processes.py --processes 2 --chroma server --kill-after 1.0     # one process killed

Several server processes over one ``SKILLBASE_HOME`` share its ledger, its vector index and its
embedding cache file. Each record needs its text embedded once; a process that embeds another
process's records (or its own twice) spends model time, the largest piece of a loaded server's CPU,
for nothing. For each process count N: a fresh store; N processes open it, warm their model, and,
released together, each runs 3 writer threads (a unique lesson every 20 ms each) and 1 reader thread
(a search every 20 ms, 5 distinct queries cycled, so a query is embedded once per process). Then each
waits until the index holds every change and reports the texts its model embedded. Reported: model
texts per lesson over all processes (1.0 is every lesson once; the queries add 5 a process), the
seconds until everything was indexed, and each process's count.

With ``--kill-after S`` the first process is killed (SIGKILL) S seconds after the start, in the middle
of its writes: some of its committed lessons are not embedded yet, and nobody will embed them for it.
The others finish their writes and then do not catch the index up themselves: they wait for their
index followers alone to index every change, the dead process's included (the followers leave another
process's records to their writer only for a grace period). Reported: seconds from the kill until the
index held every change, and the index's record counts against the ledger's.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path

from json_report import write_report  # this folder is the script's first path entry

ROOT = Path(__file__).resolve().parents[1]

WRITERS = 3
QUERIES = ["tile the K loop", "unroll twice", "stage the bias in shared memory", "hide the load latency",
           "keep the tile in registers"]


def _settings(home: str, url: str | None):
    from skillbase.config import Settings

    return Settings.from_env(env={}, home=Path(home), chroma_url=url)


def one_process(home: str, url: str | None, wid: int, lessons: int, barrier, out, one_killed: bool = False) -> None:
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
        if one_killed:  # another process was killed mid-write: only the followers index from here on
            deadline = time.perf_counter() + 60
            while store.stats().index_lag:
                if time.perf_counter() > deadline:
                    break
                time.sleep(0.05)
            st = store.stats()
            out.put({"process": wid, "model_texts": store.embedder.computed - before, "lessons": WRITERS * lessons,
                     "indexed_at": time.time(), "index_lag": st.index_lag,
                     "ledger_experiences": st.counts.get("experiences"),
                     "index_experiences": st.index_counts.get("experiences")})
            return
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


def run_kill(n: int, lessons: int, url: str | None, tmp: Path, after_s: float) -> dict:
    import os
    import signal

    from skillbase.memory.store import Store

    home = tmp / f"home-kill-{n}"
    Store.open(_settings(str(home), url)).close()
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(n + 1), ctx.Queue()
    procs = [ctx.Process(target=one_process, args=(str(home), url, w, lessons, barrier, out, True)) for w in range(n)]
    for p in procs:
        p.start()
    barrier.wait(300)  # every process is warm: go
    time.sleep(after_s)
    os.kill(procs[0].pid, signal.SIGKILL)
    killed_at = time.time()
    procs[0].join(30)
    rows = sorted((out.get(timeout=600) for _ in procs[1:]), key=lambda r: r["process"])
    for p in procs[1:]:
        p.join(60)
    return {"processes": n, "killed": 0, "killed_after_s": after_s,
            "indexed_after_kill_s": round(max(r["indexed_at"] for r in rows) - killed_at, 2),
            "index_lag_after": max(r["index_lag"] for r in rows),
            "ledger_experiences": rows[-1]["ledger_experiences"], "index_experiences": rows[-1]["index_experiences"],
            "survivors": rows}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", default="1,2", help="comma-separated process counts (default 1,2)")
    ap.add_argument("--lessons", type=int, default=60, help="lessons per writer thread (default 60)")
    ap.add_argument("--chroma", choices=("embedded", "server"), default="embedded")
    ap.add_argument("--kill-after", type=float, default=None,
                    help="kill the first process (SIGKILL) this many seconds after the start; the others' followers "
                         "must index everything, its records included")
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
            if args.kill_after is not None:
                if n < 2:
                    ap.error("--kill-after needs 2 processes or more")
                r = run_kill(n, args.lessons, url, tmp, args.kill_after)
                runs.append(r)
                print(f"{n} processes, the first killed {args.kill_after:g} s in: the survivors' followers indexed "
                      f"every change {r['indexed_after_kill_s']} s after the kill (index lag {r['index_lag_after']}); "
                      f"lessons in the ledger {r['ledger_experiences']}, in the index {r['index_experiences']}")
                continue
            r = run(n, args.lessons, url, tmp)
            runs.append(r)
            print(f"{n} process(es): {r['lessons']} lessons, {r['model_texts']} texts through the model "
                  f"({r['model_texts_per_lesson']} per lesson, the <= {r['query_texts_at_most']} query texts "
                  f"aside); everything indexed {r['indexed_after_s']} s after the start "
                  f"(per process: {[p['model_texts'] for p in r['per_process']]})")
        result = {"benchmark": "store_processes", "chroma": args.chroma, "writers_per_process": WRITERS,
                  "lessons_per_writer": args.lessons, "runs": runs,
                  "machine": {"platform": platform.platform(), "python": platform.python_version()}}
        write_report(args.out, result, indent=1)
        return result
    finally:
        if chroma is not None:
            from mcp_load import stop

            stop(chroma)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
