"""skillbase's MCP server: the tools of ``skillbase.tools``, the resources ``skill://{name}``,
``task://{name}`` and ``attempt://{id}``, and the prompt ``optimize-kernel``, over stdio (the
default, what Claude Code and Cursor start) or streamable HTTP.

    skillbase serve                                   # stdio
    SKILLBASE_TOKEN=... skillbase serve --transport http --host 0.0.0.0 --port 8765
    SKILLBASE_CHROMA_URL=http://127.0.0.1:8000 skillbase serve --transport http --workers 4   # one port, 4 processes
    python -m skillbase.mcp_server                    # the same as `skillbase serve`
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

__all__ = ["build_server", "serve"]


def build_server(*args, **kwargs):
    """See ``skillbase.mcp_server.server.build_server``."""
    from skillbase.mcp_server.server import build_server as build

    return build(*args, **kwargs)


def serve(
    transport: Literal["stdio", "http"] = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    allowed_hosts: list[str] = (),
    workspace: str | Path | None = None,
    settings=None,
    workers: int = 1,
) -> None:
    """Run the server until the client disconnects (stdio) or it is interrupted (HTTP).

    One SkillBase per process, closed on the way out. Over HTTP the token is
    ``settings.http_token`` (SKILLBASE_TOKEN); a non-loopback ``host`` without one is
    refused before anything starts. Over HTTP the curation UI (``skillbase.ui``) is served
    under ``/ui`` behind the same token and Host / Origin rules. With ``workers`` > 1 (HTTP
    only) that many processes serve the store on one port (``skillbase.mcp_server.workers``).
    """
    from skillbase.config import Settings

    settings = settings or Settings.from_env()
    if workers != 1:  # before importing the store here: each worker process opens its own
        from skillbase.mcp_server.workers import serve_workers

        serve_workers(
            transport,
            workers,
            host=host,
            port=port,
            allowed_hosts=list(allowed_hosts),
            workspace=workspace,
            settings=settings,
        )
        return
    from skillbase.mcp_server.http import refuse_open_address, serve_http
    from skillbase.mcp_server.server import build_server as build

    from skillbase.api import SkillBase

    if transport != "stdio":
        # Refused before anything starts: the UI's warm-up thread would otherwise be reading the
        # store while the refusal closes it (a read on a connection being closed crashed the process).
        refuse_open_address(host, settings.http_token)
    sb = SkillBase(settings)
    try:
        server = build(sb, workspace=workspace, settle_heap=True)
        if transport == "stdio":
            server.run("stdio")
        else:
            from skillbase.ui import build_app

            serve_http(
                server,
                host=host,
                port=port,
                token=settings.http_token,
                allowed_hosts=list(allowed_hosts),
                ui=build_app(sb, warm=True),
            )
    finally:
        sb.close()
