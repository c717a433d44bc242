"""``skillbase``: the command line over ``skillbase.api`` (typer + rich).

Tables and progress bars for people; ``--json`` on every command for machines (the
result model's JSON and nothing else on stdout). Errors are one red line and a hint
on stderr, and an exit code that says what kind of failure it was:

    0 ok   1 error   2 bad input   3 not found   4 toolchain unavailable   5 worker failure
    6 store error   7 configuration   8 agent error   9 the candidate or check failed
"""

from __future__ import annotations

import enum
import getpass
import inspect
import json
import logging
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape  # messages name things like skillbase[ray]: text, not markup
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from skillbase.errors import InvalidInput, NotFound, SkillbaseError
from skillbase.models import BenchmarkResult

if TYPE_CHECKING:
    from skillbase.api import SkillBase

CHECK_FAILED = 9
"""Exit code when the command worked but what it checked did not pass (a candidate, a lint)."""

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

app = typer.Typer(
    name="skillbase",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    help="Compile, verify and benchmark GPU kernels, remember every attempt, recall what worked.",
    epilog="Exit codes: 0 ok, 1 error, 2 bad input, 3 not found, 4 toolchain unavailable, "
    "5 worker failure, 6 store error, 7 configuration, 8 agent error, 9 check failed.",
)
tasks_app = typer.Typer(no_args_is_help=True, help="The built-in tasks.")
skills_app = typer.Typer(no_args_is_help=True, help="Curate the skill library.")
memory_app = typer.Typer(no_args_is_help=True, help="The store: stats, export, import, reindex.")
app.add_typer(tasks_app, name="tasks")
app.add_typer(skills_app, name="skills")
app.add_typer(memory_app, name="memory")

Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON; nothing else goes to stdout.")]
Author = Annotated[Optional[str], typer.Option("--author", help="Who makes the change (default: your user name).")]


# ---------------------------------------------------------------------------
# Plumbing: one SkillBase per invocation, errors to exit codes, JSON out
# ---------------------------------------------------------------------------


class State:
    """The invocation's settings; the SkillBase is opened on first use and closed at exit."""

    def __init__(self, home: Path | None):
        self.home = home
        self.ray: str | None = None  # a Ray cluster address (`--ray`): evaluations run on its actors
        self._sb: SkillBase | None = None

    def sb(self) -> "SkillBase":
        if self._sb is None:
            from skillbase.api import SkillBase

            if self.ray:
                from skillbase.config import Settings

                home = {"home": self.home.expanduser()} if self.home else {}
                self._sb = SkillBase(Settings.from_env(**home, ray_address=self.ray))
            else:
                self._sb = SkillBase(home=self.home)
        return self._sb

    def close(self) -> None:
        if self._sb is not None:
            self._sb.close()


class _PreparingLine(logging.Handler):
    """Prints the embedding model's one-time preparation (export, quantization) as a status line on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        err.print(f"[dim]{escape(record.getMessage())}[/dim]")


def _show_model_preparation() -> None:
    logger = logging.getLogger("skillbase.memory.onnx_encoder.prepare")
    if not any(isinstance(h, _PreparingLine) for h in logger.handlers):
        logger.addHandler(_PreparingLine(logging.INFO))
        logger.setLevel(logging.INFO)


@app.callback()
def _options(
    ctx: typer.Context,
    home: Annotated[
        Optional[Path], typer.Option("--home", help="Store directory (default $SKILLBASE_HOME or ~/.skillbase).")
    ] = None,
) -> None:
    _show_model_preparation()
    state = State(home)
    ctx.obj = state
    ctx.call_on_close(state.close)


def _sb(ctx: typer.Context) -> "SkillBase":
    return ctx.obj.sb()


def _author(author: str | None) -> str:
    if author:
        return author
    try:
        return getpass.getuser()
    except Exception:  # no user database entry (containers)
        return "curator"


_METAVARS = {bool: "", int: "N", float: "X", str: "TEXT", Path: "PATH"}


def tidy_metavars(typer_app: typer.Typer) -> None:
    """Options' help shows TEXT, N, X, PATH (nothing for a flag) instead of typer's `<bool>`, `<str>` and
    `<list[str]>`: a metavar for every option of every command that names none."""
    import typing

    apps = [typer_app]
    while apps:
        current = apps.pop()
        apps += [g.typer_instance for g in current.registered_groups]
        callbacks = [c.callback for c in current.registered_commands]
        if current.registered_callback is not None:
            callbacks.append(current.registered_callback.callback)
        for cb in filter(None, callbacks):
            defaults = {n: p.default for n, p in inspect.signature(cb).parameters.items()}
            hints = typing.get_type_hints(cb, include_extras=True)
            # The annotations are strings (postponed evaluation): evaluated anew at every look, so the
            # evaluated ones are kept on the function for typer to read, with their metavars set.
            cb.__annotations__.update(hints)
            for name, hint in hints.items():
                infos = [
                    m
                    for m in (*getattr(hint, "__metadata__", ()), defaults.get(name))
                    if isinstance(m, typer.models.ParameterInfo)
                ]
                if not infos or infos[0].metavar is not None or not isinstance(infos[0], typer.models.OptionInfo):
                    continue  # arguments keep typer's display (their name, and the type beside it)
                kind = typing.get_args(hint)[0] if hasattr(hint, "__metadata__") else hint
                if typing.get_origin(kind) in (typing.Union, types.UnionType):  # Optional[X]
                    kind = next(a for a in typing.get_args(kind) if a is not type(None))
                if typing.get_origin(kind) is list:
                    element = typing.get_args(kind)[0]
                    infos[0].metavar = _METAVARS.get(element, "TEXT") or "TEXT"
                elif kind in _METAVARS:
                    infos[0].metavar = _METAVARS[kind]
                elif isinstance(kind, type) and issubclass(kind, enum.Enum):
                    continue  # typer lists the choices
                else:
                    infos[0].metavar = "TEXT"


def to_jsonable(value: Any) -> Any:
    """Models, lists of models and plain values as JSON-ready data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


