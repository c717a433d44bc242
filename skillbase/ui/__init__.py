"""The curation web UI: server-rendered pages over ``skillbase.api`` (tasks and their
lineages, attempts, skills and their history, the review queue, recall), each also served as
JSON, with curation actions that go through the same SkillBase operations as the CLI.

    skillbase ui                                   # http://127.0.0.1:8766/ui/
    skillbase serve --transport http               # the same pages under /ui, beside /mcp

Both serve it behind the HTTP guards (``skillbase.web``): a non-loopback address needs
SKILLBASE_TOKEN; every request then carries it as a bearer token, or a browser logs in at
``/ui/login`` (token and name) for a session cookie; the Host and Origin headers are checked
against loopback, the bound host and ``--allow-host`` names, and every form carries a CSRF
token.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_app", "standalone_app", "serve_ui"]


def build_app(sb: Any, *, warm: bool = False):
    """The UI's ASGI app over a SkillBase (no access control of its own; see ``standalone_app``);
    ``warm`` prepares the tasks list's aggregates in the background now."""
    from skillbase.ui.app import build_app as build

    return build(sb, warm=warm)


def standalone_app(
    sb: Any, *, host: str, port: int, token: str | None, allowed_hosts: list[str] = (), warm: bool = False
):
    """The UI under ``/ui`` (``/`` redirects there) behind the MCP transport's token, Host and
    Origin rules; ConfigError for a non-loopback ``host`` without a token."""
    from starlette.applications import Starlette
    from starlette.responses import RedirectResponse
    from starlette.routing import Route

    from skillbase.web import PathDispatch, guard_app

    # The same dispatch as under `serve --transport http`, so every URL is the same in both.
    root = Starlette(routes=[Route("/", lambda request: RedirectResponse("/ui/"))])
    app = PathDispatch(root, "/ui", build_app(sb, warm=warm))
    return guard_app(app, host=host, port=port, token=token, allowed_hosts=list(allowed_hosts))


def serve_ui(
    sb: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    token: str | None = None,
    allowed_hosts: list[str] = (),
    log_level: str = "warning",
) -> None:
    """Serve the UI until interrupted (blocking)."""
    import uvicorn

    app = standalone_app(sb, host=host, port=port, token=token, allowed_hosts=list(allowed_hosts), warm=True)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level)).run()
