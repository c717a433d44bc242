"""``skillbase suite run | record | compare``: whole-run evaluation on the command line.

``skillbase.console`` adds these to the core CLI. Progress goes to stderr (a bar with
done / rejected / failed and the time left); stdout gets the per-level table and the
report's path, or the report's JSON with ``--json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

suite_app = typer.Typer(no_args_is_help=True, help="Evaluate whole run directories (KernelBench runs or manifests).")

KbDir = Annotated[
    Optional[Path],
    typer.Option(
        "--kernelbench", help="KernelBench checkout the problems are read from (for kb: tasks and KernelBench names)."
    ),
]
Manifest = Annotated[Optional[Path], typer.Option("--manifest", help="A manifest.json elsewhere than RUN_DIR.")]


def register_suite_commands(app: typer.Typer) -> None:
    """Add ``suite`` to the skillbase CLI."""
    app.add_typer(suite_app, name="suite")


@suite_app.command("run", context_settings={"allow_extra_args": True})
def run_command(
    ctx: typer.Context,
    run_dir: Annotated[
        Path,
        typer.Argument(help="Folder of candidates: level_L_problem_P_sample_S_kernel.py files or a manifest.json."),
    ],
    kernelbench: KbDir = None,
    level: Annotated[
        Optional[list[int]], typer.Option("--level", help="Only these levels: --level 1 2 3 (or repeat the option).")
    ] = None,
    problems: Annotated[Optional[str], typer.Option("--problems", help="Only these problems, e.g. 1-20,23.")] = None,
    device: Annotated[
        str, typer.Option(help="auto, cuda (every GPU of the host) or cpu (verify only, at shrunk shapes).")
    ] = "auto",
    workers: Annotated[Optional[int], typer.Option(help="Workers at most (default: every GPU; 2 on the CPU).")] = None,
    record: Annotated[bool, typer.Option(help="Record every candidate as an attempt in the store.")] = True,
    manifest: Manifest = None,
    session: Annotated[
        Optional[str], typer.Option(help="Session label for the attempts (default: the run's name).")
    ] = None,
    time_limit: Annotated[
        Optional[float],
        typer.Option(
            "--time-limit",
            help="Start no candidate after this many seconds; the report lists those left and the "
            "same command goes on later.",
        ),
    ] = None,
    cache: Annotated[
        bool,
        typer.Option(
            help="Reuse the toolchain's results of identical evaluations made before (--no-cache evaluates again)."
        ),
    ] = True,
    ray: Annotated[
        Optional[str],
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Evaluate on this Ray cluster's actors, one per GPU (host:6379 or 'auto'; needs skillbase[ray]).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Evaluate every candidate of RUN_DIR (resuming a killed run), record them, write skillbase_report.json/.md."""
    from skillbase import cli as base
    from skillbase.suite.discover import parse_levels, parse_problems
    from skillbase.suite.run import run_suite

    def work():
        if ray:
            from skillbase.toolchain.ray_pool import require_ray

            require_ray()
            ctx.obj.ray = ray
        levels = parse_levels(level, ctx.args)
        bar = _Bar()
        with bar.progress:
            return run_suite(
                base._sb(ctx),
                run_dir,
                kernelbench=kernelbench,
                levels=levels,
                problems=parse_problems(problems),
                device=device,
                workers=workers,
                record=record,
                manifest=manifest,
                session=session,
                time_limit_s=time_limit,
                use_cache=cache,
                on_start=bar.start,
                on_event=bar.event,
            )

    base.run(as_json, work, render_report)