def run(as_json: bool, work: Callable[[], Any], render: Callable[[Any], int | None]) -> None:
    """Do ``work``; print its result as JSON or through ``render``; map errors to exit codes.

    ``render`` may return an exit code (CHECK_FAILED when the candidate or check failed);
    with ``--json`` the same code is used, computed by render on a silent console.
    """
    try:
        result = work()
    except SkillbaseError as e:
        if as_json:
            print(json.dumps(e.to_dict()))
        err.print(f"[bold red]error:[/] {escape(e.message)}", markup=True, highlight=False)
        if e.hint:
            err.print(f"[yellow]hint:[/] {escape(e.hint)}")
        raise typer.Exit(e.exit_code) from None
    if as_json:
        print(json.dumps(to_jsonable(result), indent=1))
        with out.capture():
            code = render(result)
    else:
        code = render(result)
    if code:
        raise typer.Exit(code)


def progress_bar() -> Progress:
    """A progress bar on stderr, so stdout stays the result."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def with_spinner(message: str, fn: Callable[[], Any]) -> Any:
    with err.status(message):
        return fn()


def table(
    *headers: str, ids: Sequence[str] = ("id", "parent", "name", "a", "b", "kernel"), title: str | None = None
) -> Table:
    """A table whose id columns never wrap, so ids stay whole and copyable."""
    t = Table(title=title)
    for h in headers:
        t.add_column(h, no_wrap=h in ids)
    return t


def _ms(v: float | None) -> str:
    return "-" if v is None else (f"{v * 1e3:.1f} µs" if v < 1 else f"{v:.3f} ms")


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _verdict(v: str) -> str:
    return f"[green]{v}[/]" if v == "correct" else f"[red]{v}[/]"


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise NotFound(f"cannot read {what} {str(path)!r}: {e.strerror}", hint="pass an existing file") from None


# ---------------------------------------------------------------------------
# Setup and serving
# ---------------------------------------------------------------------------


@app.command()
def init(ctx: typer.Context, as_json: Json = False) -> None:
    """Seed the store: technique vocabulary, seed skills and measured experiences (idempotent)."""

    def render(r) -> None:
        out.print(
            f"store [bold]{r.home}[/]: {r.techniques} techniques, {r.skills_total} skills "
            f"({r.skills_added} new), {r.experiences_total} experiences ({r.records_imported} records new) "
            f"in {r.seconds:.1f} s (wall clock)"
        )

    run(as_json, lambda: with_spinner("seeding the store (embedding skills and experiences)", _sb(ctx).init), render)


@app.command()
def serve(
    ctx: typer.Context,
    transport: Annotated[str, typer.Option(help="stdio (what Claude Code and Cursor start) or http.")] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP: address to bind; non-loopback needs SKILLBASE_TOKEN.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP: port.")] = 8765,
    allow_host: Annotated[
        Optional[list[str]],
        typer.Option("--allow-host", help="HTTP: extra Host/Origin name clients use to reach this server."),
    ] = None,
    root: Annotated[
        Optional[Path],
        typer.Option(help="Workspace: task and solution paths in tool calls must lie inside it (default: here)."),
    ] = None,
    ray: Annotated[
        Optional[str],
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Evaluate on this Ray cluster, one actor per GPU (host:6379 or 'auto'; needs skillbase[ray]).",
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            help="HTTP: server processes on the one port (more than 1 needs SKILLBASE_CHROMA_URL, a chroma "
            "server as the shared index)."
        ),
    ] = 1,
    trust_clients: Annotated[
        bool,
        typer.Option(
            "--trust-clients",
            help="HTTP: run clients' candidates even where no sandbox can be built here "
            "(they then run with this server's rights).",
        ),
    ] = False,
) -> None:
    """Run the MCP server (stdio by default; streamable HTTP with --transport http).

    Over HTTP, candidates from remote clients run only in the bubblewrap sandbox: where none can be
    built, evaluating tools answer with an error unless the server was started with --trust-clients."""
    from skillbase.config import Settings
    from skillbase.mcp_server import serve as serve_mcp

    if transport not in ("stdio", "http"):
        _fail(InvalidInput(f"unknown transport {transport!r}", hint="use stdio or http"))
    try:
        if ray:
            from skillbase.toolchain.ray_pool import require_ray

            require_ray()
        settings = Settings.from_env(
            **({"home": ctx.obj.home.expanduser()} if ctx.obj.home else {}),
            **({"ray_address": ray} if ray else {}),
            require_sandbox=transport == "http" and not trust_clients,
        )
        _say_if_unconfined(settings, refused=settings.require_sandbox)
        if transport == "http":
            err.print(
                f"serving MCP on http://{host}:{port}/mcp and the curation UI on http://{host}:{port}/ui/"
                + (f" from {workers} processes" if workers > 1 else "")
                + (" (bearer token required)" if settings.http_token else "")
            )
        serve_mcp(
            transport,
            host=host,
            port=port,
            allowed_hosts=allow_host or [],
            workspace=root,
            settings=settings,
            workers=workers,
        )
    except SkillbaseError as e:
        _fail(e)


def _say_if_unconfined(settings, refused: bool = False) -> None:
    """One yellow line when candidates cannot be jailed here (and what happens to them)."""
    from skillbase.toolchain import sandbox

    jail = sandbox.choose("auto" if settings.sandbox == "bwrap" else settings.sandbox)
    if jail.confined or settings.sandbox == "off" and not refused:
        return
    what = (
        "clients' candidates will be refused (start with --trust-clients to run them unconfined)"
        if refused
        else "candidates run unconfined, with your rights"
    )
    err.print(f"[yellow]no sandbox[/]: {escape(jail.reason)}; {what}")


@app.command()
def ui(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to bind; non-loopback needs SKILLBASE_TOKEN.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8766,
    allow_host: Annotated[
        Optional[list[str]],
        typer.Option("--allow-host", help="Extra Host/Origin name browsers use to reach this server."),
    ] = None,
) -> None:
    """Serve the curation web UI at http://HOST:PORT/ui/ (the same rules as `serve --transport http`)."""
    from skillbase.ui import serve_ui

    try:
        sb = _sb(ctx)
        token = sb.settings.http_token
        err.print(
            f"serving the curation UI on http://{host}:{port}/ui/" + (" (bearer token required)" if token else "")
        )
        serve_ui(sb, host=host, port=port, token=token, allowed_hosts=allow_host or [])
    except SkillbaseError as e:
        _fail(e)


