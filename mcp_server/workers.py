"""Several server processes on one HTTP port: ``skillbase serve --transport http --workers N``.

The parent listens on the port and every worker accepts from that one socket, each taking a new
connection only while it holds no more open connections than the least loaded live worker
(``BalancedServer``): 16 clients connecting at once spread evenly (four workers on a 16-core host
held 0.76-0.84 cores each under them). Two other ways were measured and left: one socket with every
worker accepting freely (uvicorn's own ``--workers``) let the first worker to wake take all 16
connections of a burst; a socket of its own per worker
(SO_REUSEPORT) hands each connection to the worker its address hashes to: on a 16-core host four
workers held 1.15, 1.12, 0.53 and 0.21 cores under 16 clients, and eight left one worker with none
(docs/performance.md). The parent starts a new worker when one dies after
it has started, and stops them all on Ctrl-C or SIGTERM (each finishes its requests, like a single
server). Each worker opens the store itself (its own SkillBase, closed when the worker stops) and
serves MCP in the SDK's stateless HTTP mode: no session is kept between requests, so it does not
matter which worker answers which request. An MCP session lives in the process that opened it, and
one client's requests may come over several connections, which may reach different workers: with
sessions, some of its requests would reach a worker that never saw its session.

The workers share the store the way any processes sharing a ``SKILLBASE_HOME`` do (the SQLite ledger
in WAL mode, the embedding cache file, the index lock; each embeds its own writes and answers the
others' from the cache file). The vector index must be a chroma server (``SKILLBASE_CHROMA_URL``):
an embedded index is reopened by every process after another one writes (12 ms of server CPU a call
with two processes, docs/performance.md), so more than one worker without
one is refused. Unless SKILLBASE_EMBEDDING_THREADS says otherwise, the workers share the embedding
threads one process would have (half the cores, at most 4 a worker, at least 1).

Read-your-writes: a caller is the client's TCP connection, which one worker keeps. A caller's next
calls on that connection see its writes at once; on another connection, which may reach another
worker, once the writing worker has embedded them (its follower's next round, about 0.2 s), and
always within a second, like any other caller's writes.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from skillbase.config import default_embedding_threads
from skillbase.errors import ConfigError, InvalidInput

# How the parent hands a worker what it was asked to serve (workers start as new interpreters).
ENV = "SKILLBASE_SERVE_WORKER"
BACKLOG = 2048  # uvicorn's default listen backlog
STARTUP_S = 120.0  # a worker that exits sooner than this after its start is not started again: it would again
STOP_S = 60.0  # how long stopping workers may take to finish their requests before they are killed
BEAT_S = 0.1  # a worker tells the others its open connections this often (and after each accept)
ALIVE_S = 1.0  # a worker silent this long (dead, or starting again) is left out of the comparison
WAIT_S = 0.01  # a worker ahead of the least loaded one looks again after this pause (the others accept meanwhile)
BOOT_S = 30.0  # after the first start, a worker not up yet counts as holding no connection for this long

log = logging.getLogger("skillbase.serve")


def serve_workers(
    transport: str,
    workers: int,
    *,
    host: str,
    port: int,
    allowed_hosts: list[str],
    workspace: str | Path | None,
    settings,
) -> None:
    """Serve the store from ``workers`` processes on ``host:port`` until interrupted (blocking)."""
    from skillbase.mcp_server.http import refuse_open_address

    if transport != "http":
        raise InvalidInput(
            f"--workers {workers} needs the HTTP transport",
            hint="add --transport http (a stdio server has one client: one process)",
        )
    if workers < 1:
        raise InvalidInput(f"--workers {workers}: give 1 or more worker processes")
    if not settings.chroma_url:
        raise ConfigError(
            f"{workers} worker processes need a chroma server as the shared vector index",
            hint="start one (`chroma run --path DIR --port 8000`) and set "
            "SKILLBASE_CHROMA_URL=http://127.0.0.1:8000; with the embedded index every process "
            "reopens it after each other's writes",
        )
    refuse_open_address(host, settings.http_token)
    _refuse_taken_port(host, port)
    if settings.embedding_threads is None:
        settings = settings.model_copy(update={"embedding_threads": worker_threads(workers)})
    listener = _listener(host, port)
    os.environ[ENV] = json.dumps(
        {
            "settings": settings.model_dump(mode="json"),
            "host": host,
            "port": port,
            "allowed_hosts": allowed_hosts,
            "workspace": str(workspace) if workspace is not None else None,
        }
    )
    ctx = multiprocessing.get_context("spawn")
    # Each worker's open connections and when it last said so (time.monotonic: one clock for the host).
    held, beats = ctx.Array("i", workers, lock=False), ctx.Array("d", workers, lock=False)
    boot_until = time.monotonic() + BOOT_S  # the first connections wait for every worker's warm-up (or this)

    def start(i: int):
        beats[i] = 0.0
        p = ctx.Process(
            target=_worker_main,
            args=(listener, i, held, beats, boot_until, os.getpid()),
            name=f"skillbase-worker-{i}",
            daemon=False,
        )
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
        listener.close()
    if failed is not None:
        raise ConfigError(
            f"{failed[0]} exited (code {failed[1]}) {STARTUP_S:g} s or less after its start",
            hint="its error is printed above; the other workers were stopped",
        )


def _refuse_taken_port(host: str, port: int) -> None:
    """Something already listening there (on this address or on all of them): refused with a clear
    error before any worker starts."""
    bare = host.strip("[]")
    probe = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(bare, bare)
    try:
        with socket.create_connection((probe, port), timeout=0.5):
            pass
    except OSError:
        return
    raise ConfigError(f"something already listens on {host}:{port}", hint="stop it, or choose another --port")


def worker_threads(workers: int) -> int:
    """Embedding threads a worker: one process's default shared among the workers. ONNX Runtime's
    threads no longer spin between calls, but N workers of 4 threads on few cores would still crowd
    each other."""
    return default_embedding_threads(workers)


def _listener(host: str, port: int) -> socket.socket:
    """The one listening socket on host:port that every worker accepts from."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {e}", hint="choose another --port") from None
    return sock


