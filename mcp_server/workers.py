"""Several server processes on one HTTP port: ``skillbase serve --transport http --workers N``.

N worker processes each listen on the port with their own socket (SO_REUSEPORT: the kernel spreads
new connections over the sockets evenly). One socket shared by every worker, as uvicorn's own
``--workers`` does it, let the first worker to wake take every waiting connection: 16 clients
connecting at once all landed on one of two workers. The parent starts a new worker when one dies
after it has started, and stops them all on Ctrl-C or SIGTERM (each finishes its requests, like a
single server). Each worker opens the store itself (its own SkillBase, closed when the worker stops)
and serves MCP in the SDK's stateless HTTP mode: no session is kept between requests, so it does not
matter which worker answers which request. An MCP session lives in the process that opened it, and
one client's requests may come over several connections, which the kernel may hand to different
workers: with sessions, some of its requests would reach a worker that never saw its session.

The workers share the store the way any processes sharing a ``SKILLBASE_HOME`` do (the SQLite ledger
in WAL mode, the embedding cache file, the index lock; each embeds its own writes and answers the
others' from the cache file). The vector index must be a chroma server (``SKILLBASE_CHROMA_URL``):
an embedded index is reopened by every process after another one writes (12 ms of server CPU a call
with two processes, docs/benchmarks.md, tenth round of issue 21), so more than one worker without
one is refused.

Read-your-writes: a caller is the client's TCP connection, which one worker keeps. A caller's next
calls on that connection see its writes at once; on another connection, which may reach another
worker, once the writing worker has embedded them (its follower's next round, about 0.2 s), and
always within a second, like any other caller's writes.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from skillbase.errors import ConfigError, InvalidInput

# How the parent hands a worker what it was asked to serve (workers start as new interpreters).
ENV = "SKILLBASE_SERVE_WORKER"
BACKLOG = 2048  # uvicorn's default listen backlog
STARTUP_S = 120.0  # a worker that exits sooner than this after its start is not started again: it would again
STOP_S = 60.0  # how long stopping workers may take to finish their requests before they are killed

log = logging.getLogger("skillbase.serve")


def serve_workers(transport: str, workers: int, *, host: str, port: int, allowed_hosts: list[str],
                  workspace: str | Path | None, settings) -> None:
    """Serve the store from ``workers`` processes on ``host:port`` until interrupted (blocking)."""
    from skillbase.mcp_server.http import refuse_open_address

    if transport != "http":
        raise InvalidInput(f"--workers {workers} needs the HTTP transport",
                           hint="add --transport http (a stdio server has one client: one process)")
    if workers < 1:
        raise InvalidInput(f"--workers {workers}: give 1 or more worker processes")
    if not settings.chroma_url:
        raise ConfigError(f"{workers} worker processes need a chroma server as the shared vector index",
                          hint="start one (`chroma run --path DIR --port 8000`) and set "
                               "SKILLBASE_CHROMA_URL=http://127.0.0.1:8000; with the embedded index every process "
                               "reopens it after each other's writes")
    refuse_open_address(host, settings.http_token)
    _refuse_taken_port(host, port)
    _listener(host, port).close()  # fail here, not in every worker
    os.environ[ENV] = json.dumps({"settings": settings.model_dump(mode="json"), "host": host, "port": port,
                                  "allowed_hosts": allowed_hosts,
                                  "workspace": str(workspace) if workspace is not None else None})
    ctx = multiprocessing.get_context("spawn")

    def start(i: int):
        p = ctx.Process(target=_worker_main, args=(host, port, os.getpid()), name=f"skillbase-worker-{i}",
                        daemon=False)
        p.start()
        return p, time.monotonic()

    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    procs = [start(i) for i in range(workers)]
    failed = None
    try:
        while not stop.wait(0.5):
            for i, (p, started) in enumerate(procs):
                if p.is_alive():
                    continue
                if time.monotonic() - started < STARTUP_S:
                    failed = (p.name, p.exitcode)
                    stop.set()
                    break
                log.warning("%s exited (code %s): starting another", p.name, p.exitcode)
                procs[i] = start(i)
    finally:
        for p, _ in procs:
            if p.is_alive():
                p.terminate()  # SIGTERM: uvicorn finishes the requests in flight, the worker closes its store
        deadline = time.monotonic() + STOP_S
        for p, _ in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failed is not None:
        raise ConfigError(f"{failed[0]} exited (code {failed[1]}) {STARTUP_S:g} s or less after its start",
                          hint="its error is printed above; the other workers were stopped")


def _refuse_taken_port(host: str, port: int) -> None:
    """Another server already listening there would share the port with these workers (SO_REUSEPORT lets
    any process of this user join it): refused."""
    bare = host.strip("[]")
    probe = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(bare, bare)
    try:
        with socket.create_connection((probe, port), timeout=0.5):
            pass
    except OSError:
        return
    raise ConfigError(f"something already listens on {host}:{port}", hint="stop it, or choose another --port")


def _listener(host: str, port: int) -> socket.socket:
    """A listening socket on host:port that other workers' sockets share (SO_REUSEPORT)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(BACKLOG)
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {e}", hint="choose another --port") from None
    return sock


def _worker_main(host: str, port: int, parent: int) -> None:
    """One worker process: its own socket on the port, its own SkillBase (``worker_app``), until SIGTERM."""
    import uvicorn

    # Out of the terminal's process group: Ctrl-C reaches the parent alone, which stops each worker
    # with one SIGTERM (a second signal makes uvicorn skip its shutdown, and the store's close with it).
    os.setpgrp()
    _stop_with(parent)

    config = uvicorn.Config("skillbase.mcp_server.workers:worker_app", factory=True, host=host, port=port,
                            log_level="warning", lifespan="on", backlog=BACKLOG)
    uvicorn.Server(config).run(sockets=[_listener(host, port)])


def worker_app() -> ASGIApp:
    """The app of one worker process (uvicorn calls it in each): its own SkillBase over the store."""
    from skillbase.api import SkillBase
    from skillbase.config import Settings
    from skillbase.mcp_server.http import http_app
    from skillbase.mcp_server.server import build_server
    from skillbase.ui import build_app

    raw = os.environ.get(ENV)
    if not raw:
        raise ConfigError(f"{ENV} is not set: worker_app is started by `skillbase serve --workers N`")
    asked = json.loads(raw)
    sb = SkillBase(Settings.model_validate(asked["settings"]))
    try:
        server = build_server(sb, workspace=asked["workspace"], settle_heap=True)
        app = http_app(server, host=asked["host"], port=asked["port"], token=sb.settings.http_token,
                       allowed_hosts=asked["allowed_hosts"], ui=build_app(sb, warm=True), stateless=True)
    except BaseException:
        sb.close()
        raise
    return CloseOnShutdown(app, sb.close)


def _stop_with(parent: int) -> None:
    """SIGTERM this process when ``parent`` dies (Linux), so no worker outlives its server."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent stops its workers itself
        return
    if os.getppid() != parent:  # it died before the line above
        os.kill(os.getpid(), signal.SIGTERM)


class CloseOnShutdown:
    """ASGI: calls ``close`` once the app has finished its lifespan shutdown (the worker is stopping)."""

    def __init__(self, app: ASGIApp, close):
        self.app, self._close = app, close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def sending(message) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                self._close()
            await send(message)

        await self.app(scope, receive, sending)