def _fail(e: SkillbaseError) -> None:
    err.print(f"[bold red]error:[/] {escape(e.message)}")
    if e.hint:
        err.print(f"[yellow]hint:[/] {escape(e.hint)}")
    raise typer.Exit(e.exit_code)


@app.command()
def demo(
    ctx: typer.Context,
    task: Annotated[str, typer.Option(help="Built-in task to optimize.")] = "row_softmax",
    as_json: Json = False,
) -> None:
    """Seed a store, start the MCP server over stdio and drive one optimization session through a real
    MCP client, printing what the agent sees."""
    from skillbase.config import Settings
    from skillbase.demo import run_demo

    try:
        settings = Settings.from_env(**({"home": ctx.obj.home.expanduser()} if ctx.obj.home else {}))
        transcript = run_demo(settings, task=task, console=Console(stderr=as_json, soft_wrap=True, highlight=False))
    except SkillbaseError as e:
        _fail(e)
    if as_json:
        print(json.dumps(transcript.model_dump(mode="json"), indent=1))
    if not transcript.ok:
        raise typer.Exit(CHECK_FAILED)


@app.command()
def tools(
    markdown: Annotated[bool, typer.Option("--markdown", help="The tool reference table of docs/tools.md.")] = False,
    as_json: Json = False,
) -> None:
    """The agent-facing tools (what the MCP server and the reference agent expose)."""
    from skillbase.tools import TOOLS, anthropic_tool_definitions, markdown_reference

    if as_json:
        print(json.dumps(anthropic_tool_definitions(), indent=1))
    elif markdown:
        print(markdown_reference())
    else:
        table = Table("tool", "what it does", box=None)
        for t in TOOLS:
            table.add_row(f"[bold]{t.name}[/]", t.description.split(". ")[0] + ".")
        out.print(table)


# ---------------------------------------------------------------------------
# Tasks and the kernel loop
# ---------------------------------------------------------------------------


@tasks_app.command("list")
def tasks_list(ctx: typer.Context, as_json: Json = False) -> None:
    """Every built-in task with its family, dtype, shape and floor inputs."""

    def render(tasks) -> None:
        t = table("name", "family", "dtype", "MB moved", "GFLOP", "solutions")
        for task in tasks:
            t.add_row(
                task.name,
                task.family,
                task.dtype,
                f"{task.bytes_moved / 1e6:.1f}",
                f"{task.flops / 1e9:.2f}",
                ", ".join(sorted(task.solutions)),
            )
        out.print(t)

    run(as_json, lambda: with_spinner("loading tasks", _sb(ctx).list_tasks), render)


@tasks_app.command("show")
def tasks_show(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="Built-in name or task file.")],
    source: Annotated[bool, typer.Option("--source", help="Also print the reference source.")] = False,
    as_json: Json = False,
) -> None:
    """What a task computes, its floor and baselines where measured, and the best attempt so far."""
    sb = _sb(ctx)

    def render(s) -> None:
        i = s.info
        out.print(f"[bold]{i.name}[/] ({i.family}, {i.dtype}, {i.regime}): {i.description}")
        out.print(
            f"inputs {i.input_shapes} -> outputs {i.output_shapes}; {i.bytes_moved / 1e6:.1f} MB moved, "
            f"{i.flops / 1e9:.3f} GFLOP; tolerance atol={i.tolerance.atol:g} rtol={i.tolerance.rtol:g}"
        )
        if i.understanding is not None:
            out.print(f"families: {', '.join(i.families)}")
            out.print(i.understanding.summary)
        if s.hardware:
            base = ", ".join(f"{k} {_ms(v)}" for k, v in s.baselines_ms.items())
            out.print(
                f"on {s.hardware}: floor {_ms(s.floor_ms)} (bytes / measured bandwidth, FLOPs / measured "
                f"rate); baselines (median of CUDA-event timings): {base or 'none'}"
            )
        best = s.best
        out.print(
            f"{s.attempts} attempts"
            + (f"; best {best.id}: {_ms(best.median_ms)}, {_x(best.speedup_vs_eager)} vs eager" if best else "")
        )
        out.print(f"solutions: {', '.join(sorted(i.solutions)) or 'none'}")
        if source:
            out.print(Syntax(sb.task_source(i), "python"))

    run(as_json, lambda: sb.load_task(task), render)


