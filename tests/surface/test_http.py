"""Streamable HTTP: the bearer token, the Host / Origin protection, and the refusal to serve a
non-loopback address without a token. The server runs under uvicorn on a loopback port."""

from __future__ import annotations


import anyio
import httpx
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from skillbase.mcp_server.http import http_app, is_loopback
from skillbase.mcp_server.server import build_server
from skillbase.config import Settings
from skillbase.errors import ConfigError

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
    assert len(tools.tools) == 10
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
