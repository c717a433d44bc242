"""The curation UI as a Starlette app: server-rendered Jinja pages over ``skillbase.ui.pages``,
each also served as JSON (``?format=json``, or ``Accept: application/json``) by the same
handler. Pages work without JavaScript; the figures are drawn by plotly.js, served from the
installed plotly package. Curation actions are plain HTML forms (POST, then a redirect) that
call the same SkillBase operations as ``skillbase skills approve|deprecate|rollback|merge``,
and each requires a reason.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlencode

import plotly
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from skillbase import web
from skillbase.api import SkillBase
from skillbase.errors import Forbidden, InvalidInput, NotFound, SkillbaseError
from skillbase.ui import pages

log = logging.getLogger("skillbase.ui")

HERE = Path(__file__).parent
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
STATUS = {Forbidden: 403, InvalidInput: 400, NotFound: 404}
TITLES = {
    400: "Not a valid request",
    403: "Not allowed",
    404: "Not found",
    405: "Not a page to open",
    500: "Something went wrong",
}


def duration(ms: float | None) -> str:
    """A time in the unit its size calls for: 4.25 µs, 812 µs, 1.234 ms, 28.1 ms."""
    if ms is None:
        return "—"
    us = ms * 1e3
    if us < 999.5:  # from 999.5 µs, 3 digits of µs would read "1e+03 µs"
        return f"{us:.3g} µs" if us >= 1 else f"{us:.2g} µs"
    if ms < 999.95:
        return f"{ms:.4g} ms"
    return f"{ms / 1e3:.3g} s" if ms < 999_500 else f"{ms / 1e3:,.0f} s"


# A time a report's own text prints (check details, notes): "3294.66 µs", "3.0-3.2 ms".
_TIME_IN_TEXT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s?[-–]\s?(\d+(?:\.\d+)?))?\s?(µs|ms)\b")


def times_in_text(text: str | None) -> str:
    """The toolchain's text (written in µs for the agent) with each time as ``duration`` prints it, so
    a check reading "median 4260.99 µs" sits beside a table reading "4.261 ms" as "median 4.261 ms"."""

    def one(m: re.Match) -> str:
        scale = 1e-3 if m.group(3) == "µs" else 1.0
        low = duration(float(m.group(1)) * scale)
        if m.group(2) is None:
            return low
        high = duration(float(m.group(2)) * scale)
        low_value, low_unit = low.split()
        return f"{low_value}–{high}" if high.endswith(f" {low_unit}") else f"{low} – {high}"

    return _TIME_IN_TEXT.sub(one, text or "")


def number(v: Any) -> str:
    """A float as people read it (5.96e-08, 0.0123, 1,234.5), never Python's 17 digits."""
    if v is None:
        return "—"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if v == 0:
        return "0"
    return f"{v:.3g}" if abs(v) < 1e-3 or abs(v) >= 1e6 else f"{v:,.4g}"


def relative(v: float | None) -> str:
    """A relative spread as a percentage with the digits it needs (±0.04%, ±1.2%)."""
    if v is None:
        return "—"
    pct = v * 100
    if 0 < pct < 0.01:
        return "<0.01%"
    return f"{pct:.2g}%" if pct < 1 else f"{pct:.1f}%"


