"""Streamable HTTP: the bearer token, the Host / Origin protection, and the refusal to serve a
non-loopback address without a token. The server runs under uvicorn on a loopback port."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared._httpx_utils import create_mcp_http_client

from skillbase import seeds
from skillbase.config import Settings
from skillbase.errors import ConfigError
from skillbase.mcp_server.http import STREAMING_TOOLS, UNSTREAMED_TOOLS, QuickCalls, _replaying, http_app, is_loopback
from skillbase.mcp_server.server import build_server

from .servers import free_port, running

TOKEN = "test-token-0123456789abcdef"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def url(module_home):
    from skillbase.api import SkillBase

    sb = SkillBase(Settings.from_env(env={}, home=module_home))
    port = free_port()
    with running(http_app(build_server(sb, warm=False), host="127.0.0.1", port=port, token=TOKEN), port):
        yield f"http://127.0.0.1:{port}/mcp"
    sb.close()


def test_requests_without_the_token_or_with_a_wrong_one_get_401(url):
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN}):
        r = httpx.post(url, json=INIT, headers={**ACCEPT, **headers})
        assert r.status_code == 401, headers
        assert "SKILLBASE_TOKEN" in r.json()["message"]


def test_a_foreign_host_or_origin_is_refused_even_with_the_token(url):
    auth = {**ACCEPT, "authorization": f"Bearer {TOKEN}"}
    assert httpx.post(url, json=INIT, headers={**auth, "host": "evil.example"}).status_code in (403, 421)
    assert httpx.post(url, json=INIT, headers={**auth, "origin": "http://evil.example"}).status_code == 403
    assert httpx.post(url, json=INIT, headers={**auth, "origin": "http://localhost:5173"}).status_code == 200


def test_the_sdk_client_with_the_token_runs_tools(url):
    async def main():
        http = create_mcp_http_client(headers={"authorization": f"Bearer {TOKEN}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            skill = await client.call_tool("get_skill", {"name": "coalesced-memory-access"})
            bad = await client.call_tool("load_task", {"task": "../../etc/passwd"})
            return tools, skill, bad

    tools, skill, bad = anyio.run(main)
    assert len(tools.tools) == 11
    assert skill.structured_content["skill"]["name"] == "coalesced-memory-access"
    assert bad.is_error and "outside the workspace" in bad.content[0].text


def test_a_non_loopback_address_without_a_token_is_refused(tmp_path):
    from skillbase.api import SkillBase

    # SkillBase opens nothing until called, and the refusal comes before any call.
    server = build_server(SkillBase(Settings.from_env(env={}, home=tmp_path)), warm=False)
    for host in ("0.0.0.0", "192.168.1.10", "gpu-box.example"):
        with pytest.raises(ConfigError, match="without a token"):
            http_app(server, host=host, port=8765, token=None)
    assert http_app(server, host="0.0.0.0", port=8765, token=TOKEN) is not None
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "example.com"))


@pytest.fixture(scope="module")
def routed(module_home):
    """A server whose router records where each request went: (route, JSON-RPC method, tool name)."""
    from skillbase.api import SkillBase

    sb = SkillBase(Settings.from_env(env={}, home=module_home))
    port = free_port()
    app = http_app(build_server(sb, warm=False), host="127.0.0.1", port=port, token=TOKEN)
    router = app.app
    assert isinstance(router, QuickCalls)
    seen: list[tuple[str, str | None, str | None]] = []

    def counted(route, inner):
        async def call(scope, receive, send):
            first = await receive()
            try:
                msg = json.loads(first.get("body") or b"null")
            except ValueError:
                msg = None
            msg = msg if isinstance(msg, dict) else {}
            seen.append((route, msg.get("method"), (msg.get("params") or {}).get("name")))
            await inner(scope, _replaying([first], receive), send)
        return call

    router.quick, router.app = counted("json", router.quick), counted("default", router.app)
    with running(app, port):
        yield f"http://127.0.0.1:{port}/mcp", seen
    sb.close()


def test_quick_calls_are_answered_in_json_mode_and_a_benchmark_still_streams_progress(routed):
    url, seen = routed
    assert "benchmark_kernel" in STREAMING_TOOLS and {"recall", "record_lesson", "attempt_history"} <= UNSTREAMED_TOOLS
    relu = seeds.TASKS_DIR / "relu"

    async def main():
        progress = []

        async def on_progress(done, total, message):
            progress.append(message)

        http = create_mcp_http_client(headers={"authorization": f"Bearer {TOKEN}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            recall = await client.call_tool("recall", {"task": "relu", "k": 3})
            bad = await client.call_tool("recall", {"task": "relu", "k": 0})
            args = {"task": "relu", "source": (relu / "naive.py").read_text(), "session": "http-progress"}
            bench = await client.call_tool("benchmark_kernel", args, progress_callback=on_progress)
            history = await client.call_tool("attempt_history", {"task": "relu", "session": "http-progress"})
            return recall, bad, bench, history, progress

    seen.clear()
    recall, bad, bench, history, progress = anyio.run(main)
    assert len(recall.structured_content["items"]) == 3
    assert bad.is_error and "k" in bad.content[0].text  # validation errors come back the same way
    assert not bench.is_error and bench.structured_content["attempt_id"], bench.content[0].text[:500]
    assert progress, "benchmark_kernel sent no progress over HTTP"
    assert [h["id"] for h in history.structured_content["attempts"]] == [bench.structured_content["attempt_id"]]
    calls = [(route, name) for route, method, name in seen if method == "tools/call"]
    assert calls == [("json", "recall"), ("json", "recall"), ("default", "benchmark_kernel"),
                     ("json", "attempt_history")], seen
    assert all(route == "default" for route, method, _ in seen if method != "tools/call"), seen


def test_a_session_of_an_earlier_protocol_stays_with_its_manager(routed):
    url, seen = routed
    auth = {**ACCEPT, "authorization": f"Bearer {TOKEN}"}
    seen.clear()
    with httpx.Client(headers=auth, timeout=30) as http:
        opened = http.post(url, json=INIT)
        assert opened.status_code == 200
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        got = http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                   "params": {"name": "get_skill", "arguments": {"name": "coalesced-memory-access"}}},
                        headers=session)
    assert got.status_code == 200 and "coalesced-memory-access" in got.text
    assert [route for route, _, _ in seen] == ["default"] * 3, seen


async def _asgi(app, scope, chunks, left=False):
    """Run ``app`` on one request whose body arrives in ``chunks`` (with ``left``, the client leaves
    before its last chunk's end); the messages it was sent."""
    pending = [{"type": "http.request", "body": c, "more_body": left or i < len(chunks) - 1}
               for i, c in enumerate(chunks)]
    sent = []

    async def receive():
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    return sent


def test_the_router_hands_every_body_on_whole_and_routes_only_quick_tool_calls():
    got = []

    def recorder(route):
        async def app(scope, receive, send):
            body = b""
            while True:
                m = await receive()
                body += m.get("body", b"")
                if not m.get("more_body"):
                    break
            got.append((route, body) if m["type"] == "http.request" else (route, body, m["type"]))
        return app

    def router(stateless):
        # A real manager (never run here: the router only asks it its size limit), its app replaced.
        r = QuickCalls(recorder("default"), StreamableHTTPSessionManager(app=None, json_response=True, stateless=True,
                                                                         max_request_body_size=200), "/mcp", stateless)
        r.quick = recorder("json")
        return r

    modern = [(b"mcp-protocol-version", b"2026-07-28")]
    legacy = [(b"mcp-protocol-version", b"2025-06-18")]

    def scope(headers, path="/mcp", method="POST"):
        return {"type": "http", "method": method, "path": path, "headers": headers}

    call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "recall", "arguments": {"task": "relu"}}}).encode()
    cases = [
        (router(False), scope(modern), [call[:10], call[10:]], "json"),  # split body, joined again
        (router(False), scope(legacy), [call], "default"),  # a session's request
        (router(True), scope(legacy), [call], "json"),  # stateless: every request stands alone
        (router(False), scope(modern), [call.replace(b"recall", b"benchmark_kernel")], "default"),
        (router(False), scope(modern), [call.replace(b"recall", b"no_such_tool")], "default"),
        (router(False), scope(modern), [b"{not json"], "default"),
        (router(False), scope(modern), [b"[1, 2]"], "default"),
        (router(False), scope(modern), [call + b" " * 300], "default"),  # past the size limit: refused there
        (router(False), scope(modern, path="/mcp/other"), [call], "default"),
        (router(False), scope(modern, method="GET"), [call], "default"),
    ]
    deep = b"[" * 100_000 + b"]" * 100_000
    cases.append((QuickCalls(recorder("default"), StreamableHTTPSessionManager(app=None, json_response=True),
                             "/mcp", False), scope(modern), [deep], "default"))  # past the JSON parser's depth
    for r, s, chunks, want in cases:
        got.clear()
        anyio.run(_asgi, r, s, chunks)
        assert got == [(want, b"".join(chunks))], (s, chunks[0][:40], got)
    # A client that leaves mid-body: what it sent, then its leaving, go to the default manager.
    got.clear()
    anyio.run(_asgi, router(False), scope(modern), [call[:10]], True)
    assert got == [("default", call[:10], "http.disconnect")], got