@app.command("compile")
def compile_(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="Built-in name or task file.")],
    solution: Annotated[str, typer.Argument(help="Solution file, or a built-in solution name.")],
    arch: Annotated[str, typer.Option(help="Target architecture.")] = "sm_90",
    as_json: Json = False,
) -> None:
    """Compile a candidate without running it: registers, spills and shared memory per kernel."""

    def render(r) -> int | None:
        t = table("kernel", "language", "registers", "spill st/ld B", "smem B", "warps", "stages", "config")
        for k in r.kernels:
            t.add_row(
                k.name,
                k.language,
                str(k.registers or "-"),
                f"{k.spill_store_bytes}/{k.spill_load_bytes}",
                str(k.shared_bytes),
                str(k.num_warps or "-"),
                str(k.num_stages or "-"),
                json.dumps(k.config),
            )
        out.print(f"{'[green]compiled[/]' if r.ok else '[red]failed[/]'} for {r.arch} in {r.duration_s:.1f} s")
        if r.kernels:
            out.print(t)
        for d in r.diagnostics:
            where = f"{d.file or ''}:{d.line}" if d.line else ""
            out.print(f"[{'red' if d.severity == 'error' else 'yellow'}]{d.severity}[/] {where} {d.message}")
        return None if r.ok else CHECK_FAILED

    run(as_json, lambda: with_spinner("compiling", lambda: _sb(ctx).compile(task, solution, arch=arch)), render)


@app.command()
def bench(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="Built-in name or task file.")],
    solution: Annotated[str, typer.Argument(help="Solution file, or a built-in solution name.")],
    device: Annotated[str, typer.Option(help="auto, cuda, cuda:N or cpu (verify only).")] = "auto",
    parent: Annotated[Optional[str], typer.Option("--parent", help="Attempt this one improves on.")] = None,
    technique: Annotated[
        Optional[list[str]], typer.Option("--technique", "-t", help="Technique applied (repeat).")
    ] = None,
    session: Annotated[Optional[str], typer.Option(help="Label grouping a run's attempts.")] = None,
    record: Annotated[bool, typer.Option(help="Record the attempt in the store.")] = True,
    as_json: Json = False,
) -> None:
    """Verify and time a candidate against the reference and record the attempt. Exit 9 unless correct."""
    sb = _sb(ctx)
    _say_if_unconfined(sb.settings)

    def work():
        with progress_bar() as bar:
            job = bar.add_task("benchmarking", total=1.0)
            return sb.benchmark(
                task,
                solution,
                device=device,
                parent_id=parent,
                techniques=technique or [],
                session=session,
                agent="cli",
                record=record,
                progress=lambda f, m: bar.update(job, completed=f, description=m),
            )

    run(as_json, work, render_bench)


def render_bench(result) -> int | None:
    r = result.report
    out.print(f"{_verdict(r.verdict)}  {r.message}")
    if r.verdict != "correct":
        for c in r.correctness.failed_checks if r.correctness else []:
            out.print(f"  [red]check {c.name} failed[/]: {c.detail}")
        if r.error:
            out.print(f"  {r.error.type}: {r.error.message}")
    if r.timing:
        t = r.timing
        out.print(f"  median {_ms(t.median_ms)} (IQR {_ms(t.q1_ms)}-{_ms(t.q3_ms)}, n={t.n}; {t.method})")
        out.print(
            f"  {_x(r.speedup_vs_eager)} vs eager, {_x(r.speedup_vs_compile)} vs torch.compile"
            + (f", {_x(r.speedup_vs_max_autotune)} vs max-autotune" if r.speedup_vs_max_autotune else "")
            + (
                f"; {r.roofline.pct_sol:.0f}% of the floor, {r.roofline.bound}-bound"
                if r.roofline and r.roofline.pct_sol is not None
                else ""
            )
        )
        if r.precision:
            out.print(f"  [dim]precision: {r.precision}[/dim]")
    elif r.timing_unavailable and "not timed" not in r.message:  # said once, in the message or here
        out.print(f"  [yellow]not timed[/]: {r.timing_unavailable.removeprefix('not timed: ')}")
    for n in r.notes:
        out.print(f"  note: {n}")
    if result.attempt_id:
        gain = f"; {_x(result.gain_vs_parent)} over parent {result.parent_id}" if result.gain_vs_parent else ""
        out.print(f"  recorded as [bold]{result.attempt_id}[/]{gain}")
    return None if r.verdict == "correct" else CHECK_FAILED


@app.command()
def techniques(ctx: typer.Context, as_json: Json = False) -> None:
    """The technique vocabulary: the names `bench --technique` and lessons accept."""

    def render(rows) -> None:
        t = table("technique", "category", "what it is", ids=("technique",))
        for row in rows:
            t.add_row(row.name, row.category, row.description)
        out.print(t)

    run(as_json, lambda: _sb(ctx).list_techniques(), render)


@app.command()
def profile(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="Built-in name or task file.")],
    solution: Annotated[str, typer.Argument(help="Solution file, or a built-in solution name.")],
    device: Annotated[str, typer.Option(help="auto, cuda, cuda:N or cpu.")] = "auto",
    attempt: Annotated[Optional[str], typer.Option("--attempt", help="Store with this attempt.")] = None,
    as_json: Json = False,
) -> None:
    """Profile the candidate's kernels with Nsight Compute: counters per kernel, a diagnosis, techniques.
    Exit 9 when the counters are unavailable (no GPU, no ncu): the answer says what was measured instead."""
    sb = _sb(ctx)

    def work():
        with progress_bar() as bar:
            job = bar.add_task("profiling", total=1.0)
            return sb.profile(
                task,
                solution,
                device=device,
                attempt_id=attempt,
                progress=lambda f, m: bar.update(job, completed=f, description=m),
            )

    run(as_json, work, render_profile)


