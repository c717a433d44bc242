"""HTTP guards shared by the MCP transport and the curation UI.

- ``TokenAuth``: with a token set, every request carries ``Authorization: Bearer <token>`` (the
  scheme is case-insensitive, RFC 9110 section 11.1), or, from a browser, a session cookie that
  the login page (``/ui/login``) issues for the token: HttpOnly, SameSite=Strict, signed with a
  key derived from the token, naming the curator who logged in and carrying the session's CSRF
  token. A browser without a session is sent to the login page; an API client gets 401 JSON.
- ``HostOriginGuard``: the MCP SDK's Host / Origin (DNS rebinding) validation, plus a refusal of
  state-changing requests that the browser marks ``Sec-Fetch-Site: cross-site`` (a form posted
  from another site carries no Origin header in some browsers).
- ``csrf_token`` / ``check_csrf``: the token every UI form carries; without a login (no token set,
  loopback) a double-submit cookie stands in for the session's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import ipaddress
import json
import secrets
import time
from urllib.parse import parse_qs, quote, urlencode

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from skillbase.errors import ConfigError

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
SESSION_COOKIE = "skillbase_session"
CSRF_COOKIE = "skillbase_csrf"
SESSION_S = 12 * 3600
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOGIN_PATH = "/ui/login"


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` only accepts connections from this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refuse_open_address(host: str, token: str | None) -> None:
    if not token and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve on {host} without a token: anyone who can reach it could run code",
            hint="set SKILLBASE_TOKEN to a long random string (clients send it as a bearer token), or bind 127.0.0.1",
        )


def bearer(header: bytes) -> bytes | None:
    """The credentials of an ``Authorization`` header using the Bearer scheme (any letter case)."""
    scheme, _, value = header.strip().partition(b" ")
    return value.strip() if scheme.lower() == b"bearer" and value.strip() else None


class Sessions:
    """Stateless signed session cookies (any server process can check them): curator, CSRF token, expiry."""

    def __init__(self, token: str):
        self._key = hashlib.sha256(b"skillbase session key\0" + token.encode()).digest()

    def _sign(self, body: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self._key, body, hashlib.sha256).digest()).decode().rstrip("=")

    def issue(self, curator: str) -> str:
        body = base64.urlsafe_b64encode(
            json.dumps(
                {"curator": curator, "csrf": secrets.token_urlsafe(24), "exp": int(time.time()) + SESSION_S}
            ).encode()
        )
        return f"{body.decode()}.{self._sign(body)}"

    def read(self, cookie: str | None) -> dict | None:
        """The session a cookie holds, or None when it is absent, forged or expired."""
        if not cookie or "." not in cookie:
            return None
        body, sig = cookie.rsplit(".", 1)
        if not hmac.compare_digest(sig, self._sign(body.encode())):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(body.encode()))
        except ValueError:
            return None
        return data if isinstance(data, dict) and data.get("exp", 0) > time.time() else None


def _cookies(scope: Scope) -> dict[str, str]:
    raw = dict(scope.get("headers") or []).get(b"cookie", b"").decode("latin-1")
    out = {}
    for part in raw.split(";"):
        name, _, value = part.strip().partition("=")
        if name:
            out[name] = value
    return out


def _wants_html(scope: Scope) -> bool:
    accept = dict(scope.get("headers") or []).get(b"accept", b"").decode("latin-1")
    return "text/html" in accept


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


LOGIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>skillbase · log in</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="{root}/ui/static/ui.css"></head><body><main>
<h1>skillbase curation</h1><p>This server asks for its access token. Your name is recorded with every
curation action you take.</p>{error}
<form method="post" action="{root}{login}"><input type="hidden" name="next" value="{next}">
<label>access token <input type="password" name="token" required autocomplete="current-password"></label>
<label>your name <input name="curator" required maxlength="80" autocomplete="name"></label>
<button>log in</button></form></main></body></html>"""


