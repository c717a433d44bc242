"""Streamable HTTP transport: loopback by default, a bearer token required anywhere else,
and the SDK's Host / Origin (DNS rebinding) protection always on."""

from __future__ import annotations

import hmac
import ipaddress
import json

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from skillbase.errors import ConfigError

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` only accepts connections from this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            sent = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(sent, self._expected):
                body = json.dumps({"error": "unauthorized",
                                   "message": "send Authorization: Bearer <the server's SKILLBASE_TOKEN>"}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="skillbase"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def security_settings(host: str, port: int, allowed_hosts: list[str] = ()) -> TransportSecuritySettings:
    """Host and Origin headers accepted: loopback names, the bound host and any extra names given."""
    names = [*LOOPBACK_NAMES, host, *allowed_hosts]
    hosts, origins = [], []
    for name in dict.fromkeys(names):
        shown = f"[{name}]" if ":" in name and not name.startswith("[") else name
        hosts += [f"{shown}:*", shown]
        origins += [f"http://{shown}:*", f"https://{shown}:*", f"http://{shown}", f"https://{shown}"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


class HostOriginGuard:
    """ASGI middleware: the SDK's own Host / Origin validation (``TransportSecurityMiddleware``, what the
    streamable HTTP transport runs on every request), for apps served beside it (the curation UI)."""

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings):
        self.app = app
        self._check = TransportSecurityMiddleware(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # is_post=False: the JSON content-type rule is the MCP protocol's, not a Host/Origin rule.
            refusal = await self._check.validate_request(Request(scope), is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


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


def refuse_open_address(host: str, token: str | None) -> None:
    if not token and not is_loopback(host):
        raise ConfigError(f"refusing to serve on {host} without a token: anyone who can reach it could run code",
                          hint="set SKILLBASE_TOKEN to a long random string (clients send it as a bearer token), "
                               "or bind 127.0.0.1")


def guard_app(app: ASGIApp, *, host: str, port: int, token: str | None, allowed_hosts: list[str] = ()) -> ASGIApp:
    """Any other ASGI app under the rules of the MCP endpoint: refused off loopback without a token, the
    same Host / Origin validation, and the bearer token on every request when one is set."""
    refuse_open_address(host, token)
    app = HostOriginGuard(app, security_settings(host, port, list(allowed_hosts)))
    return BearerAuth(app, token) if token else app


def http_app(server: MCPServer, *, host: str, port: int, token: str | None,
             allowed_hosts: list[str] = (), path: str = "/mcp", ui: ASGIApp | None = None,
             stateless: bool = False) -> ASGIApp:
    """The ASGI app serving ``server`` at ``path`` (and ``ui``, the curation UI, under ``/ui``).

    Refuses (ConfigError) to serve a non-loopback address without a token. With a
    token, every request must carry it, on loopback too. ``stateless``: the MCP SDK's
    stateless HTTP mode (no session is kept between requests: any process may answer any).
    """
    refuse_open_address(host, token)
    settings = security_settings(host, port, list(allowed_hosts))
    app = server.streamable_http_app(streamable_http_path=path, host=host, transport_security=settings,
                                     stateless_http=stateless)
    if ui is not None:
        app = PathDispatch(app, "/ui", HostOriginGuard(ui, settings))
    return BearerAuth(app, token) if token else app


def serve_http(server: MCPServer, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
               allowed_hosts: list[str] = (), log_level: str = "warning", ui: ASGIApp | None = None) -> None:
    """Serve until interrupted (blocking); ``ui`` is mounted under ``/ui``."""
    import uvicorn

    app = http_app(server, host=host, port=port, token=token, allowed_hosts=allowed_hosts, ui=ui)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")).run()
