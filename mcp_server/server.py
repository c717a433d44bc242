"""The MCP server: the tool catalog (``skillbase.tools``), three resources and one prompt
over one ``SkillBase``. Nothing here decides anything; it translates.

    from skillbase import SkillBase
    from skillbase.mcp_server.server import build_server

    sb = SkillBase()
    server = build_server(sb)          # an mcp MCPServer; server.run() serves stdio
"""

from __future__ import annotations

import gc
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict
from skillbase.mcp_server.prompts import INSTRUCTIONS, optimize_kernel_prompt

from skillbase.config import usable_cores
from skillbase.errors import NotFound, SkillbaseError
from skillbase.tools import TOOLS, CallContext, Progress, ToolSpec
from skillbase.version import __version__

if TYPE_CHECKING:
    from skillbase.api import SkillBase

log = logging.getLogger("skillbase.mcp")

WORK_MS_KEY = "skillbase/work_ms"
"""``_meta`` key of every tool result: milliseconds spent in the API call itself."""


class _RawArguments(ArgModelBase):
    """Hands the tool the arguments exactly as sent: the catalog validates them, with
    messages that name the field and the fix (and reject unknown fields)."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return {"arguments": dict(self.model_extra or {})}


def error_text(e: SkillbaseError) -> str:
    """What the model reads when a tool fails: what went wrong, then what to do."""
    text = f"{type(e).__name__}: {e.message}"
    return f"{text}. Next step: {e.hint}" if e.hint else text


def _client_name(ctx: Context) -> str:
    try:
        params = ctx.session.client_params
        return params.client_info.name if params and params.client_info else "mcp-client"
    except Exception:  # no session (in-process calls) or an older client
        return "mcp-client"


def _progress_relay(ctx: Context) -> Progress:
    """A progress callback for the API's worker thread that sends MCP progress notifications."""

    def relay(fraction: float, message: str) -> None:
        try:
            anyio.from_thread.run(ctx.report_progress, fraction, 1.0, message)
        except Exception as e:  # a client that went away must not fail the benchmark
            log.debug("progress not delivered: %s", e)

    return relay


# Lookups by key in the ledger or the skill catalog: under a millisecond of work, never a search or the
# model. They get threads of their own so they never queue behind searches and writes; a call its
# catalog entry calls quick (``ToolSpec.quick``) runs on the event loop once the store is open.
QUICK_TOOLS = frozenset({"attempt_history", "get_skill", "load_task"})
QUICK_THREADS = 2
# Writes that answer once the ledger commit is durable (the follower embeds and indexes after): a
# few milliseconds of work, most of it waiting for the group commit's fsync. Behind searches they
# waited for a free thread 10x longer than they worked (record_lesson p50 146-164 ms round trip at 16
# clients, 11 ms in the tool); in a pool of their own, 38 ms.
WRITE_TOOLS = frozenset({"record_lesson"})
WRITE_THREADS = 4


# Searches: CPU-bound Python that shares one interpreter lock, so threads past the cores only
# interleave on it. With 4 on 2 cores, every search thread that held the lock made the event loop
# and the short calls wait their turn behind it at each of their waits for I/O: attempt_history p95
# 45-87 ms (median 62) at 16 clients; with 2, 39-62 ms (median 43) at about the same throughput, recall
# p95 4 % longer (docs/performance.md). Searches queue for a thread instead.
SEARCH_TOOLS = frozenset({"recall", "suggest_next"})
# The rest (compile_kernel waits seconds for a compiler in a subprocess; propose_skill writes a
# file): not searches, so never in the way of one.
OTHER_THREADS = 4


def tool_threads() -> int:
    """Threads that run searches at once (SKILLBASE_TOOL_THREADS; default the usable cores, 2 to 4).
    Long-running tools (benchmarks), key lookups (QUICK_TOOLS), lesson writes (WRITE_TOOLS) and
    the other tools have pools of their own."""
    return int(os.environ.get("SKILLBASE_TOOL_THREADS") or max(2, min(4, usable_cores())))


