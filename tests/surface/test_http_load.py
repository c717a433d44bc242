"""Many MCP clients on one HTTP server at once: every call answered, every lesson stored
once, and a lesson recorded by one client is recalled by every client at once, none of them waiting
for the index. Real SDK clients over a real uvicorn server."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid

import anyio
import pytest
from filelock import FileLock
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from skillbase.config import Settings
from skillbase.mcp_server.http import http_app
from skillbase.mcp_server.server import build_server

from .servers import free_port, running

TOKEN = "load-token-0123456789abcdef"


@pytest.fixture
def served(fresh_home):
    """(url, home, sb) of a server over a private copy of the seeded store."""
    from skillbase.api import SkillBase

    sb = SkillBase(Settings.from_env(env={}, home=fresh_home))
    sb.warm_up()
    port = free_port()
    with running(http_app(build_server(sb, warm=False), host="127.0.0.1", port=port, token=TOKEN), port):
        yield f"http://127.0.0.1:{port}/mcp", fresh_home, sb
    sb.close()


def _client(url: str):
    http = create_mcp_http_client(headers={"authorization": f"Bearer {TOKEN}"})
    return http, Client(streamable_http_client(url, http_client=http))


def _index_lag(sb) -> int:
    """Ledger changes the server's vector index does not hold yet (read without the index lock)."""
    store = sb.memory
    return store.ledger.committed_seq() - (store.vectors.peek_seq() or 0)


def _ids(result) -> set[str]:
    return {i.get("id") for i in (result.structured_content or {}).get("items", [])}


def test_sixteen_clients_at_once_are_all_answered_and_lose_nothing(served):
    url, home, _ = served
    session = f"load-{uuid.uuid4().hex[:8]}"
    mix = ("recall", "record_lesson", "attempt_history")
    results: list[tuple[str, object]] = []

    async def one(c: int):
        http, client = _client(url)
        async with http, client as mcp:
            for n in range(6):
                tool = mix[(c + n) % 3]
                args = {"recall": {"query": "rows too wide for registers", "k": 5},
                        "record_lesson": {"lesson": f"Lesson {n} of client {c}: split the row ({session})",
                                          "task": "row_softmax", "session": session},
                        "attempt_history": {"task": "row_softmax", "limit": 20}}[tool]
                results.append((tool, await mcp.call_tool(tool, args)))

    async def main():
        async with anyio.create_task_group() as tg:
            for c in range(16):
                tg.start_soon(one, c)

    anyio.run(main)
    assert len(results) == 96
    errors = [(tool, r.content[0].text) for tool, r in results if r.is_error]
    assert not errors, errors[:3]
    written = {r.structured_content["id"] for tool, r in results if tool == "record_lesson"}
    assert len(written) == 32
    conn = sqlite3.connect(f"file:{home / 'ledger.sqlite3'}?mode=ro", uri=True)
    try:
        stored = conn.execute("SELECT id, json_extract(record, '$.lesson') FROM experiences WHERE session=?",
                              (session,)).fetchall()
    finally:
        conn.close()
    assert {i for i, _ in stored} == written
    assert len({t for _, t in stored}) == len(stored) == 32, "a lesson was stored twice"


