"""Streamable HTTP transport: loopback by default, a bearer token required anywhere else,
and the SDK's Host / Origin (DNS rebinding) protection always on (the guards: ``skillbase.web``)."""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skillbase.tools import TOOLS
from skillbase.web import (  # noqa: F401
    HostOriginGuard,
    PathDispatch,
    TokenAuth,
    guard_app,
    is_loopback,
    refuse_open_address,
    security_settings,
)

# Tools that report progress while they run: their calls keep the SDK's streaming answer.
STREAMING_TOOLS = frozenset(spec.name for spec in TOOLS if spec.long_running)
UNSTREAMED_TOOLS = frozenset(spec.name for spec in TOOLS) - STREAMING_TOOLS


class QuickCalls:
    """ASGI: a call of a tool that never reports progress is answered by a second session manager of
    the same server in the SDK's JSON-response mode; everything else goes to ``app`` unchanged.

    By default the SDK answers a 2026-07-28 request by running its handler in a task of its own beside
    another that watches for the client leaving, under a 15 s timer and an in-memory stream, so that a
    handler sending a notification can switch the answer to server-sent events. A quick tool sends
    none (only ``STREAMING_TOOLS`` report progress) and is answered with one JSON body either way; the
    machinery cost the loaded server about a tenth of its CPU a call (docs/performance.md). What the JSON mode gives up is cancelling the call when its client disconnects,
    which a tool running on a worker thread did not honour anyway.

    Taken this way: calls under the 2026-07-28 protocol (each a request of its own) and, on a stateless
    server (``skillbase serve --workers``), every call. A session of an earlier protocol stays with the
    manager that opened it. The request body is read here (up to the SDK's size limit, past which the
    request goes to ``app`` whole, to be refused there) and handed on as it came."""

    def __init__(
        self,
        app: ASGIApp,
        quick: StreamableHTTPSessionManager,
        path: str,
        stateless: bool,
        tools: frozenset[str] = UNSTREAMED_TOOLS,
    ):
        self.app, self.manager, self.path, self.stateless, self.tools = app, quick, path, stateless, tools
        self.quick = StreamableHTTPASGIApp(quick)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            async with self.manager.run():  # its task group, beside the default manager's (run by ``app``)
                await self.app(scope, receive, send)
            return
        if not (
            scope["type"] == "http"
            and scope.get("method") == "POST"
            and scope.get("path") == self.path
            and self._per_request(scope)
        ):
            await self.app(scope, receive, send)
            return
        chunks, whole = await self._read(receive)
        if whole:  # handed on as one message
            chunks = [
                {"type": "http.request", "body": b"".join(m.get("body", b"") for m in chunks), "more_body": False}
            ]
        replay = _replaying(chunks, receive)
        if whole and self._quick_call(chunks[0]["body"]):
            await self.quick(scope, replay, send)
        else:
            await self.app(scope, replay, send)

    def _per_request(self, scope: Scope) -> bool:
        if self.stateless:
            return True
        version = next((v for k, v in scope.get("headers") or () if k == b"mcp-protocol-version"), None)
        return version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS

    async def _read(self, receive: Receive) -> tuple[list[Message], bool]:
        """The request's body messages, and whether they are all of it (within the size limit)."""
        chunks, size = [], 0
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                return chunks, False
            size += len(message.get("body", b""))
            if size > self.manager.max_request_body_size:
                return chunks, False
            if not message.get("more_body", False):
                return chunks, True

    def _quick_call(self, body: bytes) -> bool:
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth: the SDK answers
            return False
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return False
        params = message.get("params")
        return isinstance(params, dict) and params.get("name") in self.tools


def _replaying(chunks: list[Message], receive: Receive) -> Receive:
    """A ``receive`` giving the messages already read, then the client's own."""
    pending = list(chunks)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


def http_app(
    server: MCPServer,
    *,
    host: str,
    port: int,
    token: str | None,
    allowed_hosts: list[str] = (),
    path: str = "/mcp",
    ui: ASGIApp | None = None,
    stateless: bool = False,
) -> ASGIApp:
    """The ASGI app serving ``server`` at ``path`` (and ``ui``, the curation UI, under ``/ui``).

    Refuses (ConfigError) to serve a non-loopback address without a token. With a
    token, every request must carry it, on loopback too. ``stateless``: the MCP SDK's
    stateless HTTP mode (no session is kept between requests: any process may answer any).
    """
    refuse_open_address(host, token)
    settings = security_settings(host, port, list(allowed_hosts))
    app = server.streamable_http_app(
        streamable_http_path=path, host=host, transport_security=settings, stateless_http=stateless
    )
    quick = StreamableHTTPSessionManager(
        app=server.session_manager.app,
        json_response=True,
        stateless=True,
        security_settings=settings,
        max_request_body_size=server.session_manager.max_request_body_size,
    )
    app = QuickCalls(app, quick, path, stateless)
    if ui is not None:
        app = PathDispatch(app, "/ui", HostOriginGuard(ui, settings))
    return TokenAuth(app, token) if token else app


def serve_http(
    server: MCPServer,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: list[str] = (),
    log_level: str = "warning",
    ui: ASGIApp | None = None,
) -> None:
    """Serve until interrupted (blocking); ``ui`` is mounted under ``/ui``."""
    import uvicorn

    app = http_app(server, host=host, port=port, token=token, allowed_hosts=allowed_hosts, ui=ui)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")).run()