# Per caller, the ledger positions of its writes: each tool call runs in a context of its own, and a
# caller's later calls must see what its earlier ones wrote (record_lesson, then recall). A caller is
# the client's name on its connection: over HTTP the MCP session (Mcp-Session-Id) when the client
# keeps one, else the TCP connection (the 2026-07-28 protocol has no session; an SDK client sends its
# calls over one kept-alive connection); over stdio the one client of the process. Callers wait only
# for their own fresh writes; everyone else's appear within the store's 1 s bound.
_CALLERS_MAX = 4096


def caller_key(ctx: Context) -> str:
    """Who is calling, for read-your-writes: the client's name and, over HTTP, its session or connection."""
    name = _client_name(ctx)
    try:
        request = ctx.request_context.request
    except Exception:  # no request context (in-process calls)
        request = None
    if request is None:
        return name
    headers = getattr(request, "headers", None) or {}
    session = headers.get("mcp-session-id")
    if session:
        return f"{name} session {session}"
    peer = getattr(request, "client", None)
    return f"{name} at {peer.host}:{peer.port}" if peer else name


def _writes_of(ctx: Context, callers: dict[str, dict[str, int]]) -> dict[str, int]:
    """The write positions of this call's caller (the least recently seen is forgotten past _CALLERS_MAX)."""
    key = caller_key(ctx)
    seen = callers.pop(key, None)
    if seen is None:
        seen = {}
        if len(callers) >= _CALLERS_MAX:
            callers.pop(next(iter(callers)))
    callers[key] = seen
    return seen


def _tool(
    spec: ToolSpec,
    sb: SkillBase,
    workspace: Path,
    limiter=None,
    callers: dict[str, dict[str, int]] | None = None,
) -> Tool:
    callers = {} if callers is None else callers

    async def handler(arguments: dict, ctx: Context) -> CallToolResult:
        call = CallContext(
            progress=_progress_relay(ctx) if spec.long_running else None, agent=_client_name(ctx), workspace=workspace
        )
        seen = _writes_of(ctx, callers)

        def work(args=None):
            start = time.perf_counter()
            with sb.caller_scope(seen):  # the client's earlier writes are visible to this call's searches
                out = spec.fn(sb, args if args is not None else spec.validate(arguments), call)
            return out, (time.perf_counter() - start) * 1e3

        try:
            args = spec.validate(arguments) if spec.quick is not None and sb.memory_open else None
            if args is not None and spec.quick(sb, args, call):
                # A lookup by key in an open store: answered here, on the event loop. Handed to a
                # thread, it waited for the interpreter lock twice more (there and back) behind the
                # searches: attempt_history p95 53-69 ms that way, 31-36 here (16 clients).
                out, work_ms = work(args)
            else:
                out, work_ms = await anyio.to_thread.run_sync(
                    work, args, limiter=None if spec.long_running else limiter
                )
        except SkillbaseError as e:
            raise ToolError(error_text(e)) from None
        except Exception as e:  # a bug or a broken environment: this call fails, the server stays up
            log.exception("tool %s failed", spec.name)
            raise ToolError(
                f"internal error {type(e).__name__}: {e}. Next step: the server is still running and "
                "nothing stored was lost; retry once, then report it with `skillbase memory stats` "
                "output"
            ) from None
        data = out.model_dump(mode="json")
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(data))],
            structured_content=data,
            _meta={WORK_MS_KEY: round(work_ms, 3)},
        )

    tool = Tool.from_function(
        handler,
        name=spec.name,
        title=spec.title,
        description=spec.description,
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=False,
            idempotent_hint=spec.read_only,
            open_world_hint=False,
        ),
    )
    # The catalog is the contract: its schemas are what clients see, and its validation what they get.
    tool.parameters = spec.input_schema()
    # The output schema is published without the model: every result is built by the model itself, and
    # the SDK would otherwise validate each one again.
    tool.fn_metadata = FuncMetadata(arg_model=_RawArguments, output_schema=spec.output_schema())
    return tool


def _warm(sb: SkillBase, settle_heap: bool = False) -> None:
    try:
        sb.warm_up()
        if settle_heap:
            sb.list_tasks()  # the built-in tasks, and torch with them: loaded before the heap is frozen
    except Exception as e:  # the first real call reports the problem with its own context
        log.warning("warm-up failed: %s", e)
    if settle_heap:
        freeze_heap()


