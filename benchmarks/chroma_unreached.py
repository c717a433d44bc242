"""Chroma alone: records its nearest-neighbour search does not reach, even by their own vectors.

    python benchmarks/chroma_unreached.py --seconds 40 --out benchmarks/results/cpu-2026-11-29b/chroma_unreached.json

An embedded chroma collection (cosine space, as skillbase's index) gets 170 records, then one writer
writes small batches (1-16 vectors) every 20 ms while three threads query it, as a server's index
follower and its searches do. After each batch the writer asks for each new record's four nearest by
its own vector; a record not among them is checked again against every record (``n_results`` = the
collection's size), deleted and added again and checked once more, and at the end after the client is
reopened on the same directory. At the end every record is looked for again by its own vector: one
found when written may have lost its way in since.

``--spread``: how far the vectors lie from one of four centres (0: random unit vectors; 0.05: tight
clusters, like lessons that differ in a few words, cosine distance ~0.002 within a cluster);
``--hnsw-m`` and ``--construction-ef``: the collection's graph parameters. Reported:
batches, records, and each record left out with what the later checks found. No skillbase code runs.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import threading
import time
import uuid
from pathlib import Path

from json_report import write_report  # this folder is the script's first path entry


def query_beside(col, stop: float, threads: int = 3) -> list[threading.Thread]:
    """Started threads that query ``col`` with random unit vectors (30 nearest) until time ``stop``, as a
    server's searches do beside its index writes (also used by index_sweep.py)."""
    import numpy as np

    def reader() -> None:
        r = np.random.default_rng()
        while time.time() < stop:
            v = r.standard_normal((1, 384)).astype(np.float32)
            col.query(query_embeddings=v / np.linalg.norm(v), n_results=30, include=["distances"])

    readers = [threading.Thread(target=reader) for _ in range(threads)]
    for t in readers:
        t.start()
    return readers


def run(seconds: float, spread: float, seed: int, hnsw: dict | None = None) -> dict:
    import chromadb
    import numpy as np
    from chromadb.config import Settings

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4, 384)).astype(np.float32)

    def vectors(n: int) -> np.ndarray:
        v = (centres[rng.integers(0, 4, n)] + spread * rng.standard_normal((n, 384)).astype(np.float32) if spread
             else rng.standard_normal((n, 384)).astype(np.float32))
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    path = tempfile.mkdtemp(prefix="chroma-unreached-")
    settings = Settings(anonymized_telemetry=False)
    client = chromadb.PersistentClient(path=path, settings=settings)
    col = client.get_or_create_collection("unreached", metadata={"hnsw:space": "cosine", **(hnsw or {})},
                                          embedding_function=None)
    first = vectors(170)
    col.upsert(ids=[f"first{i}" for i in range(170)], embeddings=first)
    stop = time.time() + seconds
    readers = query_beside(col, stop)
    batches, left_out, vecs_of = 0, [], {}
    while time.time() < stop:
        n = int(rng.integers(1, 17))
        vecs, ids = vectors(n), [uuid.uuid4().hex for _ in range(n)]
        col.upsert(ids=ids, embeddings=vecs)
        batches += 1
        near = col.query(query_embeddings=vecs, n_results=4, include=[])["ids"]
        for i, v, got in zip(ids, vecs, near):
            if i in got:
                continue
            everything = col.query(query_embeddings=[v], n_results=col.count(), include=[])["ids"][0]
            col.delete(ids=[i])
            col.add(ids=[i], embeddings=[v])
            again = col.query(query_embeddings=[v], n_results=4, include=[])["ids"][0]
            left_out.append({"batch": batches, "records": col.count(), "in_a_search_of_every_record": i in everything,
                             "returned_by_id": bool(col.get(ids=[i])["ids"]), "found_after_writing_again": i in again,
                             "id": i})
            vecs_of[i] = v
        time.sleep(0.02)
    for t in readers:
        t.join()
    records = col.count()
    # Every record again by its own vector, at the end: one reached when written may have lost its way in
    # since (later inserts rewrite the graph's links).
    everything = col.get(include=["embeddings"])
    flagged = {row["id"] for row in left_out}
    later = []
    for lo in range(0, len(everything["ids"]), 500):
        ids, vecs = everything["ids"][lo:lo + 500], np.asarray(everything["embeddings"][lo:lo + 500], dtype=np.float32)
        near = col.query(query_embeddings=vecs, n_results=4, include=["distances"])
        later += [(i, v) for i, v, got, dist in zip(ids, vecs, near["ids"], near["distances"])
                  if i not in got and i not in flagged and dist[-1] > 1e-5]
    later_in_30 = sum(i in col.query(query_embeddings=[v], n_results=30, include=[])["ids"][0] for i, v in later)
    later_in_all = sum(i in col.query(query_embeddings=[v], n_results=records, include=[])["ids"][0] for i, v in later)
    del col, client
    if vecs_of:
        reopened = chromadb.PersistentClient(path=path, settings=settings).get_collection("unreached")
        near = reopened.query(query_embeddings=list(vecs_of.values()), n_results=4, include=[])["ids"]
        for row, got in zip(left_out, near):
            row["found_after_reopening"] = row["id"] in got
    return {"seconds": seconds, "spread": spread, "seed": seed, "hnsw": hnsw or {}, "batches": batches, "records": records,
            "left_out": left_out,
            "at_the_end": {"not_among_its_4_nearest": [i for i, _ in later], "of_those_among_its_30_nearest": later_in_30,
                           "of_those_in_a_search_of_every_record": later_in_all}}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=40.0, help="how long each configuration writes")
    ap.add_argument("--spread", type=float, action="append", help="0 (random) and 0.05 (clusters) by default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hnsw-m", type=int, help="the graph's links per record (chroma's hnsw:M; its default 16)")
    ap.add_argument("--construction-ef", type=int, help="chroma's hnsw:construction_ef (its default 100)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    import chromadb

    hnsw = {k: v for k, v in (("hnsw:M", args.hnsw_m), ("hnsw:construction_ef", args.construction_ef)) if v}
    runs = [run(args.seconds, s, args.seed, hnsw) for s in (args.spread or [0.0, 0.05])]
    for r in runs:
        lost = r["left_out"]
        print(f"spread {r['spread']} {r['hnsw'] or ''}: {r['batches']} batches, {r['records']} records, {len(lost)} left out of the "
              f"search by their own vectors; in a search of every record: {sum(x['in_a_search_of_every_record'] for x in lost)}"
              f"; found after writing again: {sum(x['found_after_writing_again'] for x in lost)}; after reopening: "
              f"{sum(x.get('found_after_reopening', False) for x in lost)}; found when written, at the end not among "
              f"its 4 nearest: {len(r['at_the_end']['not_among_its_4_nearest'])} (among its 30 nearest: "
              f"{r['at_the_end']['of_those_among_its_30_nearest']}; in a search of every record: "
              f"{r['at_the_end']['of_those_in_a_search_of_every_record']})")
    report = {"chromadb": chromadb.__version__, "python": platform.python_version(), "runs": runs}
    write_report(args.out, report)
    return report


if __name__ == "__main__":
    main()
