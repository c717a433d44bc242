"""What an MCP client spends checking skillbase's tool results against their output schemas.

    python benchmarks/schema_check.py --out benchmarks/results/cpu-2026-11-29b/schema_check.json

The MCP SDK's Python client checks every tool result that carries structured content against the
tool's ``outputSchema`` (``ClientSession.validate_tool_result``: the ``jsonschema`` package, a checker
compiled once per tool and session after ``check_schema``). Under 16 load clients that was a third
of the load generator's CPU (docs/performance.md). This script takes real results of the tools the load
mix calls, from a server over a freshly seeded store through the SDK's in-memory client, and times the
same two steps the client takes, against two schemas of the same output model:

- ``model``: the output model's own JSON schema (pydantic's ``model_json_schema``, what was published
  before);
- ``published``: what the server publishes now (``ToolSpec.output_schema``, ``plain_schema``).

Reported per tool: the result's size, ``check_schema`` once (per session) and the check of one
result (per call), each the median of ``--repeat`` rounds, and the ratio published / model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from json_report import write_report  # this folder is the script's first path entry

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

CALLS = {
    "recall": [{"task": "row_softmax"}, {"task": "layernorm"}, {"query": "bank conflicts in shared memory"},
               {"query": "fuse the bias add into the matmul epilogue"}],
    "record_lesson": [{"lesson": f"Vectorized loads halved the copy's memory transactions (run {n}).",
                       "task": "relu", "session": "schema-check"} for n in range(4)],
    "attempt_history": [{"task": "row_softmax", "limit": 20}, {"task": "matmul", "limit": 20}],
}


def results_of(home: Path) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """Real results of the load mix's tools, and the schemas the server published for them."""
    import anyio
    from mcp.client.client import Client

    from skillbase.api import SkillBase
    from skillbase.config import Settings
    from skillbase.mcp_server.server import build_server

    settings = Settings.from_env(env={}, home=home)
    with SkillBase(settings) as sb:
        sb.init()
    sb = SkillBase(settings)
    server = build_server(sb, warm=False)

    async def main():
        out: dict[str, list[dict]] = {}
        async with Client(server) as client:
            published = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            for tool, calls in CALLS.items():
                for args in calls:
                    result = await client.call_tool(tool, args)
                    if result.is_error:
                        raise SystemExit(f"{tool} failed: {result.content[0].text}")
                    out.setdefault(tool, []).append(result.structured_content)
        return out, published

    try:
        return anyio.run(main)
    finally:
        sb.close()


def timed(fn, repeat: int) -> float:
    """Median milliseconds of ``fn()`` over ``repeat`` rounds (after one round not counted)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def cost(schema: dict, results: list[dict], repeat: int) -> dict:
    from jsonschema import exceptions as jsonschema_exceptions
    from jsonschema.validators import validator_for
    from referencing import Registry

    cls = validator_for(schema)
    checker = cls(schema, registry=Registry())

    def check_all():
        for r in results:
            if jsonschema_exceptions.best_match(checker.iter_errors(r)) is not None:
                raise SystemExit("a real result was refused")

    return {"schema_bytes": len(json.dumps(schema)), "check_schema_ms": round(timed(lambda: cls.check_schema(schema), repeat), 3),
            "check_result_ms": round(timed(check_all, repeat) / len(results), 4)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30, help="rounds per figure (median)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    from skillbase.tools import TOOLS

    with tempfile.TemporaryDirectory() as tmp:
        results, published = results_of(Path(tmp) / "home")
    specs = {t.name: t for t in TOOLS}
    tools = {}
    for name, rs in results.items():
        model = cost(specs[name].output_model.model_json_schema(), rs, args.repeat)
        ours = cost(published[name], rs, args.repeat)
        tools[name] = {"results": len(rs), "result_bytes": round(statistics.mean(len(json.dumps(r)) for r in rs)),
                       "model": model, "published": ours,
                       "check_result_ratio": round(ours["check_result_ms"] / model["check_result_ms"], 3),
                       "check_schema_ratio": round(ours["check_schema_ms"] / model["check_schema_ms"], 3)}
    mix = {k: round(statistics.mean(t[k]["check_result_ms"] for t in tools.values()), 4) for k in ("model", "published")}
    report = {"machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
              "repeat": args.repeat, "tools": tools,
              "load_mix_check_ms_per_call": mix}
    for name, t in tools.items():
        print(f"{name:16s} result {t['result_bytes']:6d} B  check a result {t['model']['check_result_ms']:7.3f} -> "
              f"{t['published']['check_result_ms']:7.3f} ms (x{t['check_result_ratio']:.2f})  check_schema "
              f"{t['model']['check_schema_ms']:6.2f} -> {t['published']['check_schema_ms']:6.2f} ms "
              f"(x{t['check_schema_ratio']:.2f})")
    print(f"load mix (a third each): {mix['model']:.3f} -> {mix['published']:.3f} ms of client CPU a call")
    write_report(args.out, report)
    return report


if __name__ == "__main__":
    main()