def render_profile(r) -> int | None:
    if not r.available:
        out.print(f"[yellow]counters unavailable[/] ({r.unavailable}): {r.unavailable_detail}")
        for m in r.measured_instead:
            out.print(f"  measured instead: {m}")
        for k in r.torch_kernels[:12]:
            out.print(f"  {k.name}: {k.duration_us:.2f} µs (torch profiler, one call)")
        return CHECK_FAILED
    t = table(
        "kernel",
        "µs",
        "DRAM %",
        "L2 %",
        "SM %",
        "occ % (theo, limit)",
        "regs",
        "ld sect/req",
        "smem confl %",
        "waves",
        "top stall",
    )
    for k in r.kernels:
        stall = f"{k.stalls[0].reason} {k.stalls[0].share_pct:.0f}%" if k.stalls else "-"
        t.add_row(
            k.name[:40],
            _f(k.duration_us),
            _f(k.dram_pct, ".0f"),
            _f(k.l2_pct, ".0f"),
            _f(k.sm_pct, ".0f"),
            f"{_f(k.achieved_occupancy_pct, '.0f')} ({_f(k.theoretical_occupancy_pct, '.0f')}, "
            f"{k.occupancy_limiter or '-'})",
            str(k.registers or "-"),
            _f(k.ld_sectors_per_request, ".1f"),
            _f(k.smem_conflict_pct, ".0f"),
            _f(k.waves),
            stall,
        )
    out.print(t)
    out.print(f"state: [bold]{r.state}[/]; {r.diagnosis}")
    if r.ncu:
        out.print(
            f"  Nsight Compute: {r.ncu.kernels} kernel(s), {r.ncu.wall_s:.1f} s wall (its own overhead "
            f"included), passes {r.ncu.passes or '?'}, clocks unlocked"
        )
    if r.attempt_id:
        out.print(f"  stored with attempt {r.attempt_id}")
    for n in r.notes:
        out.print(f"  note: {n}")
    return None


