"""Writer processes for the concurrency and crash tests.

The tests start them from a multiprocessing forkserver that has imported
this module (and with it torch, sentence-transformers and chromadb) once, so
each writer is a real, separate process without paying those imports again.
They also run as a script:

    writer_proc.py concurrent HOME URL|- WRITER N WRITERS OUT_DIR
        records N attempts (chains of 5) each with a lesson, waits until every
        writer is done, then checks from this process that every record of
        every writer is in the ledger, the index and the graph, and that a
        sample of them is found by meaning; writes OUT_DIR/WRITER.json.

    writer_proc.py crash HOME URL|- BATCH LOG
        records batches of BATCH attempts (one transaction) and BATCH lessons
        (another) until killed, appending "committed <kind> <ids...>" to LOG
        after each commit.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from pathlib import Path

import chromadb  # noqa: F401  (imported here so a forkserver preloading this module pays for it once)
import sentence_transformers  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_factories import MATMUL_SRC, SOFTMAX_SRC, attempt, lesson  # noqa: E402

from skillbase.memory.store import Store  # noqa: E402
from skillbase.config import Settings  # noqa: E402

TECHS = ["online-softmax", "vectorized-access", "num-warps-tuning", "block-size-tuning", "tensor-cores",
         "smem-tiling", "program-swizzle", "software-pipelining", "cache-hints", "masking"]
TOPICS = ["wide rows", "skinny matrices", "fp16 inputs", "ragged tails", "tiny batches", "huge K", "L2 reuse",
          "register spills", "bank conflicts", "launch overhead"]


def lesson_text(writer: int, i: int) -> str:
    rng = random.Random(writer * 100_003 + i)
    a, b = rng.sample(TECHS, 2)
    return (f"writer {writer} step {i}: {a} then {b} helped with {rng.choice(TOPICS)}; "
            f"measured {rng.uniform(1.01, 3.0):.2f}x on {rng.choice(['sm_90', 'sm_80'])}")


def records(writer: int, i: int, parent: str | None):
    rng = random.Random(writer * 7919 + i)
    base, sig = (SOFTMAX_SRC, "softmax:fp32:large") if writer % 2 == 0 else (MATMUL_SRC, "matmul:fp16:large")
    a = attempt(writer * 1_000_000 + i, parent=parent, techniques=tuple(rng.sample(TECHS, 2)),
                ms=round(rng.uniform(0.1, 1.0), 4), task=f"task-w{writer}", signature=sig, base=base,
                session=f"writer-{writer}")
    e = lesson(lesson_text(writer, i), techniques=tuple(a.techniques), after=a.id, before=parent,
               family=sig.split(":")[0], signature=sig, session=f"writer-{writer}")
    return a, e


def concurrent(home: str, url: str, writer: int, n: int, writers: int, out: str) -> None:
    settings = Settings.from_env(env={}, home=Path(home), chroma_url=None if url == "-" else url)
    store = Store.open(settings)
    t0 = time.monotonic()
    parent = None
    for i in range(n):
        a, e = records(writer, i, parent if i % 5 else None)
        store.record_attempt(a)
        store.record_experience(e)
        parent = a.id
    wrote_s = time.monotonic() - t0
    done = Path(out) / f"done-{writer}"
    done.write_text("ok")
    while len(list(Path(out).glob("done-*"))) < writers:
        time.sleep(0.1)
    store.sync()
    stats = store.stats()
    # Searchable from this process: a sample of every writer's lessons, found
    # by their own text among all writers' records.
    rng = random.Random(writer)
    sample = [(w, i) for w in range(writers) for i in rng.sample(range(n), 3)]
    found = 0
    for w, i in sample:
        hits = store.search("experiences", lesson_text(w, i), k=3)
        found += any(h.document.startswith(f"writer {w} step {i}:") for h in hits)
    result = {
        "writer": writer, "wrote_s": wrote_s, "counts": stats.counts, "index_counts": stats.index_counts,
        "index_lag": stats.index_lag, "graph": store.graph.counts(), "sample": len(sample), "found": found,
        "mine": len(store.list_attempts(session=f"writer-{writer}", limit=100_000)),
    }
    Path(out, f"{writer}.json").write_text(json.dumps(result))
    store.close()


def crash(home: str, url: str, batch: int, log_path: str) -> None:
    settings = Settings.from_env(env={}, home=Path(home), chroma_url=None if url == "-" else url)
    store = Store.open(settings)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    k = 0
    while True:
        pairs = [records(0, k + j, None) for j in range(batch)]
        stored = store.record_attempts([a for a, _ in pairs])
        os.write(fd, ("committed attempt " + " ".join(a.id for a in stored) + "\n").encode())
        stored = store.record_experiences([e for _, e in pairs])
        os.write(fd, ("committed experience " + " ".join(e.id for e in stored) + "\n").encode())
        k += batch


def run(mode: str, *args: str, error_file: str | None = None) -> None:
    """Entry point of a writer process; a failure's traceback goes to
    ``error_file`` (when given) so the test can show it."""
    try:
        if mode == "concurrent":
            concurrent(args[0], args[1], int(args[2]), int(args[3]), int(args[4]), args[5])
        elif mode == "crash":
            crash(args[0], args[1], int(args[2]), args[3])
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    except BaseException:
        if error_file:
            Path(error_file).write_text(traceback.format_exc())
        raise


if __name__ == "__main__":
    run(sys.argv[1], *sys.argv[2:])
