"""Many writer processes on one store, and a writer killed mid-batch: nothing
lost, nothing half-written, every process sees everything."""

import json
import multiprocessing
import os
import random
import time
from pathlib import Path

import pytest

import writer_proc
from skillbase.memory.store import Store
from skillbase.config import Settings

WRITERS, PER_WRITER, CHAIN = 4, 20, 5


@pytest.fixture(scope="module")
def procs():
    """A multiprocessing context whose forkserver has imported the writer
    module (torch, sentence-transformers, chromadb) once for every writer."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["writer_proc"])
    return ctx


def start(ctx, tmp_path: Path, name: str, *args: str):
    err = tmp_path / f"{name}.err"
    p = ctx.Process(target=writer_proc.run, args=args, kwargs={"error_file": str(err)}, name=name)
    p.start()
    return p, err


def test_concurrent_writers_lose_nothing(tmp_path, backend, procs):
    home, out = tmp_path / "home", tmp_path / "out"
    out.mkdir()
    started = [
        start(procs, tmp_path, f"writer-{w}", "concurrent", str(home), backend or "-", str(w), str(PER_WRITER),
              str(WRITERS), str(out))
        for w in range(WRITERS)
    ]
    for p, err in started:
        p.join(300)
        assert p.exitcode == 0, err.read_text()[-3000:] if err.exists() else f"exit code {p.exitcode}"
    total = WRITERS * PER_WRITER
    for w in range(WRITERS):
        r = json.loads((out / f"{w}.json").read_text())
        assert r["mine"] == PER_WRITER
        assert r["counts"]["attempts"] == total and r["counts"]["experiences"] == total
        assert r["index_lag"] == 0 and r["index_counts"] == {"experiences": total, "skills": 0, "attempts": total}
        assert r["graph"]["attempt"] == total and r["graph"]["experience"] == total
        assert r["graph"]["edge:derived-from"] == total - total // CHAIN
        assert r["found"] == r["sample"], f"writer {w} found {r['found']} of {r['sample']} lessons by meaning"


@pytest.mark.slow
def test_writer_killed_mid_batch(tmp_path, embedder, procs):
    # Embedded only: a killed client can leave a chroma directory half
    # written; a server cannot be damaged by its client dying.
    home, batch, log = tmp_path / "home", 20, tmp_path / "committed.log"
    proc, err = start(procs, tmp_path, "crasher", "crash", str(home), "-", str(batch), str(log))
    deadline = time.monotonic() + 240
    while _lines(log) < 10:  # five batches of attempts and of lessons
        assert proc.is_alive(), err.read_text()[-3000:] if err.exists() else f"exit code {proc.exitcode}"
        assert time.monotonic() < deadline, "the writer committed too little in 240 s"
        time.sleep(0.05)
    time.sleep(random.Random(os.getpid()).uniform(0.05, 0.6))  # land somewhere inside the next batch
    proc.kill()
    proc.join(30)
    assert proc.exitcode == -9
    committed: dict[str, list[str]] = {"attempt": [], "experience": []}
    for line in log.read_text().splitlines():  # every commit reported before the kill landed
        _, kind, *ids = line.split()
        committed[kind] += ids

    store = Store.open(Settings.from_env(env={}, home=home), embedder=embedder)
    try:
        counts = store.stats().counts
        assert counts["attempts"] % batch == 0 and counts["experiences"] % batch == 0, "half a batch is visible"
        assert counts["attempts"] >= len(committed["attempt"]) and counts["experiences"] >= len(committed["experience"])
        assert len(store.ledger.get_attempts(committed["attempt"])) == len(committed["attempt"])
        assert len(store.ledger.get_experiences(committed["experience"])) == len(committed["experience"])
        stats = store.stats()
        assert stats.index_lag == 0, "the index catches up by itself on open"
        assert stats.index_counts["attempts"] == counts["attempts"]
        assert stats.index_counts["experiences"] == counts["experiences"]
        assert store.graph.counts()["attempt"] == counts["attempts"]
        last = store.ledger.get_experiences(committed["experience"][-1:])[0]
        hits = store.search("experiences", last.lesson, k=3)
        # Seen once missing (2026-11-29), before the collections' denser graph: say enough to tell a lost
        # record from a ranking if it happens again.
        assert any(h.id == last.id for h in hits), (
            f"{last.id} not among {[(h.id, round(h.score, 4)) for h in hits]}; kept as unreached: "
            f"{store.stats().index_unreached}; a full check now: {store.check_index().newly_unreached}")
    finally:
        store.close()


def _lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0