def _f(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


@app.command()
def recall(
    ctx: typer.Context,
    query_or_task: Annotated[
        str, typer.Argument(help="A task (name or file) or plain words; - reads the words from standard input.")
    ],
    k: Annotated[int, typer.Option("--k", "-k", help="How many items.")] = 5,
    source: Annotated[Optional[Path], typer.Option(help="Candidate source file to match on.")] = None,
    arch: Annotated[Optional[str], typer.Option(help="GPU architecture, e.g. sm_90.")] = None,
    run_name: Annotated[
        Optional[str],
        typer.Option(
            "--run", help="Only this suite run's attempts (its run directory's name) and the lessons about them."
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Skills and experiences most likely to speed this kernel up, and why; with a task, next techniques."""
    sb = _sb(ctx)

    if query_or_task == "-":
        import sys

        query_or_task = sys.stdin.read().strip()
        if not query_or_task:
            _fail(InvalidInput("recall - read nothing from standard input", hint="pipe the words in, or pass them"))

    def work():
        code = _read_text(source, "source") if source else None
        try:
            task = sb.task(query_or_task)
        except NotFound:
            return sb.recall(query_or_task, source=code, arch=arch, k=k, run=run_name)
        return sb.recall(task=task, source=code, arch=arch, k=k, run=run_name)

    def render(r) -> None:
        out.print(f"query: {escape(r.query)}  ({r.latency_ms:.0f} ms, wall clock)")
        # One item a paragraph, not a table: a why column squeezed into 80 columns cut words and ids.
        for n, item in enumerate(r.items, 1):
            out.print(f"[bold]{n}. {item.kind} {escape(item.id)}[/]  score {item.score:.3f}")
            if item.title and item.title != item.id:
                out.print(f"   {escape(item.title)}")
            out.print(f"   why: {escape(item.why)}")
        if not r.items:
            out.print("nothing recalled")
        _render_suggestions(r.suggestions)
        for note in r.notes:
            out.print(f"note: {note}")

    run(as_json, lambda: with_spinner("recalling", work), render)


def _render_suggestions(suggestions) -> None:
    if not suggestions:
        return
    out.print("[bold]next techniques[/]")
    for s in suggestions:  # paragraphs: a why column squeezed into a table cut context names mid-word
        out.print(
            f"  [bold]{s.technique}[/]  score {s.score:.2f}, expected {_x(s.expected_gain)}, "
            f"faster in {s.successes} of {s.tries} tries"
        )
        out.print(f"     {escape(s.why)}")


@app.command()
def suggest(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="Built-in name or task file.")],
    session: Annotated[Optional[str], typer.Option(help="Only this session's attempts.")] = None,
    k: Annotated[int, typer.Option("--k", "-k")] = 3,
    as_json: Json = False,
) -> None:
    """The next techniques to try on a task, given the attempts made on it."""
    run(as_json, lambda: _sb(ctx).suggest(task, session=session, k=k), _render_suggestions)


@app.command()
def history(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="Task name or file.")],
    session: Annotated[Optional[str], typer.Option(help="Only this session's attempts.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many of the newest.")] = 100,
    as_json: Json = False,
) -> None:
    """A task's attempts, oldest first, with their parents: the lineage."""

    def render(attempts) -> None:
        out.print(lineage_tree(attempts) if attempts else "no attempts")

    run(as_json, lambda: _sb(ctx).attempt_history(task, session=session, limit=limit), render)


def lineage_tree(attempts) -> Tree:
    """Attempts as a tree: each under the attempt it improved on."""
    root = Tree(f"[bold]{attempts[0].task}[/]: {len(attempts)} attempts (median: CUDA events, L2 flushed)")
    nodes: dict[str, Tree] = {}
    for a in attempts:
        techs = f" +{', +'.join(a.techniques)}" if a.techniques else ""
        label = (
            f"{a.id} {_verdict(a.verdict)} {_ms(a.median_ms)} {_x(a.speedup_vs_eager)} vs eager"
            f"[dim]{techs}{' (' + a.session + ')' if a.session else ''}[/]"
        )
        nodes[a.id] = nodes.get(a.parent_id, root).add(label)
    return root


@app.command()
def attempt(
    ctx: typer.Context,
    attempt_id: Annotated[str, typer.Argument(help="att_... id (an exp_... id shows that experience).")],
    source: Annotated[bool, typer.Option("--source", help="Also print the source.")] = False,
    as_json: Json = False,
) -> None:
    """One attempt in full: report, lineage and (with --source) its code."""
    if attempt_id.startswith("exp_"):  # the ids recall lists side by side: one command shows either
        experience(ctx, attempt_id, as_json)
        return

    def render(a) -> int | None:
        out.print(
            f"[bold]{a.id}[/] on {a.task} (parent {a.parent_id or '-'}; techniques "
            f"{', '.join(a.techniques) or '-'}; {a.created_at:%Y-%m-%d %H:%M} UTC)"
        )
        if a.bench_report:
            render_bench(BenchmarkResult(report=a.bench_report))
        if source:
            out.print(Syntax(a.source, "python"))
        return None

    def work():
        try:
            return _sb(ctx).get_attempt(attempt_id)
        except NotFound as e:
            raise NotFound(e.message, hint="`skillbase history TASK` lists a task's attempt ids") from None

    run(as_json, work, render)


@app.command()
def experience(
    ctx: typer.Context,
    experience_id: Annotated[str, typer.Argument(help="exp_... id, as recall lists it.")],
    as_json: Json = False,
) -> None:
    """One recorded experience (a lesson): what was learned, on which task, the attempts that taught it and
    the gain measured between them."""

    def render(e) -> None:
        out.print(f"[bold]{e.id}[/]" + (f": {escape(e.title)}" if e.title else ""))
        out.print(escape(e.lesson))
        facts = [
            ("task", e.task),
            ("family", e.family),
            ("techniques", ", ".join(e.techniques) or None),
            ("gain", _x(e.gain) if e.gain else None),
            ("before", e.before_attempt),
            ("after", e.after_attempt),
            ("bottleneck", e.bottleneck),
            ("hardware", e.hardware),
            ("conditions", e.conditions or None),
            ("source", e.source),
            ("recorded", f"{e.created_at:%Y-%m-%d %H:%M} UTC"),
        ]
        for name, value in facts:
            if value:
                out.print(f"  {name}: {escape(str(value))}")
        if e.after_attempt:
            out.print(f"  the code: skillbase attempt {e.after_attempt} --source")

    def work():
        try:
            return _sb(ctx).get_experience(experience_id)
        except NotFound as e:
            raise NotFound(e.message, hint="`skillbase recall TASK` lists experience ids (exp_...)") from None

    run(as_json, work, render)


@app.command()
def lesson(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="What worked or failed, and why.")],
    after: Annotated[Optional[str], typer.Option("--after", help="Attempt that showed it.")] = None,
    before: Annotated[Optional[str], typer.Option("--before", help="Attempt compared with.")] = None,
    task: Annotated[Optional[str], typer.Option(help="Task, when no attempt is given.")] = None,
    technique: Annotated[Optional[list[str]], typer.Option("--technique", "-t")] = None,
    title: Annotated[str, typer.Option()] = "",
    as_json: Json = False,
) -> None:
    """Record a lesson tied to the attempts that taught it (the gain is measured, never typed)."""

    def render(e) -> None:
        out.print(
            f"recorded [bold]{e.id}[/] on {e.task}: gain {_x(e.gain)} (before/after medians, same GPU); "
            f"techniques {', '.join(e.techniques) or '-'}"
        )

    run(
        as_json,
        lambda: _sb(ctx).record_lesson(
            text,
            task=task,
            before_attempt=before,
            after_attempt=after,
            techniques=technique or [],
            title=title,
            agent="cli",
        ),
        render,
    )


# ---------------------------------------------------------------------------
# Skills
# ---------------------------------------------------------------------------


def _skill_line(s) -> None:
    out.print(f"[bold]{s.name}[/] v{s.version} is {s.status}")


@skills_app.command("list")
def skills_list(
    ctx: typer.Context,
    status: Annotated[Optional[str], typer.Option(help="draft, approved or deprecated.")] = None,
    as_json: Json = False,
) -> None:
    """Skills in the store, with status, version and techniques."""

    def render(skills) -> None:
        # One line a skill: the name whole, then status and version, the description cut with an ellipsis
        # at the terminal's edge (at 80 columns a wrapped table ran to 494 lines); techniques where room is.
        if not skills:
            out.print("no skills" + (f" with status {status}" if status else "") + " in this store")
            return
        name_w = max(len(s.name) for s in skills)
        wide = out.width >= name_w + 120
        for s in skills:
            line = Text(f"{s.name:<{name_w}}  ", style="bold")
            line.append(f"{s.status:<10} v{s.version:<3} ", style="green" if s.status == "approved" else "yellow")
            if wide:
                line.append(f"{', '.join(s.techniques)[:38]:<40}", style="cyan")
            line.append(" ".join(s.description.split()))
            line.truncate(out.width, overflow="ellipsis")
            out.print(line, no_wrap=True, overflow="ellipsis")
        out.print(f"[dim]{len(skills)} skills; `skillbase skills show NAME` for one, --json for every field[/dim]")

    run(as_json, lambda: _sb(ctx).list_skills(status), render)


@skills_app.command("show")
def skills_show(
    ctx: typer.Context,
    name: str,
    version: Annotated[Optional[int], typer.Option(help="A past version.")] = None,
    history_: Annotated[bool, typer.Option("--history", help="Every version, who and why.")] = False,
    as_json: Json = False,
) -> None:
    """A skill's SKILL.md, or with --history its versions."""
    sb = _sb(ctx)
    if history_:

        def render_history(versions) -> None:
            t = table("v", "status", "author", "when (UTC)", "reason")
            for v in versions:
                t.add_row(str(v.version), v.status, v.author, f"{v.created_at:%Y-%m-%d %H:%M}", v.reason)
            out.print(t)

        run(as_json, lambda: sb.skill_history(name), render_history)
        return
    run(as_json, lambda: sb.get_skill(name, version), lambda s: _print_skill_md(sb.skill_markdown(name, version)))


def _print_skill_md(text: str) -> None:
    """A SKILL.md: its YAML front matter as YAML (Markdown ran it into one paragraph), its body as Markdown."""
    head, sep, body = text.removeprefix("---\n").partition("\n---\n") if text.startswith("---\n") else ("", "", text)
    if sep:
        import yaml

        class Dumper(yaml.SafeDumper):  # lists of words on one line, lists of sentences one item a line
            def represent_list(self, data):
                short = all(isinstance(v, (str, int, float)) and len(str(v)) < 40 for v in data)
                return self.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=short)

        Dumper.add_representer(list, Dumper.represent_list)
        # folded again at this terminal's width, so a long description does not break mid-line
        head = yaml.dump(
            yaml.safe_load(head), Dumper=Dumper, sort_keys=False, allow_unicode=True, width=max(40, out.width - 20)
        )
        out.print(Syntax(head.rstrip(), "yaml", theme="ansi_dark", word_wrap=True, background_color="default"))
        out.rule(style="dim")
    out.print(Markdown(body if sep else text))


@skills_app.command("add")
def skills_add(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="SKILL.md file or skill folder.")],
    approve: Annotated[bool, typer.Option(help="Approve now (lint must pass).")] = False,
    author: Author = None,
    reason: Annotated[str, typer.Option()] = "added",
    as_json: Json = False,
) -> None:
    """Add a skill (a draft unless --approve)."""
    run(as_json, lambda: _sb(ctx).add_skill(path, author=_author(author), reason=reason, approve=approve), _skill_line)


