"""The curation UI behind the HTTP transport's rules, on real uvicorn servers on loopback: under
``/ui`` of ``serve --transport http`` and alone (``skillbase ui``). Without the token, with a
foreign Host or a foreign Origin, the UI answers exactly as the MCP endpoint does."""

from __future__ import annotations

import re


import httpx
import pytest

from skillbase.config import Settings
from skillbase.errors import ConfigError
from skillbase.mcp_server.http import http_app
from skillbase.mcp_server.server import build_server

from .servers import free_port, running
from skillbase.ui import build_app, standalone_app

TOKEN = "ui-test-token-0123456789abcdef"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
AUTH = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def servers(ui_sb):
    """(base URL of `serve --transport http`, base URL of `skillbase ui`), both with the token."""
    p1, p2 = free_port(), free_port()
    both = http_app(build_server(ui_sb, warm=False), host="127.0.0.1", port=p1, token=TOKEN, ui=build_app(ui_sb))
    alone = standalone_app(ui_sb, host="127.0.0.1", port=p2, token=TOKEN)
    with running(both, p1), running(alone, p2):
        yield f"http://127.0.0.1:{p1}", f"http://127.0.0.1:{p2}"


def _mcp(base: str, **headers) -> httpx.Response:
    return httpx.post(f"{base}/mcp", json=INIT, headers={**MCP_HEADERS, **headers})


def _same(a: httpx.Response, b: httpx.Response) -> bool:
    return (a.status_code, a.content, a.headers.get("www-authenticate")) == (
        b.status_code, b.content, b.headers.get("www-authenticate"))


def test_without_the_token_the_ui_is_refused_as_the_mcp_endpoint_is(servers):
    mcp_base = servers[0]
    for base in servers:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN}):
            page = httpx.get(f"{base}/ui/tasks", headers={**headers, "accept": "application/json"})
            mcp = _mcp(mcp_base, **headers)
            assert page.status_code == 401 and _same(page, mcp), (base, headers)
            assert "SKILLBASE_TOKEN" in page.json()["message"]
        assert httpx.post(f"{base}/ui/skills/ui-http-reject/approve", data={"reason": "x"}).status_code == 401
        assert httpx.get(f"{base}/ui/tasks", headers=AUTH).status_code == 200
        assert httpx.get(f"{base}/ui/assets/plotly.min.js").status_code == 401
        # the scheme's name in any letter case (RFC 9110); the token itself exactly
        for scheme in ("bearer", "BEARER", "BeArEr"):
            assert httpx.get(f"{base}/ui/tasks", headers={"authorization": f"{scheme} {TOKEN}"}).status_code == 200
            assert _mcp(mcp_base, authorization=f"{scheme} {TOKEN}").status_code == 200
        assert httpx.get(f"{base}/ui/tasks", headers={"authorization": f"Bearer {TOKEN.upper()}"}).status_code == 401


def test_a_browser_logs_in_with_the_token_and_its_name_goes_on_its_actions(servers, ui_sb):
    for base in servers:
        page = httpx.get(f"{base}/ui/review", headers={"accept": "text/html"})
        assert page.status_code == 303 and page.headers["location"].endswith("/ui/login?next=%2Fui%2Freview")
        login = httpx.get(f"{base}/ui/login", headers={"accept": "text/html"})
        assert login.status_code == 200 and 'type="password" name="token"' in login.text
        # what the login page loads is served without a session (a browser asks before logging in)
        for href in re.findall(r'<link rel="stylesheet" href="([^"]+)"', login.text):
            assert httpx.get(base + href).status_code == 200, href
        assert 'rel="icon" href="data:,"' in login.text  # no /favicon.ico request, which would be refused
        wrong = httpx.post(f"{base}/ui/login", data={"token": "nope", "curator": "mallory", "next": "/ui/review"})
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        ok = httpx.post(f"{base}/ui/login", data={"token": TOKEN, "curator": "Ana Curator", "next": "/ui/review"})
        assert ok.status_code == 303 and ok.headers["location"].endswith("/ui/review")
        cookie = ok.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        with httpx.Client(cookies=ok.cookies, timeout=60) as browser:  # a browser waits for a page
            assert browser.get(f"{base}/mcp").status_code == 401  # a session opens the UI, not the MCP endpoint
            review = browser.get(f"{base}/ui/review")
            assert review.status_code == 200 and "curating as Ana Curator" in review.text
    with httpx.Client(cookies=ok.cookies, timeout=60) as browser:  # the last server's session
        csrf = browser.get(f"{servers[1]}/ui/review").text.split('name="csrf" value="')[1].split('"')[0]
        no_token = browser.post(f"{servers[1]}/ui/skills/ui-http-login/reject", data={"reason": "x"})
        assert no_token.status_code == 403
        done = browser.post(f"{servers[1]}/ui/skills/ui-http-login/reject",
                            data={"reason": "duplicate", "csrf": csrf, "curator": "spoofed"})
        assert done.status_code == 303
    assert ui_sb.skill_history("ui-http-login")[-1].author == "Ana Curator"


def test_a_cross_site_post_is_refused_without_an_origin_header(servers, ui_sb):
    before = ui_sb.get_skill("ui-browser-approve")
    for base in servers:
        r = httpx.post(f"{base}/ui/skills/ui-browser-approve/deprecate", data={"reason": "forged"},
                       headers={**AUTH, "sec-fetch-site": "cross-site"})
        assert r.status_code == 403
        assert httpx.get(f"{base}/ui/tasks", headers={**AUTH, "sec-fetch-site": "cross-site"}).status_code == 200
    assert ui_sb.get_skill("ui-browser-approve") == before


def test_a_foreign_host_or_origin_is_refused_as_the_mcp_endpoint_refuses_it(servers):
    mcp_base = servers[0]
    for base in servers:
        for bad in ({"host": "evil.example"}, {"origin": "http://evil.example"},
                    {"origin": "http://127.0.0.1.evil.example:80"}):
            page = httpx.get(f"{base}/ui/tasks", headers={**AUTH, **bad})
            mcp = _mcp(mcp_base, **AUTH, **bad)
            assert page.status_code in (403, 421) and _same(page, mcp), (base, bad, page.text)
        ok = httpx.get(f"{base}/ui/tasks", headers={**AUTH, "origin": "http://localhost:5173"})
        assert ok.status_code == 200 and _mcp(mcp_base, **AUTH, origin="http://localhost:5173").status_code == 200


def test_a_cross_site_form_post_changes_nothing(servers, ui_sb):
    base = servers[0]
    before = ui_sb.get_skill("ui-browser-approve")
    r = httpx.post(f"{base}/ui/skills/ui-browser-approve/deprecate", data={"reason": "forged"},
                   headers={**AUTH, "origin": "http://evil.example"})
    assert r.status_code == 403
    assert ui_sb.get_skill("ui-browser-approve") == before


def test_the_mcp_endpoint_still_serves_beside_the_ui(servers):
    assert _mcp(servers[0], **AUTH).status_code == 200
    assert httpx.get(f"{servers[0]}/ui", headers=AUTH, follow_redirects=True).status_code == 200


def test_the_ui_alone_on_a_non_loopback_address_needs_a_token(tmp_path):
    from skillbase.api import SkillBase

    sb = SkillBase(Settings.from_env(env={}, home=tmp_path))  # opens nothing until called
    for host in ("0.0.0.0", "192.168.1.10", "gpu-box.example"):
        with pytest.raises(ConfigError, match="without a token"):
            standalone_app(sb, host=host, port=8766, token=None)
    assert standalone_app(sb, host="0.0.0.0", port=8766, token=TOKEN) is not None