def test_a_stateless_server_answers_quick_calls_of_earlier_protocols_in_json(module_home):
    # `serve --workers` is stateless: a client of an earlier protocol (no session kept) gets its quick calls
    # from the JSON-mode manager (one JSON body; the default manager answers those as an event stream).
    from skillbase.api import SkillBase

    sb = SkillBase(Settings.from_env(env={}, home=module_home))
    port = free_port()
    auth = {**ACCEPT, "authorization": f"Bearer {TOKEN}"}
    app = http_app(build_server(sb, warm=False), host="127.0.0.1", port=port, token=TOKEN, stateless=True)
    try:
        with running(app, port), httpx.Client(headers=auth, timeout=60) as http:
            url = f"http://127.0.0.1:{port}/mcp"
            for version in ("2025-06-18", "2025-11-25"):
                opened = http.post(url, json={**INIT, "params": {**INIT["params"], "protocolVersion": version}})
                assert opened.status_code == 200 and "mcp-session-id" not in opened.headers
                head = {"mcp-protocol-version": version}
                got = http.post(url, headers=head, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "get_skill", "arguments": {"name": "coalesced-memory-access"}}})
                assert got.status_code == 200 and got.headers["content-type"].startswith("application/json"), (
                    got.status_code, got.headers["content-type"], got.text[:200])
                assert got.json()["result"]["structuredContent"]["skill"]["name"] == "coalesced-memory-access"
                bad = http.post(url, headers=head, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                    "name": "recall", "arguments": {"task": "relu", "k": 0}}})
                assert bad.status_code == 200 and bad.json()["result"]["isError"], bad.text[:300]
                listed = http.post(url, headers=head, json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
                assert listed.status_code == 200 and listed.headers["content-type"].startswith("text/event-stream")
    finally:
        sb.close()