@skills_app.command("edit")
def skills_edit(
    ctx: typer.Context,
    name: str,
    set_: Annotated[
        Optional[list[str]],
        typer.Option("--set", help="FIELD=VALUE (VALUE as JSON when it parses, else text); repeat."),
    ] = None,
    body_file: Annotated[Optional[Path], typer.Option(help="Replace the body with this file.")] = None,
    reason: Annotated[str, typer.Option(help="Why (kept in the history).")] = ...,
    author: Author = None,
    as_json: Json = False,
) -> None:
    """A new version of a skill with fields changed."""

    def work():
        changes = dict(_field(item) for item in set_ or [])
        if body_file:
            changes["body"] = _read_text(body_file, "body file")
        if not changes:
            raise InvalidInput("nothing to change", hint="pass --set FIELD=VALUE or --body-file FILE")
        return _sb(ctx).edit_skill(name, changes, author=_author(author), reason=reason)

    run(as_json, work, _skill_line)


def _field(item: str) -> tuple[str, Any]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise InvalidInput(f"--set {item!r} is not FIELD=VALUE", hint="for example --set 'pitfalls=[\"...\"]'")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


@skills_app.command("lint")
def skills_lint(
    ctx: typer.Context,
    targets: Annotated[Optional[list[Path]], typer.Argument(help="Files or folders; default the store.")] = None,
    examples: Annotated[bool, typer.Option(help="Run the examples through the toolchain.")] = True,
    as_json: Json = False,
) -> None:
    """Lint skills; exit 9 when any has an error."""

    def render(results) -> int | None:
        failed = 0
        for r in results:
            failed += not r.passed
            mark = "[green]ok[/]" if r.passed else "[red]FAIL[/]"
            out.print(f"{mark} {r.skill} ({r.source})")
            for i in r.issues:
                out.print(f"   {i.level} {i.code}: {i.message}")
        out.print(f"{len(results) - failed}/{len(results)} passed")
        return CHECK_FAILED if failed else None

    run(
        as_json,
        lambda: with_spinner("linting", lambda: _sb(ctx).lint_skills(targets or None, verify_examples=examples)),
        render,
    )


@skills_app.command("approve")
def skills_approve(
    ctx: typer.Context,
    name: str,
    reason: Annotated[str, typer.Option()] = ...,
    author: Author = None,
    as_json: Json = False,
) -> None:
    """Approve a draft after linting it (examples verified)."""
    run(
        as_json,
        lambda: with_spinner(
            "linting and approving", lambda: _sb(ctx).approve_skill(name, curator=_author(author), reason=reason)
        ),
        _skill_line,
    )


@skills_app.command("deprecate")
def skills_deprecate(
    ctx: typer.Context,
    name: str,
    reason: Annotated[str, typer.Option()] = ...,
    superseded_by: Annotated[Optional[str], typer.Option()] = None,
    author: Author = None,
    as_json: Json = False,
) -> None:
    """Deprecate a skill, optionally naming its replacement."""
    run(
        as_json,
        lambda: _sb(ctx).deprecate_skill(name, author=_author(author), reason=reason, superseded_by=superseded_by),
        _skill_line,
    )


@skills_app.command("rollback")
def skills_rollback(
    ctx: typer.Context,
    name: str,
    version: int,
    reason: Annotated[Optional[str], typer.Option()] = None,
    author: Author = None,
    as_json: Json = False,
) -> None:
    """A new version equal to an older one."""
    run(as_json, lambda: _sb(ctx).rollback_skill(name, version, author=_author(author), reason=reason), _skill_line)