def test_a_lesson_is_recalled_by_every_client_at_once_while_indexing_is_stuck(served):
    url, home, sb = served
    text = f"Tiling the {uuid.uuid4().hex[:8]} reduction over two warps removed the shared-memory round trip"
    timings: dict[str, float] = {}

    async def main():
        ha, writer = _client(url)
        hb, other = _client(url)
        async with ha, writer as a, hb, other as b:
            await b.call_tool("recall", {"query": "warm the second client", "k": 1})
            # Indexing is stuck, as behind another process, until the lock is released.
            lock = FileLock(str(home / "index.lock"), thread_local=False)
            lock.acquire()
            try:
                written = await a.call_tool("record_lesson", {"lesson": text, "task": "row_softmax"})
                assert not written.is_error, written.content[0].text
                exp_id = written.structured_content["id"]
                for name, client in (("other", b), ("own", a)):
                    # Both find it in the server's fresh tail, without waiting for the index.
                    t0 = time.perf_counter()
                    seen = await client.call_tool("recall", {"query": text, "k": 5})
                    timings[name] = time.perf_counter() - t0
                    assert exp_id in _ids(seen), f"the {name} client's recall missed the lesson"
                assert _index_lag(sb) > 0, "the lesson was indexed despite the lock"
            finally:
                lock.release()
            deadline = time.perf_counter() + 2.0
            while _index_lag(sb):
                assert time.perf_counter() < deadline, "the lesson was never indexed after the lock was freed"
                await anyio.sleep(0.05)
            assert exp_id in _ids(await b.call_tool("recall", {"query": text, "k": 5}))

    anyio.run(main)
    assert timings["other"] < 0.5 and timings["own"] < 0.5, f"a recall waited for the index: {timings}"


def test_two_servers_of_one_store_recall_each_others_lessons_while_indexing_is_stuck(served):
    # Two server processes over one store (here two servers in this process, each with its own
    # SkillBase, as two `skillbase serve` would hold it): a lesson recorded on one is recalled on the
    # other once its writer has embedded it, from the shared cache file, not from the index; and a
    # client that writes on one server and then recalls there is not held up by the other's writes.
    from skillbase.api import SkillBase

    url, home, sb = served
    other_sb = SkillBase(Settings.from_env(env={}, home=home))
    other_sb.warm_up()
    port = free_port()
    text = f"Splitting the {uuid.uuid4().hex[:8]} row over two programs kept it in registers"
    found: dict[str, float] = {}
    try:
        with running(http_app(build_server(other_sb, warm=False), host="127.0.0.1", port=port, token=TOKEN), port):
            async def main():
                ha, writer = _client(url)
                hb, reader = _client(f"http://127.0.0.1:{port}/mcp")
                async with ha, writer as a, hb, reader as b:
                    await b.call_tool("recall", {"query": "warm the second server", "k": 1})
                    lock = FileLock(str(home / "index.lock"), thread_local=False)
                    lock.acquire()  # indexing is stuck: only the cache file can carry the lesson across
                    try:
                        own = await b.call_tool("record_lesson", {"lesson": f"{text} (the other server's own)",
                                                                  "task": "row_softmax"})
                        written = await a.call_tool("record_lesson", {"lesson": text, "task": "row_softmax"})
                        assert not written.is_error and not own.is_error
                        exp_id, own_id = written.structured_content["id"], own.structured_content["id"]
                        t0 = time.perf_counter()
                        with anyio.fail_after(10):  # the code before waited here for the index lock
                            while True:
                                seen = _ids(await b.call_tool("recall", {"query": text, "k": 5}))
                                assert own_id in seen, "the second server's client missed its own lesson"
                                if exp_id in seen:
                                    found["after_s"] = time.perf_counter() - t0
                                    break
                                assert time.perf_counter() - t0 < 1.0, "the lesson never reached the other server"
                                await anyio.sleep(0.02)
                        assert _index_lag(sb) > 0 and _index_lag(other_sb) > 0, "indexed despite the lock"
                    finally:
                        lock.release()

            anyio.run(main)
    finally:
        other_sb.close()
    assert found["after_s"] < 1.0