@suite_app.command("record")
def record_command(
    ctx: typer.Context,
    run_dir: Annotated[Path, typer.Argument(help="A run directory evaluated with --no-record (here or elsewhere).")],
    kernelbench: KbDir = None,
    manifest: Manifest = None,
    session: Annotated[Optional[str], typer.Option(help="Session label (default: the run's name).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Record a run evaluated elsewhere into this store, with its lineage; recording twice adds nothing."""
    from skillbase import cli as base
    from skillbase.suite.run import record_suite

    base.run(
        as_json,
        lambda: base.with_spinner(
            "recording",
            lambda: record_suite(base._sb(ctx), run_dir, kernelbench=kernelbench, manifest=manifest, session=session),
        ),
        render_report,
    )


@suite_app.command("compare")
def compare_command(
    a: Annotated[Path, typer.Argument(help="A run directory or its skillbase_report.json.")],
    b: Annotated[Path, typer.Argument(help="Another one.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Two suite reports side by side: figures per level, then each candidate."""
    from skillbase import cli as base
    from skillbase.suite import report as reports

    base.run(as_json, lambda: reports.compare(reports.load(a), reports.load(b)), render_compare)


class _Bar:
    """A progress bar counting done, rejected and failed candidates, with the time left."""

    def __init__(self):
        from skillbase import cli as base

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "[green]{task.fields[ok]} correct[/] [red]{task.fields[rejected]} "
                "rejected {task.fields[failed]} failed[/]"
            ),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=base.err,
        )
        self.task = None
        self.counts = {"ok": 0, "rejected": 0, "failed": 0}

    def start(self, items) -> None:
        self.task = self.progress.add_task("evaluating", total=len(items), **self.counts)

    def event(self, kind: str, outcome) -> None:
        v = outcome.report.verdict
        key = "ok" if v == "correct" else "rejected" if v == "rejected" else "failed"
        self.counts[key] += 1
        self.progress.update(
            self.task, advance=1, description="resumed" if kind == "resumed" else outcome.item.name, **self.counts
        )


def render_report(r: dict) -> int | None:
    """The per-level table and where the reports are."""
    from skillbase import cli as base

    t = base.table(
        "level",
        "candidates",
        "correct",
        "fast_0",
        "fast_1",
        "fast_2",
        "fast_1 vs compile",
        "geomean vs eager",
        "geomean vs compile",
        ids=("level",),
        title=f"suite {r['run']}",
    )
    for lv, s in r["summary"].items():
        fe, fc = s["fast_p"]["eager"], s["fast_p"]["torch_compile"]
        pct = lambda v: "-" if v is None else f"{v:.0%}"  # noqa: E731
        t.add_row(
            lv,
            str(s["candidates"]),
            f"{s['correct']} ({pct(s['correctness_rate'])})",
            pct(fe["0"]),
            pct(fe["1"]),
            pct(fe["2"]),
            pct(fc["1"]),
            base._x(s["geomean_speedup"]["eager"]),
            base._x(s["geomean_speedup"]["torch_compile"]),
        )
    base.out.print(t)
    if r.get("note"):
        base.out.print(r["note"])
    rej = r["summary"]["all"]["rejections_by_check"]
    if rej:
        base.out.print("failing candidates by check: " + ", ".join(f"{k} {v}" for k, v in rej.items()))
    a = r["summary"]["all"]
    if a.get("problems") is not None and a["problems"] < a["candidates"]:
        pp, pct = a["per_problem"], (lambda v: "-" if v is None else f"{v:.0%}")
        base.out.print(
            f"per problem (each by its correct, fastest candidate): {pp['correct']}/{pp['n']} correct, "
            f"fast_1 {pct(pp['fast_p']['eager']['1'])} vs eager, "
            f"{pct(pp['fast_p']['torch_compile']['1'])} vs torch.compile; geomean "
            f"{base._x(pp['geomean_speedup']['eager'])} vs eager"
        )
    if r.get("left"):
        base.out.print(f"[yellow]incomplete[/]: {len(r['left'])} candidate(s) left for the next call (time limit)")
    rec = r.get("recorded")
    base.out.print(
        ("not recorded" if rec is None else f"{rec} recorded as attempts")
        + (f"; {len(r['not_recorded'])} not recorded" if r.get("not_recorded") else "")
        + f"; {r['wall_s']:.1f} s wall clock"
    )
    base.out.print(f"report: {Path(r['run_dir']) / 'skillbase_report.md'}")
    return None


def render_compare(c: dict) -> None:
    """Per level: correct, fast_1 and geomean of each run; then candidates whose verdict differs."""
    from skillbase import cli as base

    t = base.table(
        "level",
        "correct A",
        "correct B",
        "fast_1 A",
        "fast_1 B",
        "geomean A",
        "geomean B",
        ids=("level",),
        title=f"A = {c['a']}\nB = {c['b']}",
    )
    for lv, pair in c["levels"].items():
        cell = lambda s, f: "-" if s is None else f(s)  # noqa: E731
        pct = lambda v: "-" if v is None else f"{v:.0%}"  # noqa: E731
        t.add_row(
            lv,
            cell(pair["a"], lambda s: str(s["correct"])),
            cell(pair["b"], lambda s: str(s["correct"])),
            cell(pair["a"], lambda s: pct(s["fast_p"]["eager"]["1"])),
            cell(pair["b"], lambda s: pct(s["fast_p"]["eager"]["1"])),
            cell(pair["a"], lambda s: base._x(s["geomean_speedup"]["eager"])),
            cell(pair["b"], lambda s: base._x(s["geomean_speedup"]["eager"])),
        )
    base.out.print(t)
    d = base.table("candidate", "A", "B", "A vs eager", "B vs eager", ids=("candidate",))
    for row in c["candidates"]:
        a, b = row["a"] or {}, row["b"] or {}
        d.add_row(
            row["name"],
            a.get("verdict", "-"),
            b.get("verdict", "-"),
            base._x(a.get("speedup_vs_eager")),
            base._x(b.get("speedup_vs_eager")),
        )
    base.out.print(d)
