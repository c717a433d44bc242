"""The vector index's sweep: records chroma's search loses after their write, looked for again.

    python benchmarks/index_sweep.py --seconds 40 --out benchmarks/results/cpu-2026-11-29c/index_sweep.json

skillbase's own ``VectorIndex`` (embedded chroma) over a temporary home gets 170 records, then one writer
writes small batches (1-16 records) every 20 ms through ``begin_write`` / ``upsert`` / ``end_write``, as the
index follower does, while three threads query the collection. The vectors lie in tight clusters (a
spread of 0.05 around one of four centres, as ``chroma_unreached.py --spread 0.05``: lessons that differ
in a few words), where chroma's HNSW graph loses records most. Each configuration runs on a home of its
own with the same seed: the sweep as shipped (writes look again for 32 older records at most once a
second), and the sweep off. At the end every record is looked for by its own vector, in
chroma (its four nearest) and through the index's query (which adds the records kept as unreached);
then a full check (``check_page`` over the collection) looks for all of them once, and the index's
query is asked again.

Reported per configuration: batches, records, the records chroma's search does not reach at the end,
how many of those the index's query still returns (before and after the full check), and the time a
write spent in its sweep (mean, p95) against the whole write.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from json_report import write_report  # this folder is the script's first path entry


def run(seconds: float, spread: float, seed: int, sweep: bool) -> dict:
    import numpy as np

    from chroma_unreached import query_beside  # this folder is the script's first path entry

    from skillbase.config import Settings
    from skillbase.memory import vectors
    from skillbase.memory.documents import IndexDoc

    if not sweep:
        vectors.SWEEP_BATCH = 0
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4, 384)).astype(np.float32)

    def batch(n: int) -> tuple[list[IndexDoc], np.ndarray]:
        v = centres[rng.integers(0, 4, n)] + spread * rng.standard_normal((n, 384)).astype(np.float32)
        docs = [IndexDoc(collection="experiences", id=f"exp_{time.time_ns():016x}_{uuid.uuid4().hex[:8]}",
                         text="a lesson", metadata={"task": "bench"}, max_tokens=256) for _ in range(n)]
        return docs, v / np.linalg.norm(v, axis=1, keepdims=True)

    home = Path(tempfile.mkdtemp(prefix="index-sweep-"))
    index = vectors.VectorIndex(Settings.from_env(env={}, home=home), store_id="sweep-bench", model="bench")
    timed: list[float] = []
    real_sweep = index.sweep

    def timed_sweep(*args, **kw):
        start = time.perf_counter()
        try:
            return real_sweep(*args, **kw)
        finally:
            timed.append(time.perf_counter() - start)

    index.sweep = timed_sweep
    seq, writes, vecs_of = 0, [], {}

    def write(n: int) -> None:
        nonlocal seq
        docs, vecs = batch(n)
        start = time.perf_counter()
        with index.session() as state:
            index.ready()
            seq = max(seq, state["seq"]) + 1
            index.begin_write()
            index.upsert(docs, vecs)
            index.end_write(seq)
        writes.append(time.perf_counter() - start)
        vecs_of.update(zip((d.id for d in docs), vecs))

    write(170)
    col = index._cols["experiences"]
    stop = time.time() + seconds
    readers = query_beside(col, stop)
    batches = 0
    while time.time() < stop:
        write(int(rng.integers(1, 17)))
        batches += 1
        time.sleep(0.02)
    for t in readers:
        t.join()

    def lost_in_chroma() -> list[str]:
        ids = list(vecs_of)
        near = col.query(query_embeddings=np.stack([vecs_of[i] for i in ids]), n_results=4, include=["distances"])
        return [i for i, got, dist in zip(ids, near["ids"], near["distances"])
                if i not in got and dist[-1] > vectors.SAME_VECTOR]

    def answered(ids: list[str]) -> int:
        with index.session():
            index.ready()
            return sum(i in {h.id for h in index.query("experiences", vecs_of[i], 4, None, documents=False)}
                       for i in ids)

    lost = lost_in_chroma()
    before = answered(lost)
    kept_by_writes = index.unreached_counts().get("experiences", 0)
    start = time.perf_counter()
    checked, after = [0, 0], ""
    while after is not None:  # a page at a time, as ``skillbase memory check`` does
        with index.session():
            after, n, m = index.check_page("experiences", after, index.ready()["seq"])
        checked = [checked[0] + n, checked[1] + m]
    check_s = time.perf_counter() - start
    after = answered(lost)
    index.close()
    sweeps = timed[1:]  # the first write's (170 records into an empty collection) apart
    return {
        "sweep": sweep, "seconds": seconds, "spread": spread, "seed": seed, "batches": batches,
        "records": len(vecs_of),
        "at_the_end": {"not_reached_by_chroma": len(lost), "of_those_answered_by_the_index": before,
                       "kept_as_unreached_by_the_writes": kept_by_writes},
        "full_check": {"looked_for": checked[0], "newly_kept": checked[1], "seconds": round(check_s, 3),
                       "of_the_lost_answered_after_it": after},
        "write_ms": {"mean": round(statistics.fmean(writes[1:]) * 1e3, 3),
                     "p95": round(statistics.quantiles(writes[1:], n=20)[-1] * 1e3, 3)},
        "sweeps": len(sweeps),
        "sweep_ms": {"mean": round(statistics.fmean(sweeps) * 1e3, 3) if sweeps else 0.0,
                     "p95": round(statistics.quantiles(sweeps, n=20)[-1] * 1e3, 3) if len(sweeps) > 1 else 0.0},
        "sweep_share_of_write_time": round(sum(sweeps) / sum(writes[1:]), 4),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=40.0, help="how long each configuration writes")
    ap.add_argument("--spread", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=["sweep", "off"], help="one configuration (each runs in a process of its own)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    import chromadb

    if args.only:
        runs = [run(args.seconds, args.spread, args.seed, args.only == "sweep")]
    else:  # the module's constants are changed for "off": each configuration in a process of its own
        import subprocess
        import sys

        runs = []
        for only in ("sweep", "off"):
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                subprocess.run([sys.executable, __file__, "--seconds", str(args.seconds), "--spread", str(args.spread),
                                "--seed", str(args.seed), "--only", only, "--out", f.name], check=True,
                               stdout=subprocess.DEVNULL)
                runs += json.loads(Path(f.name).read_text())["runs"]
    for r in runs:
        e, c = r["at_the_end"], r["full_check"]
        print(f"sweep {'on ' if r['sweep'] else 'off'}: {r['batches']} batches, {r['records']} records; at the end "
              f"{e['not_reached_by_chroma']} not reached by chroma's search, {e['of_those_answered_by_the_index']} of "
              f"them answered by the index ({e['kept_as_unreached_by_the_writes']} kept by the writes); a full check "
              f"of {c['looked_for']} records in {c['seconds']:.2f} s kept {c['newly_kept']} more, then "
              f"{c['of_the_lost_answered_after_it']} answered; a write {r['write_ms']['mean']:.2f} ms mean "
              f"(p95 {r['write_ms']['p95']:.2f}); {r['sweeps']} sweeps of {r['sweep_ms']['mean']:.2f} ms mean (p95 "
              f"{r['sweep_ms']['p95']:.2f}), {100 * r['sweep_share_of_write_time']:.1f} % of the writes' time")
    report = {"chromadb": chromadb.__version__, "python": platform.python_version(), "runs": runs}
    write_report(args.out, report, say=not args.only)
    return report


if __name__ == "__main__":
    main()