def test_a_lesson_is_stored_while_every_search_thread_is_busy(fresh_home, monkeypatch):
    """Writes, key lookups and the other tools have threads of their own: with every search thread
    held by a slow recall, record_lesson, attempt_history and compile_kernel still answer at once
    (before, a write and a compile waited for a free search thread)."""
    from skillbase.api import SkillBase

    monkeypatch.setenv("SKILLBASE_TOOL_THREADS", "2")
    sb = SkillBase(Settings.from_env(env={}, home=fresh_home))
    sb.warm_up()
    release, started = threading.Event(), threading.Semaphore(0)
    real_recall = sb.recall

    def slow_recall(*args, **kwargs):
        started.release()
        release.wait(60)
        return real_recall(*args, **kwargs)

    sb.recall = slow_recall
    port = free_port()
    took: dict[str, float] = {}

    async def main(url):
        clients = [_client(url) for _ in range(3)]
        async with clients[0][0], clients[0][1] as a, clients[1][0], clients[1][1] as b, \
                clients[2][0], clients[2][1] as w:
            async with anyio.create_task_group() as tg:
                for c in (a, b):
                    tg.start_soon(c.call_tool, "recall", {"query": "rows too wide for registers", "k": 1})
                for _ in range(2):  # both search threads are now held
                    await anyio.to_thread.run_sync(started.acquire, True, 10)
                t0 = time.perf_counter()
                written = await w.call_tool("record_lesson", {"lesson": "Split rows over two programs once "
                                                              "they outgrow the registers", "task": "row_softmax"})
                took["write"] = time.perf_counter() - t0
                assert not written.is_error, written.content[0].text
                t0 = time.perf_counter()
                history = await w.call_tool("attempt_history", {"task": "row_softmax"})
                took["lookup"] = time.perf_counter() - t0
                assert not history.is_error, history.content[0].text
                t0 = time.perf_counter()
                await w.call_tool("compile_kernel", {"task": "relu", "source": "def not_a_kernel(:\n"})
                took["compile"] = time.perf_counter() - t0  # a refusal or a report: either way, answered
                release.set()

    try:
        with running(http_app(build_server(sb, warm=False), host="127.0.0.1", port=port, token=TOKEN), port):
            anyio.run(main, f"http://127.0.0.1:{port}/mcp")
    finally:
        release.set()
        sb.close()
    assert took["write"] < 2.0 and took["lookup"] < 2.0, f"a call waited behind the searches: {took}"
    # A compile starts its worker process (seconds); behind the searches it would wait for the release.
    assert took["compile"] < 30.0, f"compile_kernel waited behind the searches: {took}"


def test_searches_get_as_many_threads_as_cores_two_to_four(monkeypatch):
    from skillbase.mcp_server import server

    monkeypatch.delenv("SKILLBASE_TOOL_THREADS", raising=False)
    for cores, threads in ((1, 2), (2, 2), (3, 3), (16, 4)):
        monkeypatch.setattr(server, "usable_cores", lambda c=cores: c)
        assert server.tool_threads() == threads
    monkeypatch.setenv("SKILLBASE_TOOL_THREADS", "7")
    assert server.tool_threads() == 7


def test_a_server_process_freezes_its_warm_heap(fresh_home):
    """`skillbase serve` warms up (store, model, graph, the built-in tasks and torch with them) and
    then freezes what it holds, so a full collection no longer walks ~400,000 long-lived objects
    with every thread stopped. A library user's build_server leaves the heap alone."""
    import subprocess
    import sys

    code = (
        "import gc, sys\n"
        "from skillbase.api import SkillBase\n"
        "from skillbase.config import Settings\n"
        "from skillbase.mcp_server import server\n"
        f"sb = SkillBase(Settings.from_env(env={{}}, home={str(fresh_home)!r}))\n"
        "server._warm(sb, settle_heap=False)\n"
        "print('plain', gc.get_freeze_count())\n"
        "server._warm(sb, settle_heap=True)\n"
        "print('settled', gc.get_freeze_count(), 'torch' in sys.modules)\n"
        "t = __import__('time').perf_counter(); gc.collect(); print('collect_ms', (__import__('time').perf_counter() - t) * 1e3)\n"
        "sb.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines["plain"] == "0"
    frozen, torch_loaded = lines["settled"].split()
    assert int(frozen) > 100_000 and torch_loaded == "True"
    assert float(lines["collect_ms"]) < 50  # a full collection after the freeze (about 200 ms before it)
    # and the process entry point asks for it
    import inspect

    from skillbase import mcp_server

    assert "settle_heap=True" in inspect.getsource(mcp_server.serve)
