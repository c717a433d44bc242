"""Streamable HTTP transport: loopback by default, a bearer token required anywhere else,
and the SDK's Host / Origin (DNS rebinding) protection always on."""

from __future__ import annotations

import hmac
import ipaddress
import json

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
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


def http_app(server: MCPServer, *, host: str, port: int, token: str | None,
             allowed_hosts: list[str] = (), path: str = "/mcp") -> ASGIApp:
    """The ASGI app serving ``server`` at ``path``.

    Refuses (ConfigError) to serve a non-loopback address without a token. With a
    token, every request must carry it, on loopback too.
    """
    if not token and not is_loopback(host):
        raise ConfigError(f"refusing to serve on {host} without a token: anyone who can reach it could run code",
                          hint="set SKILLBASE_TOKEN to a long random string (clients send it as a bearer token), "
                               "or bind 127.0.0.1")
    app = server.streamable_http_app(streamable_http_path=path, host=host,
                                     transport_security=security_settings(host, port, list(allowed_hosts)))
    return BearerAuth(app, token) if token else app


def serve_http(server: MCPServer, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
               allowed_hosts: list[str] = (), log_level: str = "warning") -> None:
    """Serve until interrupted (blocking)."""
    import uvicorn

    app = http_app(server, host=host, port=port, token=token, allowed_hosts=allowed_hosts)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")).run()