def freeze_heap() -> None:
    """Collect once, then leave everything alive now out of every later collection (``gc.freeze``).

    A warm server holds some 390,000 objects (torch, the model, the store, the graph) that live as
    long as it does, and CPython's full collection walks all of them: 0.2 s with the interpreter
    lock held, every thread stopped, a few times a minute under load. After the freeze a full
    collection walks only what was made since."""
    gc.collect()
    gc.freeze()
    log.info("heap settled: %d objects frozen", gc.get_freeze_count())


def build_server(
    sb: SkillBase,
    *,
    workspace: str | Path | None = None,
    warm: bool = True,
    settle_heap: bool = False,
    catalog: Sequence[ToolSpec] = TOOLS,
) -> MCPServer:
    """An MCPServer exposing the catalog (``catalog``: these tool specs; every tool of
    ``skillbase.tools`` by default) over ``sb``.

    Task and solution paths in tool calls must lie inside ``workspace`` (default: the
    current directory). With ``warm``, the store and retriever open in the background
    when a client connects, so the first recall is as fast as the rest. ``settle_heap``
    (for a process that is only this server: ``skillbase serve``) also loads the built-in
    tasks in that warm-up and then freezes the heap (``freeze_heap``). The caller owns
    ``sb`` and closes it after the server stops.
    """
    root = Path(workspace or Path.cwd()).resolve()

    warmed = threading.Event()
    searches, quick = anyio.CapacityLimiter(tool_threads()), anyio.CapacityLimiter(QUICK_THREADS)
    writes, other = anyio.CapacityLimiter(WRITE_THREADS), anyio.CapacityLimiter(OTHER_THREADS)
    callers: dict[str, dict[str, int]] = {}  # read-your-writes, per caller (caller_key)

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[None]:
        # Over HTTP this runs once per session; warming once per process is enough.
        if warm and not warmed.is_set():
            warmed.set()
            threading.Thread(target=_warm, args=(sb, settle_heap), name="skillbase-warm-up", daemon=True).start()
        yield

    pool = {
        **{name: searches for name in SEARCH_TOOLS},
        **{name: quick for name in QUICK_TOOLS},
        **{name: writes for name in WRITE_TOOLS},
    }
    tools = [_tool(spec, sb, root, pool.get(spec.name, other), callers) for spec in catalog]
    server = MCPServer(
        "skillbase",
        title="skillbase",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        tools=tools,
        lifespan=lifespan,
    )
    _add_resources(server, sb)
    server.prompt(
        name="optimize-kernel",
        title="Optimize a GPU kernel",
        description="Walks you through one optimization loop on a task: load, recall, write, compile, "
        "benchmark, record the lesson, choose the next step.",
    )(optimize_kernel_prompt)
    return server


async def _read(fn, *args) -> str:
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except NotFound as e:
        raise ResourceNotFoundError(error_text(e)) from None


def _add_resources(server: MCPServer, sb: SkillBase) -> None:
    @server.resource(
        "skill://{name}",
        name="skill",
        title="A skill's SKILL.md",
        mime_type="text/markdown",
        description="The full SKILL.md of a skill: frontmatter and body.",
    )
    async def skill_resource(name: str) -> str:
        return await _read(sb.skill_markdown, name)

    @server.resource(
        "task://{name}",
        name="task",
        title="A built-in task",
        mime_type="text/markdown",
        description="A built-in task: its metadata (shapes, dtype, bytes, FLOPs, tolerance) and the reference source.",
    )
    async def task_resource(name: str) -> str:
        return await _read(_task_markdown, sb, name)

    @server.resource(
        "attempt://{attempt_id}",
        name="attempt",
        title="One attempt in full",
        mime_type="application/json",
        description="An attempt: its source, compile and benchmark reports, lineage and techniques.",
    )
    async def attempt_resource(attempt_id: str) -> str:
        return await _read(lambda: sb.get_attempt(attempt_id).model_dump_json(indent=1))


def _task_markdown(sb: SkillBase, name: str) -> str:
    info = sb.task(name)
    meta = info.model_dump(mode="json", exclude={"path", "solutions", "source_hash"})
    return (
        f"# Task {info.name}\n\n{info.description}\n\n```json\n{json.dumps(meta, indent=1)}\n```\n\n"
        f"Built-in solutions: {', '.join(sorted(info.solutions)) or 'none'}\n\n"
        f"```python\n{sb.task_source(info)}\n```\n"
    )