@skills_app.command("merge")
def skills_merge(
    ctx: typer.Context,
    a: str,
    b: str,
    into: Annotated[str, typer.Option()] = ...,
    reason: Annotated[str, typer.Option()] = ...,
    author: Author = None,
    as_json: Json = False,
) -> None:
    """Merge two skills into one, keeping both provenances and all evidence."""

    def render(r) -> None:
        _skill_line(r.merged)
        for d in r.deprecated:
            out.print(f"  deprecated {d.name} in its favour")

    run(as_json, lambda: _sb(ctx).merge_skills(a, b, into=into, author=_author(author), reason=reason), render)


@skills_app.command("dedupe")
def skills_dedupe(ctx: typer.Context, limit: Annotated[int, typer.Option()] = 20, as_json: Json = False) -> None:
    """Near-duplicate skill pairs for a curator to merge or dismiss."""

    def render(pairs) -> None:
        t = table("a", "b", "score", "similarity", "shared techniques", "merge into")
        for p in pairs:
            t.add_row(
                p.a, p.b, f"{p.score:.2f}", f"{p.similarity:.2f}", ", ".join(p.shared_techniques), p.suggested_into
            )
        out.print(t if pairs else "no near-duplicates")

    run(as_json, lambda: with_spinner("comparing skills", lambda: _sb(ctx).dedupe_skills(limit)), render)


@skills_app.command("export")
def skills_export(
    ctx: typer.Context, out_dir: Path, overwrite: Annotated[bool, typer.Option()] = False, as_json: Json = False
) -> None:
    """Write every approved skill as an Agent Skills folder."""

    def render(r) -> None:
        out.print(f"exported {len(r.exported)} skills to {r.out_dir}; skipped {len(r.skipped)}")

    run(as_json, lambda: _sb(ctx).export_skills(out_dir, overwrite=overwrite), render)


@skills_app.command("import")
def skills_import(
    ctx: typer.Context,
    path: Path,
    approve: Annotated[bool, typer.Option()] = False,
    replace: Annotated[bool, typer.Option()] = False,
    author: Author = None,
    as_json: Json = False,
) -> None:
    """Import Agent Skills folders or SKILL.md files (all or nothing)."""

    def render(skills) -> None:
        for s in skills:
            _skill_line(s)

    run(as_json, lambda: _sb(ctx).import_skills(path, author=_author(author), approve=approve, replace=replace), render)


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------


def _counts(counts: dict[str, int]) -> str:
    """'attempts 3, experiences 1': counts by name, in name order."""
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


@memory_app.command("stats")
def memory_stats(ctx: typer.Context, as_json: Json = False) -> None:
    """Counts per record kind, index lag and disk use."""

    def render(s) -> None:
        table = Table("records", "count", box=None)
        for k, v in sorted(s.counts.items()):
            table.add_row(k, str(v))
        out.print(f"store {s.home} (schema {s.schema_version}; {s.chroma}; {s.embedding_model})")
        out.print(table)
        out.print(
            f"index lag {s.index_lag} changes; disk "
            + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in s.disk_bytes.items())
        )
        if s.index_unreached:
            out.print(
                "records chroma's search does not reach, answered from the index's mirror: "
                + _counts(s.index_unreached)
            )
        if s.index_sparser:
            out.print(
                f"{', '.join(s.index_sparser)}: made with a sparser search graph than new stores get "
                "(more near-duplicate records out of its reach); `skillbase memory reindex` makes it again"
            )

    run(as_json, lambda: _sb(ctx).stats(), render)


@memory_app.command("check")
def memory_check(ctx: typer.Context, as_json: Json = False) -> None:
    """Look for every indexed record by its own vector; answer those the index no longer reaches from its mirror."""

    def render(c) -> None:
        out.print(f"looked for {sum(c.looked_for.values())} records in {c.seconds:.1f} s ({_counts(c.looked_for)})")
        if c.newly_unreached:
            out.print(
                "no longer reached by chroma's search, answered from the index's mirror from now on: "
                + _counts(c.newly_unreached)
            )
        else:
            out.print("no record newly out of chroma's reach")
        if c.unreached:
            out.print("answered from the mirror in all: " + _counts(c.unreached))

    run(as_json, lambda: with_spinner("checking the index", _sb(ctx).check_index), render)


@memory_app.command("export")
def memory_export(ctx: typer.Context, path: Path, as_json: Json = False) -> None:
    """Every record to one JSONL file."""
    run(
        as_json,
        lambda: {"path": str(path), "records": _sb(ctx).export_memory(path)},
        lambda r: out.print(f"wrote {r['records']} records to {r['path']}"),
    )


@memory_app.command("import")
def memory_import(ctx: typer.Context, path: Path, as_json: Json = False) -> None:
    """Import a JSONL export (all or nothing)."""
    run(
        as_json,
        lambda: {"path": str(path), "new_records": _sb(ctx).import_memory(path)},
        lambda r: out.print(f"imported {r['new_records']} new records from {r['path']}"),
    )


@memory_app.command("reindex")
def memory_reindex(ctx: typer.Context, as_json: Json = False) -> None:
    """Re-derive stored tasks from their files, then rebuild the vector index and the graph from the ledger."""

    def work():
        sb = _sb(ctx)
        return {"rederived": sb.rederive_tasks(), "indexed": with_spinner("reindexing", sb.reindex)}

    def render(r) -> None:
        for t in r["rederived"]:
            out.print(f"{t['task']}: {t['from']} -> {t['to']} ({t['records']} records moved)")
        out.print(f"indexed {r['indexed']} records")

    run(as_json, work, render)
