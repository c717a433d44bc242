"""The MCP stack alone: `skillbase serve --transport http` with every tool answering from memory.

    python benchmarks/mcp_load.py --canned --clients 16 --calls 150 --servers 2   # what mcp_load runs

How fast can a closed loop of MCP clients go on this machine when skillbase itself costs nothing?
This server is `skillbase serve`'s own (``build_server``: the same handler, thread pools, input
validation, result serialization and output schemas; ``http_app``: the same streamable HTTP app and
bearer token, under uvicorn; the curation UI is not mounted), except that recall, record_lesson and attempt_history return an answer
computed once at start-up by the real tools over the seeded store (one per argument set of
mcp_load's mix; record_lesson's is one real lesson written then). No search, no embedding, no ledger
write per call: what is left of a call's time is the MCP SDK on both sides, HTTP, our wrapper and the
machine. ``--stateless`` serves as each ``skillbase serve --workers N`` process does.

``--burn recall=6,record_lesson=1`` makes each such call spend that many milliseconds of its thread's
CPU time in a Python loop before answering, holding the interpreter lock throughout (real work lets it
go at each wait for the model, SQLite or chroma): a stand-in for skillbase's work of a given cost, to
find what a call may cost for a given latency.

Nothing is stored by the calls: mcp_load reports no record counts and no visibility for these runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

from mcp_load import LESSONS, RECALLS, ROOT, TASKS  # this folder is the script's first path entry

CANNED_TOOLS = ("recall", "record_lesson", "attempt_history")


def parse_burn(text: str | None) -> dict[str, float]:
    """'recall=6,record_lesson=1' -> {'recall': 6.0, 'record_lesson': 1.0} (milliseconds of CPU)."""
    out: dict[str, float] = {}
    for part in filter(None, (text or "").split(",")):
        name, sep, ms = part.partition("=")
        try:
            value = float(ms)
        except ValueError:
            value = -1.0
        if not sep or name.strip() not in CANNED_TOOLS or not 0 <= value < 10_000:
            raise ValueError(f"--burn takes tool=milliseconds for {', '.join(CANNED_TOOLS)}, not {part!r}")
        out[name.strip()] = value
    return out


def burn(ms: float) -> None:
    """Spend ``ms`` milliseconds of this thread's CPU time in Python bytecode."""
    end = time.thread_time() + ms / 1e3
    while time.thread_time() < end:
        for _ in range(200):
            pass


def canned_specs(sb, costs: dict[str, float] | None = None) -> list:
    """The catalog's tool specs, the mix's three answering from answers computed here once
    (after spending ``costs[name]`` ms of CPU, when given)."""
    from skillbase import tools

    recalls = {(a.get("task"), a.get("query")): tools.call(sb, "recall", a) for a in RECALLS}
    histories = {t: tools.call(sb, "attempt_history", {"task": t, "limit": 20}) for t in TASKS}
    lesson = tools.call(sb, "record_lesson", {"lesson": f"{LESSONS[0]} (canned answer)", "task": TASKS[0],
                                              "session": "canned"})

    def recall(_sb, args, _ctx):
        return recalls[args.task, args.query]

    def history(_sb, args, _ctx):
        return histories[args.task]

    def costing(name, fn):
        ms = (costs or {}).get(name)
        if not ms:
            return fn

        def slow(sb_, args, ctx):
            burn(ms)
            return fn(sb_, args, ctx)
        return slow

    answers = {"recall": recall, "record_lesson": lambda _sb, _args, _ctx: lesson, "attempt_history": history}
    return [dataclasses.replace(spec, fn=costing(spec.name, answers[spec.name])) if spec.name in answers else spec
            for spec in tools.TOOLS]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--stateless", action="store_true", help="the SDK's stateless HTTP mode (as --workers N serves)")
    ap.add_argument("--burn", default=None, help="CPU each call spends first, e.g. recall=6,record_lesson=1 (ms)")
    args = ap.parse_args(argv)
    try:
        costs = parse_burn(args.burn)
    except ValueError as e:
        ap.error(str(e))

    import uvicorn

    from skillbase.api import SkillBase
    from skillbase.config import Settings
    from skillbase.mcp_server.http import http_app
    from skillbase.mcp_server.server import build_server

    settings = Settings.from_env()
    sb = SkillBase(settings)
    try:
        server = build_server(sb, workspace=ROOT, settle_heap=True, catalog=canned_specs(sb, costs))
        app = http_app(server, host="127.0.0.1", port=args.port, token=settings.http_token,
                       stateless=args.stateless)
        uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning",
                                      lifespan="on")).run()
    finally:
        sb.close()


if __name__ == "__main__":
    os.environ.setdefault("SKILLBASE_DEVICE", "cpu")
    main()