class BalancedServer(uvicorn.Server):
    """uvicorn's server, accepting from the shared socket only while this worker holds no more open
    connections than the least loaded live worker (``held``/``beats``: every worker's count and when
    it was written). The worker with the fewest always accepts, so a connection never waits for long:
    at worst the time a worker takes to say it has one more. Until ``boot_until``, a worker that has not
    started yet counts as holding none: the first worker up does not take every first connection."""

    def __init__(
        self, config: uvicorn.Config, listener: socket.socket, index: int, held, beats, boot_until: float = 0.0
    ):
        super().__init__(config)
        self.listener, self.index, self.held, self.beats = listener, index, held, beats
        self.boot_until = boot_until
        self._tasks: list[asyncio.Task] = []

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets=[])  # the app's lifespan; no listening socket of uvicorn's own
        if self.should_exit:
            return
        self._tasks = [asyncio.create_task(self._accept()), asyncio.create_task(self._beat())]

    async def shutdown(self, sockets=None) -> None:
        for task in self._tasks:
            task.cancel()
        self.beats[self.index] = 0.0  # no longer a candidate
        await super().shutdown(sockets=None)

    def _tell(self) -> None:
        self.held[self.index] = len(self.server_state.connections)
        self.beats[self.index] = time.monotonic()

    def ahead(self) -> bool:
        """Whether another live worker holds fewer open connections than this one."""
        now, mine = time.monotonic(), self.held[self.index]
        for i in range(len(self.held)):
            if i == self.index:
                continue
            if self.beats[i] == 0.0:  # not up yet
                if now < self.boot_until and mine > 0:
                    return True
            elif now - self.beats[i] < ALIVE_S and self.held[i] < mine:
                return True
        return False

    async def _beat(self) -> None:
        while True:
            self._tell()
            await asyncio.sleep(BEAT_S)

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        config = self.config
        protocol = functools.partial(
            config.http_protocol_class, config=config, server_state=self.server_state, app_state=self.lifespan.state
        )
        while True:
            self._tell()
            if self.ahead():
                await asyncio.sleep(WAIT_S)
                continue
            try:
                conn, _ = await loop.sock_accept(self.listener)
            except OSError as e:  # out of file descriptors, a connection reset before it was taken
                log.warning("accept failed: %s", e)
                await asyncio.sleep(0.05)
                continue
            try:
                await loop.connect_accepted_socket(protocol, conn)
            except OSError as e:
                log.warning("connection dropped as it was taken: %s", e)
                conn.close()
            await asyncio.sleep(0)  # the protocol counts itself in server_state.connections


def _worker_main(listener: socket.socket, index: int, held, beats, boot_until: float, parent: int) -> None:
    """One worker process: the shared socket, its own SkillBase (``worker_app``), until SIGTERM."""
    # Out of the terminal's process group: Ctrl-C reaches the parent alone, which stops each worker
    # with one SIGTERM (a second signal makes uvicorn skip its shutdown, and the store's close with it).
    os.setpgrp()
    _stop_with(parent)
    listener.setblocking(False)
    config = uvicorn.Config(
        "skillbase.mcp_server.workers:worker_app", factory=True, log_level="warning", lifespan="on", backlog=BACKLOG
    )
    BalancedServer(config, listener, index, held, beats, boot_until).run()


def worker_app() -> ASGIApp:
    """The app of one worker process (uvicorn calls it in each): its own SkillBase over the store."""
    from skillbase.mcp_server.http import http_app
    from skillbase.mcp_server.server import build_server

    from skillbase.api import SkillBase
    from skillbase.config import Settings
    from skillbase.ui import build_app

    raw = os.environ.get(ENV)
    if not raw:
        raise ConfigError(f"{ENV} is not set: worker_app is started by `skillbase serve --workers N`")
    asked = json.loads(raw)
    sb = SkillBase(Settings.model_validate(asked["settings"]))
    try:
        server = build_server(sb, workspace=asked["workspace"], settle_heap=True)
        app = http_app(
            server,
            host=asked["host"],
            port=asked["port"],
            token=sb.settings.http_token,
            allowed_hosts=asked["allowed_hosts"],
            ui=build_app(sb, warm=True),
            stateless=True,
        )
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