def readable(value: Any) -> Any:
    """``value`` with every float cut to 4 significant digits, for the JSON a page prints as text
    (a compile report's 3.2417502403259277 s reads 3.242)."""
    if isinstance(value, float):
        return float(f"{value:.4g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [readable(v) for v in value]
    return value


def percent_of_sol(v: float | None) -> Markup:
    """% of speed of light; above 100% it is marked and says why, on hover."""
    if v is None:
        return Markup("—")
    if v <= 100:
        return Markup(f"{v:.0f}%")
    return Markup(
        f'<span class="over" title="above the measured bandwidth roof: the roof is calibrated below what '
        f'this kernel reached on this GPU">{v:.0f}%&thinsp;*</span>'
    )


# Scripts only from this app (the inline JSON blocks holding figures are data, not scripts);
# plotly.js sets inline styles on what it draws.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")


def _curator(request: Request, form: dict[str, str]) -> str:
    """Who takes a curation action: the name given at the login page (a session), else the name an API
    client sends, else an anonymous local user (no token is set: the server is on loopback)."""
    session = getattr(request.state, "curator", None)
    if session and session != "token holder":
        return session
    name = " ".join((form.get("curator") or "").split())[:80]
    return name or session or "anonymous (web UI on loopback)"


def _reason(form: dict[str, str]) -> str:
    reason = (form.get("reason") or "").strip()
    if not reason:
        raise InvalidInput("a curation action needs a reason", hint="say why in the reason field")
    return reason


def wants_json(request: Request) -> bool:
    """JSON when asked for by ``?format=json`` or an Accept header that prefers it to HTML."""
    if request.query_params.get("format") == "json":
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


class UI:
    """The pages and actions over one SkillBase."""

    def __init__(self, sb: SkillBase):
        self.sb = sb
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        env = self.templates.env
        env.filters["markdown"] = lambda text: Markup(_markdown.render(text or ""))
        env.filters["x"] = lambda v: "—" if v is None else f"{v:.2f}x"
        env.filters["pct"] = lambda v: "—" if v is None else f"{v:.0f}%"
        env.filters["sol"] = percent_of_sol
        env.filters["ms"] = duration  # every time on every page: µs below a millisecond, ms above
        env.filters["num"] = number
        env.filters["times"] = times_in_text
        env.filters["rel"] = relative
        env.filters["when"] = lambda v: (v or "")[:19].replace("T", " ")
        env.filters["readable_json"] = lambda v: json.dumps(readable(v), indent=1, ensure_ascii=False)
        env.filters["tojson_figure"] = lambda fig: Markup(json.dumps(fig, separators=(",", ":")).replace("</", "<\\/"))
        env.globals["query"] = _query

    # -- plumbing -------------------------------------------------------------

    def render(
        self,
        request: Request,
        template: str,
        data: dict[str, Any],
        extra: Callable[[], dict[str, Any]] | None = None,
        status: int = 200,
    ) -> Response:
        """The page's data as JSON, or rendered with ``template`` (plus ``extra()``: figures)."""
        if wants_json(request):
            return JSONResponse(data, status_code=status)
        csrf, new_cookie = web.csrf_token(request)
        context = {
            **data,
            **(extra() if extra else {}),
            "json_url": _query(request, format="json"),
            "csrf": csrf,
            "curator": getattr(request.state, "curator", None),
        }
        response = self.templates.TemplateResponse(request, template, context, status_code=status)
        response.headers["content-security-policy"] = CSP
        if new_cookie:
            response.headers.append("set-cookie", new_cookie)
        return response

    def error(self, request: Request, e: SkillbaseError, status: int | None = None) -> Response:
        """The site's error page, titled in words (JSON: the error's class, message and hint)."""
        status = status or next((code for cls, code in STATUS.items() if isinstance(e, cls)), 500)
        return self.render(
            request, "error.html", e.to_dict(), status=status, extra=lambda: {"title": TITLES.get(status, TITLES[500])}
        )

    def failure(self, request: Request, e: Exception) -> Response:
        """An unexpected exception: logged with its traceback, and the site's error page instead of a bare 500."""
        log.exception("the UI failed on %s %s", request.method, request.url.path)
        return self.error(
            request,
            SkillbaseError(
                f"the server could not build this page ({type(e).__name__})",
                hint="the server's log has the traceback; reload, or report it with the page's address",
            ),
        )

    async def not_found(self, request: Request, exc: Exception) -> Response:
        """Any path under the UI that is no page: the site's error page (JSON for JSON clients)."""
        return self.error(
            request,
            NotFound(f"no page at {request.url.path}", hint="the tasks list, skills and review queue are linked above"),
        )

    async def not_allowed(self, request: Request, exc: Exception) -> Response:
        """A visit to an address that only takes a form (a curation action): the site's error page."""
        allow = getattr(exc, "headers", None) or {}
        response = self.error(
            request,
            InvalidInput(
                f"{request.url.path} takes {allow.get('Allow', 'another method')}, not {request.method}",
                hint="curation actions are taken with the forms on a skill's page or in the review queue",
            ),
            status=405,
        )
        response.headers.update(allow)
        return response

    def handle(self, fn: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                return fn(request)
            except SkillbaseError as e:
                return self.error(request, e)
            except Exception as e:
                return self.failure(request, e)

        endpoint.__name__ = fn.__name__
        return endpoint

    # -- pages ----------------------------------------------------------------

    def tasks(self, request: Request) -> Response:
        return self.render(request, "tasks.html", pages.tasks(self.sb, dict(request.query_params)))

    def task(self, request: Request) -> Response:
        name = request.path_params["name"]
        data = pages.task(self.sb, name, dict(request.query_params))
        url = str(request.url_for("attempt", attempt_id="ATTEMPT")).replace("ATTEMPT", "{id}")
        return self.render(request, "task.html", data, lambda: {"figures": pages.task_figures(data, url)})

    def attempt(self, request: Request) -> Response:
        return self.render(request, "attempt.html", pages.attempt(self.sb, request.path_params["attempt_id"]))

    def skills(self, request: Request) -> Response:
        return self.render(request, "skills.html", pages.skills(self.sb, dict(request.query_params)))

    def skill(self, request: Request) -> Response:
        data = pages.skill(self.sb, request.path_params["name"])
        data["done"] = request.query_params.get("done")
        return self.render(request, "skill.html", data)

    def review(self, request: Request) -> Response:
        data = pages.review(self.sb)
        data["done"] = request.query_params.get("done")
        return self.render(request, "review.html", data)

    def search(self, request: Request) -> Response:
        return self.render(request, "search.html", pages.search(self.sb, dict(request.query_params)))

    # -- actions --------------------------------------------------------------

    async def act(self, request: Request) -> Response:
        """POST /skills/{name}/{action}: approve, deprecate, reject, rollback or merge, with a reason;
        then a redirect to the skill page (or the review queue, when it came from there)."""
        import anyio.to_thread

        name, action = request.path_params["name"], request.path_params["action"]
        form = {k: str(v) for k, v in (await request.form()).items()}
        if not web.check_csrf(request, form):
            return self.error(
                request,
                Forbidden(
                    "this form is stale or came from another page", hint="reload the page and take the action again"
                ),
            )
        try:
            done = await anyio.to_thread.run_sync(self._act, name, action, form, _curator(request, form))
        except SkillbaseError as e:
            return self.error(request, e)
        except Exception as e:
            return self.failure(request, e)
        if wants_json(request):
            return JSONResponse(done)
        back = "review" if form.get("back") == "review" else "skill"
        target = request.url_for("review") if back == "review" else request.url_for("skill", name=done["skill"])
        return RedirectResponse(f"{target}?{urlencode({'done': done['message']})}", status_code=303)

    def _act(self, name: str, action: str, form: dict[str, str], curator: str) -> dict[str, Any]:
        sb = self.sb
        if action == "approve":
            s = sb.approve_skill(name, curator=curator, reason=_reason(form))
            return {"skill": s.name, "version": s.version, "message": f"approved {s.name} (version {s.version})"}
        if action in ("deprecate", "reject"):
            reason = _reason(form)
            s = sb.deprecate_skill(
                name,
                author=curator,
                reason=f"rejected: {reason}" if action == "reject" else reason,
                superseded_by=(form.get("superseded_by") or "").strip() or None,
            )
            verb = "rejected" if action == "reject" else "deprecated"
            return {"skill": s.name, "version": s.version, "message": f"{verb} {s.name} (version {s.version})"}
        if action == "rollback":
            try:
                version = int(form.get("version") or "")
            except ValueError:
                raise InvalidInput("rollback needs the version to return to", hint="pick a version") from None
            s = sb.rollback_skill(name, version, author=curator, reason=_reason(form))
            return {
                "skill": s.name,
                "version": s.version,
                "message": f"rolled {s.name} back to version {version} (now version {s.version})",
            }
        if action == "merge":
            other = (form.get("other") or "").strip()
            into = (form.get("into") or "").strip() or name
            if not other:
                raise InvalidInput("merge needs the other skill", hint="pick the skill to merge with")
            r = sb.merge_skills(name, other, into=into, author=curator, reason=_reason(form))
            return {
                "skill": r.merged.name,
                "version": r.merged.version,
                "message": f"merged {name} and {other} into {r.merged.name}",
            }
        raise NotFound(f"no action {action!r}", hint="approve, deprecate, reject, rollback or merge")

    # -- assets ---------------------------------------------------------------

    def plotly_js(self, request: Request) -> Response:
        if not PLOTLY_JS.is_file():
            return Response("plotly.min.js is not in the installed plotly package", status_code=404)
        return FileResponse(PLOTLY_JS, media_type="text/javascript", headers={"cache-control": "public, max-age=86400"})


def _warm(sb: SkillBase) -> None:
    try:
        sb.views.facets()
        sb.warm_up()  # the model and indexes the search page's recall needs
    except Exception as e:  # a store that cannot be read shows its error on the first page instead
        log.warning("could not prepare the UI's reads: %s", e)


def _query(request: Request, **changes: Any) -> str:
    """This page's URL with query parameters changed (None removes one)."""
    params = dict(request.query_params)
    for k, v in changes.items():
        if v is None:
            params.pop(k, None)
        else:
            params[k] = str(v)
    path = request.url.path
    return f"{path}?{urlencode(params)}" if params else path


def build_app(sb: SkillBase, *, warm: bool = False) -> Starlette:
    """The curation UI over ``sb``, to be mounted (``/ui`` by ``skillbase serve --transport http``
    and ``skillbase ui``). It adds no access control of its own: mount it behind
    ``skillbase.web.guard_app`` or the MCP app's checks. With ``warm``, the tasks
    list's aggregates (one scan of the attempts, seconds at 100k) and the retriever are
    prepared now in the background instead of on the first request."""
    ui = UI(sb)
    if warm:
        threading.Thread(target=_warm, args=(sb,), name="skillbase-ui-warm", daemon=True).start()
    h = ui.handle
    routes = [
        Route("/", h(ui.tasks), name="home"),
        Route("/tasks", h(ui.tasks), name="tasks"),
        Route("/tasks/{name:path}", h(ui.task), name="task"),
        Route("/attempts/{attempt_id}", h(ui.attempt), name="attempt"),
        Route("/skills", h(ui.skills), name="skills"),
        Route("/skills/{name}", h(ui.skill), name="skill"),
        Route("/skills/{name}/{action}", ui.act, methods=["POST"], name="act"),
        Route("/review", h(ui.review), name="review"),
        Route("/search", h(ui.search), name="search"),
        Route("/assets/plotly.min.js", ui.plotly_js, name="plotly"),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={404: ui.not_found, 405: ui.not_allowed})
