"""``python -m skillbase.suite run|record|compare``: suite runs where only torch, triton and pydantic are
installed (a GPU box without typer, rich or the store's packages).

The same options as ``skillbase suite``; progress is one plain line per candidate on
stderr, the report's JSON (``--json``) or its path on stdout. ``run --no-record``
never imports chromadb or sentence-transformers; ``record`` needs them (the store).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from skillbase.errors import SkillbaseError


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m skillbase.suite", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="evaluate every candidate of a run directory")
    run.add_argument("run_dir", type=Path)
    run.add_argument("--kernelbench", type=Path)
    run.add_argument("--level", type=int, nargs="+")
    run.add_argument("--problems")
    run.add_argument("--device", default="auto")
    run.add_argument("--workers", type=int)
    run.add_argument("--record", action=argparse.BooleanOptionalAction, default=True)
    run.add_argument("--manifest", type=Path)
    run.add_argument("--session")
    run.add_argument("--time-limit", type=float)
    run.add_argument(
        "--cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="reuse the toolchain's results of identical evaluations (default) or evaluate again",
    )
    run.add_argument("--home", type=Path)
    run.add_argument("--ray", metavar="ADDRESS", help="evaluate on this Ray cluster (needs skillbase[ray])")
    run.add_argument("--json", action="store_true")
    rec = sub.add_parser("record", help="record a run evaluated elsewhere into this store")
    rec.add_argument("run_dir", type=Path)
    rec.add_argument("--kernelbench", type=Path)
    rec.add_argument("--manifest", type=Path)
    rec.add_argument("--session")
    rec.add_argument("--home", type=Path)
    rec.add_argument("--json", action="store_true")
    cmp = sub.add_parser("compare", help="two reports side by side (JSON)")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    return ap


class Lines:
    """Progress as plain lines on stderr: one per finished candidate, with counts and time left."""

    def __init__(self):
        self.total = self.done = 0
        self.counts = {"correct": 0, "rejected": 0, "failed": 0}
        self.start = time.monotonic()
        self.fresh = 0

    def begin(self, items) -> None:
        self.total = len(items)

    def event(self, kind: str, outcome) -> None:
        v = outcome.report.verdict
        self.counts["correct" if v == "correct" else "rejected" if v == "rejected" else "failed"] += 1
        self.done += 1
        if kind == "resumed":
            return
        self.fresh += 1
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.fresh * (self.total - self.done)
        print(
            f"[{self.done}/{self.total}] {outcome.item.name}: {v} ({outcome.report.wall_s:.1f} s); "
            f"{self.counts['correct']} correct, {self.counts['rejected']} rejected, {self.counts['failed']} failed; "
            f"ETA {eta:.0f} s",
            file=sys.stderr,
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit codes as the ``skillbase`` command's."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "compare":
            from skillbase.suite import report as reports

            print(json.dumps(reports.compare(reports.load(args.a), reports.load(args.b)), indent=1))
            return 0
        from skillbase.api import SkillBase
        from skillbase.config import Settings

        overrides = {"home": args.home.expanduser()} if args.home else {}
        if getattr(args, "ray", None):
            from skillbase.toolchain.ray_pool import require_ray

            require_ray()
            overrides["ray_address"] = args.ray
        with SkillBase(Settings.from_env(**overrides)) as sb:
            if args.command == "run":
                from skillbase.suite.discover import parse_problems
                from skillbase.suite.run import run_suite

                lines = Lines()
                report = run_suite(
                    sb,
                    args.run_dir,
                    kernelbench=args.kernelbench,
                    levels=set(args.level) if args.level else None,
                    problems=parse_problems(args.problems),
                    device=args.device,
                    workers=args.workers,
                    record=args.record,
                    manifest=args.manifest,
                    session=args.session,
                    time_limit_s=args.time_limit,
                    use_cache=args.cache,
                    on_start=lines.begin,
                    on_event=lines.event,
                )
            else:
                from skillbase.suite.run import record_suite

                report = record_suite(
                    sb, args.run_dir, kernelbench=args.kernelbench, manifest=args.manifest, session=args.session
                )
    except SkillbaseError as e:
        print(f"error: {e.message}" + (f"\nhint: {e.hint}" if e.hint else ""), file=sys.stderr)
        return e.exit_code
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        s = report["summary"]["all"]
        print(
            f"{s['correct']}/{s['candidates']} correct; fast_1 vs eager {s['fast_p']['eager']['1']}; "
            f"{len(report['left'])} left; {report['wall_s']:.1f} s wall clock"
        )
        print(f"report: {Path(report['run_dir']) / 'skillbase_report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
