"""`skillbase serve --transport http --workers N`: several server processes on one port over one store
A real `skillbase serve` subprocess, a real chroma server, real SDK clients."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from .conftest import server_env
from .servers import free_port

TOKEN = "workers-token-0123456789abcdef"


def _client(url: str):
    http = create_mcp_http_client(headers={"authorization": f"Bearer {TOKEN}"})
    return http, Client(streamable_http_client(url, http_client=http))


def _worker_pids(pid: int) -> list[int]:
    """uvicorn's worker processes: the server's children running the multiprocessing spawn entry."""
    out = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        if "spawn_main" in cmd:
            out.append(int(child))
    return out


def _connections(pids: list[int], port: int) -> dict[int, int]:
    """Established TCP connections to ``port`` held by each process (Linux /proc)."""
    inodes = {}
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = fd.readlink().name
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes[target[8:-1]] = pid
    held = dict.fromkeys(pids, 0)
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port and f[3] == "01" and f[9] in inodes:  # 01: ESTABLISHED
                held[inodes[f[9]]] += 1
    return held


def _lost_by_chroma(home: Path, chroma_url: str, item_id: str, text: str) -> str | None:
    """Why a lesson is missing from recall when the chroma server's nearest-neighbour search lost it: the
    store indexed it (the index's bookkeeping holds it and is past its change), chroma returns it by id
    with the right vector, yet a search for that very vector over the whole collection leaves it out. Seen
    in about one run in five of the test below on a 2-core machine until each write checked for it and wrote
    such records again (``VectorIndex._unreached_of``; what stays out is answered from the index's mirror;
    benchmarks/chroma_unreached.py reproduces the loss with chroma alone). A record can also lose its way
    in after its write, which that check does not see (later writes' sweeps and ``skillbase memory check``
    do, in time): this names it. Not a fault of the store's visibility, which the test checks. None when it
    is anything else."""
    import numpy as np

    from skillbase.config import Settings
    from skillbase.memory.store import Store

    store = Store.open(Settings.from_env(env={"SKILLBASE_HOME": str(home), "SKILLBASE_CHROMA_URL": chroma_url}))
    try:
        if store.vectors.peek_seq() != store.ledger.max_seq():
            return None
        query = store.embedder.embed([text])[0]
        with store.vectors.session():
            store.vectors.ready()
            col = store.vectors._cols["experiences"]
            got = col.get(ids=[item_id], include=["embeddings"])
            if list(got["ids"]) != [item_id] or float(np.dot(np.asarray(got["embeddings"][0]), query)) < 0.999:
                return None
            total = col.count()
            near = col.query(query_embeddings=[query], n_results=total, include=["distances"])["ids"][0]
    finally:
        store.close()
    if item_id in near:
        return None
    return (f"chroma server: {item_id} stored with its vector, but its nearest-neighbour search returns "
            f"{len(near)} of {total} records without it")


@pytest.fixture
def workers_server(fresh_home, chroma_server):
    """(url, home, process) of `skillbase serve --transport http --workers 2` over a copy of the seeded store."""
    port = free_port()
    env = server_env(fresh_home, SKILLBASE_CHROMA_URL=chroma_server, SKILLBASE_TOKEN=TOKEN, SKILLBASE_DEVICE="cpu")
    log = fresh_home.parent / "serve.log"
    proc = subprocess.Popen([sys.executable, "-m", "skillbase", "serve", "--transport", "http", "--port", str(port),
                             "--workers", "2"], env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)  # its own process group, as in a terminal
    deadline = time.monotonic() + 120
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
    try:
        yield f"http://127.0.0.1:{port}/mcp", fresh_home, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_two_worker_processes_serve_one_store_on_one_port(workers_server, chroma_server):
    url, home, proc = workers_server
    deadline = time.monotonic() + 30
    while len(_worker_pids(proc.pid)) < 2:
        assert time.monotonic() < deadline, "two worker processes never started"
        time.sleep(0.1)
    workers = _worker_pids(proc.pid)
    session = f"workers-{uuid.uuid4().hex[:8]}"
    # Each lesson its own topic and a word of its own: recall ranks it first for its own text (eight lessons
    # alike in form, "Lesson i (hex): ...", let others of the same session outrank it now and then).
    texts = [f"{topic}, measured as qz{uuid.uuid4().hex[:8]}" for topic in (
        "stage the bias in shared memory", "unroll the K loop twice", "split wide rows over two programs",
         "vectorize the loads four floats at a time", "fuse the scale into the epilogue",
         "swizzle the program ids for L2 reuse", "keep the accumulator in fp32", "pad rows to a multiple of 16")]
    ids: dict[int, str] = {}
    written_at: dict[int, float] = {}
    own_at_once: list[bool] = []
    found_after: list[float] = []
    lost_by_chroma: list[str] = []

    warmed, hold = [], anyio.Event()

    async def warm(c: int):
        http, client = _client(url)
        async with http, client as mcp:
            for _ in range(3):
                assert not (await mcp.call_tool("recall", {"query": "warm up", "k": 1})).is_error
            warmed.append(c)
            await hold.wait()  # keeps its connection open while they are counted

    async def write_then_read(c: int, written: anyio.Event, all_written):
        http, client = _client(url)
        async with http, client as mcp:
            res = await mcp.call_tool("record_lesson", {"lesson": texts[c], "task": "row_softmax", "session": session})
            assert not res.is_error, res.content[0].text
            ids[c], written_at[c] = res.structured_content["id"], time.perf_counter()
            seen = await mcp.call_tool("recall", {"query": texts[c], "k": 8})  # its own, on its connection
            own_at_once.append(ids[c] in {i.get("id") for i in seen.structured_content["items"]})
            all_written(c)
            await written.wait()
            other = (c + 1) % len(texts)  # another client's lesson, maybe written on the other worker
            while True:
                started = time.perf_counter()
                seen = await mcp.call_tool("recall", {"query": texts[other], "k": 8})
                if ids[other] in {i.get("id") for i in seen.structured_content["items"]}:
                    found_after.append(time.perf_counter() - written_at[other])
                    return
                # The store's bound: a search begun once a change is 1 s old finds it (younger ones may wait
                # for the writer's embedding or the index).
                if started - written_at[other] >= 1.0:
                    lost = _lost_by_chroma(home, chroma_server, ids[other], texts[other])
                    if lost:
                        lost_by_chroma.append(lost)
                        return
                assert started - written_at[other] < 1.0, "a search begun 1 s after another client's write missed it"
                await anyio.sleep(0.02)

    async def main():
        async with anyio.create_task_group() as tg:
            for c in range(16):
                tg.start_soon(warm, c)
            with anyio.fail_after(60):
                while len(warmed) < 16:
                    await anyio.sleep(0.05)
            held = _connections(workers, int(url.rsplit(":", 1)[1].split("/")[0]))
            hold.set()
        written, done = anyio.Event(), set()

        def all_written(c: int):
            done.add(c)
            if len(done) == len(texts):
                written.set()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for c in range(len(texts)):
                    tg.start_soon(write_then_read, c, written, all_written)
        return held

    held = anyio.run(main)
    # Spread evenly: a worker takes a connection only while no live worker holds fewer.
    assert sum(held.values()) >= 16 and max(held.values()) - min(held.values()) <= 2, f"connections by worker: {held}"
    assert all(own_at_once), "a client's own lesson was missing from its next recall"
    assert len(found_after) + len(lost_by_chroma) == len(texts)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in its terminal: the parent stops each worker once
    assert proc.wait(60) == 0
    for w in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(w, 0)
    with sqlite3.connect(home / "ledger.sqlite3") as db:
        stored = {r[0] for r in db.execute("SELECT id FROM experiences")}
    assert set(ids.values()) <= stored and len(ids) == len(texts)
    if lost_by_chroma:  # everything else held; only the chroma server's search lost a lesson
        pytest.xfail(lost_by_chroma[0])


def test_workers_refuse_a_port_another_server_listens_on(tmp_path, monkeypatch):
    # A port something already listens on is refused before any worker starts, with a clear error.
    from typer.testing import CliRunner

    from skillbase.cli import app

    monkeypatch.delenv("SKILLBASE_TOKEN", raising=False)
    monkeypatch.setenv("SKILLBASE_CHROMA_URL", "http://127.0.0.1:9")  # never reached: refused before
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "serve", "--transport", "http",
                                          "--port", str(port), "--workers", "2"], catch_exceptions=False)
    assert result.exit_code == 7 and "already listens" in result.stderr, result.stderr


def test_a_worker_takes_a_connection_only_while_no_live_worker_holds_fewer():
    import time

    import uvicorn

    from skillbase.mcp_server.workers import ALIVE_S, BalancedServer

    now = time.monotonic()
    held, beats = [3, 2, 5], [now, now, now]
    server = BalancedServer(uvicorn.Config(app=None), listener=None, index=0, held=held, beats=beats)
    assert server.ahead()  # worker 1 holds fewer
    held[1] = 3
    assert not server.ahead()  # a tie: either may take it
    held[1], beats[1] = 0, now - 2 * ALIVE_S
    assert not server.ahead()  # worker 1 has not said anything for a while: dead or starting again
    beats[1] = 0.0  # not up yet: counts as holding none while the first start lasts
    server.boot_until = now + 30
    assert server.ahead()
    held[0] = 0
    assert not server.ahead()  # one connection each before the others are up
    held[0], server.boot_until = 3, now - 1
    assert not server.ahead()  # past the first start a worker not up is left out


def test_workers_share_one_process_s_embedding_threads(monkeypatch):
    from skillbase import config
    from skillbase.mcp_server import workers

    monkeypatch.setattr(config, "usable_cores", lambda: 16)
    assert [workers.worker_threads(n) for n in (1, 2, 4, 8, 16)] == [4, 4, 2, 1, 1]
    monkeypatch.setattr(config, "usable_cores", lambda: 2)
    assert workers.worker_threads(2) == 1