class TokenAuth:
    """ASGI middleware: the bearer token on every request, or a session cookie from the login page."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self._token = token.encode()
        self.sessions = Sessions(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        sent = bearer(headers.get(b"authorization", b""))
        if sent is not None and hmac.compare_digest(sent, self._token):
            scope.setdefault("state", {})["curator"] = "token holder"
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path.startswith("/ui/static/"):  # the pages' style sheet and scripts: public, the login page's too
            await self.app(scope, receive, send)
            return
        if path == LOGIN_PATH:
            await self._login(scope, receive, send)
            return
        session = self.sessions.read(_cookies(scope).get(SESSION_COOKIE))
        if session is not None and path.startswith("/ui"):
            state = scope.setdefault("state", {})
            state.update(curator=session["curator"], csrf=session["csrf"])
            await self.app(scope, receive, send)
            return
        if path.startswith("/ui") and _wants_html(scope) and scope["method"] in SAFE_METHODS:
            target = f"{scope.get('root_path', '')}{LOGIN_PATH}?{urlencode({'next': path})}"
            await _send(send, 303, b"", [(b"location", target.encode())])
            return
        body = json.dumps(
            {
                "error": "unauthorized",
                "message": "send Authorization: Bearer <the server's SKILLBASE_TOKEN>, or log in at "
                f"{LOGIN_PATH} in a browser",
            }
        ).encode()
        await _send(
            send,
            401,
            body,
            [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="skillbase"')],
        )

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        root = scope.get("root_path", "")
        if scope["method"] == "POST":
            chunks, more = [], True
            while more:
                message = await receive()
                chunks.append(message.get("body", b""))
                more = message.get("more_body", False) and sum(map(len, chunks)) < 65536
            form = {k: v[0] for k, v in parse_qs(b"".join(chunks).decode("utf-8", "replace")).items()}
            nxt = form.get("next", "/ui/") if form.get("next", "").startswith("/ui") else "/ui/"
            curator = " ".join(form.get("curator", "").split())[:80]
            if curator and hmac.compare_digest(form.get("token", "").encode(), self._token):
                cookie = (
                    f"{SESSION_COOKIE}={self.sessions.issue(curator)}; Path=/; HttpOnly; SameSite=Strict; "
                    f"Max-Age={SESSION_S}"
                )
                await _send(send, 303, b"", [(b"location", f"{root}{nxt}".encode()), (b"set-cookie", cookie.encode())])
                return
            await self._page(send, root, nxt, "the token is not this server's, or the name is empty", 401)
            return
        nxt = parse_qs(scope.get("query_string", b"").decode()).get("next", ["/ui/"])[0]
        await self._page(send, root, nxt if nxt.startswith("/ui") else "/ui/", "", 200)

    async def _page(self, send: Send, root: str, nxt: str, error: str, status: int) -> None:
        page = LOGIN_PAGE.format(
            root=html.escape(root),
            login=LOGIN_PATH,
            next=html.escape(nxt, quote=True),
            error=f'<p class="error">{html.escape(error)}</p>' if error else "",
        )
        await _send(
            send,
            status,
            page.encode(),
            [
                (b"content-type", b"text/html; charset=utf-8"),
                (
                    b"content-security-policy",
                    b"default-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'",
                ),
                (b"cache-control", b"no-store"),
            ],
        )


def security_settings(host: str, port: int, allowed_hosts: list[str] = ()) -> TransportSecuritySettings:
    """Host and Origin headers accepted: loopback names, the bound host and any extra names given."""
    names = [*LOOPBACK_NAMES, host, *allowed_hosts]
    hosts, origins = [], []
    for name in dict.fromkeys(names):
        shown = f"[{name}]" if ":" in name and not name.startswith("[") else name
        hosts += [f"{shown}:*", shown]
        origins += [f"http://{shown}:*", f"https://{shown}:*", f"http://{shown}", f"https://{shown}"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class HostOriginGuard:
    """ASGI middleware: the SDK's own Host / Origin validation (``TransportSecurityMiddleware``, what the
    streamable HTTP transport runs on every request), for apps served beside it (the curation UI), and
    no state-changing request that the browser says comes from another site."""

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings):
        self.app = app
        self._check = TransportSecurityMiddleware(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if refuse_cross_site(scope):
                await _send(
                    send,
                    403,
                    b'{"error": "forbidden", "message": "cross-site request refused"}',
                    [(b"content-type", b"application/json")],
                )
                return
            # is_post=False: the JSON content-type rule is the MCP protocol's, not a Host/Origin rule.
            refusal = await self._check.validate_request(Request(scope), is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def refuse_cross_site(scope: Scope) -> bool:
    """A state-changing request the browser marked as sent from another site (Fetch Metadata)."""
    site = dict(scope.get("headers") or []).get(b"sec-fetch-site", b"").decode("latin-1").lower()
    return scope.get("method", "GET") not in SAFE_METHODS and site == "cross-site"


def csrf_token(request: Request) -> tuple[str, str | None]:
    """The CSRF token a page's forms carry, and a cookie to set when the double-submit cookie is new."""
    session = getattr(request.state, "csrf", None)
    if session:
        return session, None
    existing = request.cookies.get(CSRF_COOKIE)
    if existing:
        return existing, None
    fresh = secrets.token_urlsafe(24)
    return fresh, f"{CSRF_COOKIE}={quote(fresh)}; Path=/; HttpOnly; SameSite=Strict"


def check_csrf(request: Request, form: dict[str, str]) -> bool:
    """Whether a form post carries this browser's CSRF token (a bearer-token client needs none: no browser
    attaches an Authorization header on its own)."""
    if getattr(request.state, "curator", None) == "token holder":
        return True
    expected = getattr(request.state, "csrf", None) or request.cookies.get(CSRF_COOKIE)
    return bool(expected) and hmac.compare_digest(form.get("csrf", ""), expected)


class PathDispatch:
    """ASGI: requests under ``prefix`` go to ``inner`` (with the prefix added to root_path, as ASGI mounts
    do: the path keeps it); everything else, lifespan events included, to ``outer``."""

    def __init__(self, outer: ASGIApp, prefix: str, inner: ASGIApp):
        self.outer, self.prefix, self.inner = outer, prefix.rstrip("/"), inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == self.prefix or path.startswith(self.prefix + "/")):
            scope = {**scope, "root_path": scope.get("root_path", "") + self.prefix}
            await self.inner(scope, receive, send)
            return
        await self.outer(scope, receive, send)


def guard_app(app: ASGIApp, *, host: str, port: int, token: str | None, allowed_hosts: list[str] = ()) -> ASGIApp:
    """Any other ASGI app under the rules of the MCP endpoint: refused off loopback without a token, the
    same Host / Origin validation, and the token (or a login session) on every request when one is set."""
    refuse_open_address(host, token)
    app = HostOriginGuard(app, security_settings(host, port, list(allowed_hosts)))
    return TokenAuth(app, token) if token else app
