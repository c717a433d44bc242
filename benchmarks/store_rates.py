"""Per-component rates of one store process, the inputs of docs/scale.md.

    nice -n 10 python benchmarks/store_rates.py --out benchmarks/results/cpu-2026-11-25/store_rates.json

On a fresh temporary store (embedded chroma), wall clock (time.perf_counter):

- ledger writes/s: lessons recorded one after another by one thread (each its own durable
  commit, synchronous=FULL), then by 16 threads at once (group commit: one transaction and
  one fsync for the writes that arrive together);
- embeddings/s: distinct lesson-sized texts through the model, one at a time and in batches
  of 32 (what the follower sends);
- index upserts/s: the follower catching up a backlog of lessons whose vectors are cached
  (chroma upsert + mirror), i.e. indexing without the model;
- search p50/p95: store.search over the experiences, text already embedded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from skillbase.config import Settings  # noqa: E402
from skillbase.memory.store import Store  # noqa: E402
from skillbase.models import Experience  # noqa: E402


def _lesson(i: int, tag: str) -> Experience:
    return Experience(title=f"{tag} {i}", lesson=f"{tag} {i}: splitting rows of {128 * (i % 64 + 1)} floats over two "
                      "programs halved the time once they spilled out of registers", family="softmax", dtype="fp32",
                      task_signature="softmax:fp32:large", techniques=["online-softmax"], gain=1.3,
                      bottleneck="memory", arch="sm_90", agent="rates")


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1)


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=400, help="records per measurement (default 400)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    n = args.n
    tmp = tempfile.TemporaryDirectory(prefix="skillbase-rates-")
    store = Store.open(Settings.from_env(env={}, home=Path(tmp.name) / "home"))
    out: dict = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                             "load_average_before": [round(x, 2) for x in os.getloadavg()]}}
    store.embedder.embed(["warm up"])
    store.search("experiences", "warm up", k=1)

    # The follower is not told about these writes, so they time the commit alone.
    poke, store._follower.poke = store._follower.poke, lambda: 0
    t = time.perf_counter()
    for i in range(n):
        store.record_experience(_lesson(i, "serial"))
    serial = time.perf_counter() - t
    per = n // 16
    gate = threading.Barrier(16)

    def writer(w):
        gate.wait()
        for i in range(per):
            store.record_experience(_lesson(w * per + i, f"group-{w}"))

    before = store.ledger._group.stats.calls
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(16)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    grouped = time.perf_counter() - t
    commits = store.ledger._group.stats.calls - before
    store._follower.poke = poke
    out["ledger_writes_per_s"] = {"one_writer": _rate(n, serial), "16_writers_group_commit": _rate(16 * per, grouped),
                                  "16_writers_commits": commits, "16_writers_records": 16 * per}

    texts = [_lesson(i, "embed").lesson + f" variant {i}" for i in range(n)]
    t = time.perf_counter()
    for x in texts[: n // 4]:
        store.embedder._m.encode([x], None)
    one = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(n // 4, n, 32):
        store.embedder._m.encode(texts[i:i + 32], None)
    batched = time.perf_counter() - t
    out["embeddings_per_s"] = {"one_at_a_time": _rate(n // 4, one), "batches_of_32": _rate(n - n // 4, batched)}

    # Indexing the backlog written above (vectors not cached yet: model + upsert), then
    # the cost without the model, measured by re-indexing what is now cached.
    t = time.perf_counter()
    store.sync()
    backlog = time.perf_counter() - t
    total = store.stats().counts["experiences"]
    t = time.perf_counter()
    store.reindex()
    reindex = time.perf_counter() - t
    out["index_records_per_s"] = {"backlog_with_model": _rate(2 * n, backlog),
                                  "reindex_vectors_cached": _rate(total, reindex), "records": total}

    lat = []
    for i in range(200):
        t = time.perf_counter()
        store.search("experiences", texts[i % 20], k=10, documents=False)
        lat.append((time.perf_counter() - t) * 1e3)
    lat.sort()
    out["search_ms"] = {"p50": round(statistics.median(lat), 2), "p95": round(lat[int(0.95 * (len(lat) - 1))], 2),
                        "records": total}
    out["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    store.close()
    tmp.cleanup()
    print(json.dumps(out, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
