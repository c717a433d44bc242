"""MCP clients not written here, against ``python -m skillbase.mcp_server`` over stdio.

    nice -n 10 python benchmarks/mcp_external.py                    # seeds a temporary store first
    nice -n 10 python benchmarks/mcp_external.py --home ~/.skillbase --only sdk

(a) ``sdk``: the MCP Python SDK's own client, installed from PyPI into a separate virtualenv
    (same mcp version as here; it has no skillbase, torch or chromadb in it), runs a whole
    session: list tools, load_task, recall, get_skill, compile_kernel, benchmark_kernel
    (naive, then optimized as its child, progress counted), record_lesson, recall by the
    attempt, suggest_next, attempt_history, and reads the attempt's resource.
(b) ``inspector``: the MCP Inspector's CLI mode from the npm registry
    (``npx @modelcontextprotocol/inspector --cli``), one server process per call as that
    CLI works, sharing the store: tools/list, load_task, benchmark_kernel, record_lesson on
    the attempt it returned, attempt_history showing it.

Both need the network once (pip / npm); each check reports what it ran and why it failed.
Results go to benchmarks/results/cpu-2026-11-23/mcp_external.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

INSPECTOR = "@modelcontextprotocol/inspector"

# Runs inside the separate virtualenv: nothing from this repository is importable there.
SDK_CLIENT = r'''
import json, sys, time
import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

server, home, naive_path, optimized_path = sys.argv[1:5]
# A fresh comment makes the naive source new to the store's cache, so it really runs (and reports progress).
naive = open(naive_path).read() + f"\n# external client run {time.time()}\n"
optimized = open(optimized_path).read()


async def main():
    steps, progress = [], []
    params = StdioServerParameters(command=server, args=["-m", "skillbase.mcp_server"],
                                   env={"SKILLBASE_HOME": home, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        init = await s.initialize()
        tools = [t.name for t in (await s.list_tools()).tools]

        async def call(name, args, **kw):
            start = time.perf_counter()
            r = await s.call_tool(name, args, **kw)
            steps.append({"tool": name, "ok": not r.is_error, "seconds": round(time.perf_counter() - start, 3)})
            if r.is_error:
                raise SystemExit(f"{name} failed: {r.content[0].text}")
            return r.structured_content

        async def on_progress(done, total, message):
            progress.append(message)

        await call("load_task", {"task": "relu"})
        first = await call("recall", {"task": "relu", "k": 5})
        skill = next(i["id"] for i in first["items"] if i["kind"] == "skill")
        await call("get_skill", {"name": skill})
        built = await call("compile_kernel", {"task": "relu", "source": naive})
        base = await call("benchmark_kernel", {"task": "relu", "source": naive, "session": "external-sdk"},
                          progress_callback=on_progress)
        best = await call("benchmark_kernel", {"task": "relu", "source": optimized, "parent_id": base["attempt_id"],
                                               "techniques": ["autotuning"], "session": "external-sdk"})
        lesson = await call("record_lesson", {"after_attempt": best["attempt_id"], "session": "external-sdk",
                                              "lesson": "external client: autotuning kept relu correct"})
        again = await call("recall", {"attempt_id": best["attempt_id"], "k": 20})
        await call("suggest_next", {"task": "relu", "session": "external-sdk"})
        history = await call("attempt_history", {"task": "relu", "session": "external-sdk"})
        resource = await s.read_resource(f"attempt://{best['attempt_id']}")
    print(json.dumps({
        "server": f"{init.server_info.name} {init.server_info.version}", "tools": tools, "steps": steps,
        "compiled": built["ok"], "verdicts": [base["report"]["verdict"], best["report"]["verdict"]],
        "progress_notifications": len(progress), "lesson": lesson["id"],
        "lesson_recalled": lesson["id"] in [i["id"] for i in again["items"]],
        "lineage": [(a["id"], a["parent_id"]) for a in history["attempts"]],
        "resource_has_source": json.loads(resource.contents[0].text)["source"] == optimized}))


anyio.run(main)
'''


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def sdk_check(home: Path, venv: Path) -> dict:
    """The SDK's own client from a separate virtualenv drives a whole session."""
    mcp_version = version("mcp")
    ran = []
    if not (venv / "bin" / "python").exists():
        ran.append(f"python3 -m venv {venv}")
        _run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"mcp=={mcp_version}"]
    ran.append(" ".join(pip[2:]))
    installed = _run(pip)
    if installed.returncode != 0:
        return {"ok": False, "ran": ran, "error": f"pip failed: {installed.stderr[-2000:]}"}
    script = Path(tempfile.mkdtemp()) / "external_client.py"
    script.write_text(SDK_CLIENT)
    relu = ROOT / "seeds" / "tasks" / "relu"
    cmd = [str(venv / "bin" / "python"), str(script), sys.executable, str(home), str(relu / "naive.py"),
           str(relu / "optimized.py")]
    ran.append(f"{venv}/bin/python external_client.py <this repo's python> <home> naive.py optimized.py")
    start = time.perf_counter()
    # The client's own environment: no PYTHONPATH, nothing from this repository's virtualenv.
    done = _run(cmd, cwd=str(ROOT), timeout=600, env={"PATH": os.environ.get("PATH", ""), "HOME": str(Path.home())})
    seconds = round(time.perf_counter() - start, 1)
    if done.returncode != 0:
        return {"ok": False, "ran": ran, "seconds": seconds, "error": (done.stderr or done.stdout)[-3000:]}
    session = json.loads(done.stdout.strip().splitlines()[-1])
    ok = (len(session["tools"]) == 9 and session["verdicts"] == ["correct", "correct"] and session["compiled"]
          and session["progress_notifications"] > 0 and session["lineage"][-1][1] == session["lineage"][-2][0]
          and session["resource_has_source"])
    return {"ok": ok, "ran": ran, "client": f"mcp {mcp_version} from PyPI in {venv}", "seconds": seconds,
            "session": session}


def _inspector(home: Path, *args: str) -> dict:
    cmd = ["npx", "-y", INSPECTOR, "--cli", sys.executable, "-m", "skillbase.mcp_server", "-e", f"SKILLBASE_HOME={home}",
           "-e", "HF_HUB_OFFLINE=1", "-e", "TRANSFORMERS_OFFLINE=1", *args]
    done = _run(cmd, cwd=str(ROOT), timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {(done.stderr or done.stdout)[-2000:]}")
    return json.loads(done.stdout)


def _tool(home: Path, name: str, **args: str) -> dict:
    flags = [x for k, v in args.items() for x in ("--tool-arg", f"{k}={v}")]
    result = _inspector(home, "--method", "tools/call", "--tool-name", name, *flags)
    if result.get("isError"):
        raise RuntimeError(f"{name}: {result['content'][0]['text']}")
    return result["structuredContent"]


def inspector_check(home: Path) -> dict:
    """The MCP Inspector's CLI mode lists the tools and completes a session, one call per process."""
    npx = _run(["npm", "view", INSPECTOR, "version"], timeout=120)
    if npx.returncode != 0:
        return {"ok": False, "error": f"npm registry unreachable: {npx.stderr[-500:]}"}
    ran = [f"npx -y {INSPECTOR} --cli {sys.executable} -m skillbase.mcp_server -e SKILLBASE_HOME=<home> -e HF_HUB_OFFLINE=1 "
           "--method tools/list | tools/call --tool-name NAME --tool-arg key=value ..."]
    start = time.perf_counter()
    try:
        tools = [t["name"] for t in _inspector(home, "--method", "tools/list")["tools"]]
        task = _tool(home, "load_task", task="relu")
        bench = _tool(home, "benchmark_kernel", task="relu", source_path="seeds/tasks/relu/naive.py",
                      session="external-inspector")
        lesson = _tool(home, "record_lesson", after_attempt=bench["attempt_id"], session="external-inspector",
                       lesson="inspector client: the naive relu kernel verified correct")
        history = _tool(home, "attempt_history", task="relu", session="external-inspector")
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        return {"ok": False, "ran": ran, "inspector": npx.stdout.strip(), "error": str(e)[-3000:]}
    ids = [a["id"] for a in history["attempts"]]
    ok = len(tools) == 9 and bench["report"]["verdict"] == "correct" and bench["attempt_id"] in ids
    return {"ok": ok, "ran": ran, "inspector": f"{INSPECTOR} {npx.stdout.strip()}",
            "seconds": round(time.perf_counter() - start, 1),
            "session": {"tools": tools, "task": task["summary"]["info"]["name"],
                        "verdict": bench["report"]["verdict"], "attempt": bench["attempt_id"], "lesson": lesson["id"],
                        "history": ids}}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, help="a store to use (seeded if it is not); default a temporary one")
    ap.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "skillbase-external-client-venv")
    ap.add_argument("--only", choices=["sdk", "inspector"])
    ap.add_argument("--out", type=Path, help="write the JSON here (default: print the summary only; a dated "
                    "results folder is never written unless named)")
    args = ap.parse_args(argv)

    from skillbase.api import SkillBase
    from skillbase.config import Settings

    tmp = None if args.home else tempfile.TemporaryDirectory(prefix="skillbase-external-")
    home = (args.home or Path(tmp.name) / "home").expanduser().resolve()
    with SkillBase(Settings.from_env(home=home)) as sb:
        sb.init()
    result = {"benchmark": "mcp_external", "transport": "stdio", "server": f"{sys.executable} -m skillbase.mcp_server"}
    if args.only in (None, "sdk"):
        result["sdk_client"] = sdk_check(home, args.venv)
    if args.only in (None, "inspector"):
        result["inspector_cli"] = inspector_check(home)
    result["ok"] = all(v["ok"] for k, v in result.items() if isinstance(v, dict))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    for key in ("sdk_client", "inspector_cli"):
        if key in result:
            r = result[key]
            print(f"{key}: {'ok' if r['ok'] else 'FAILED'} in {r.get('seconds', '-')} s (wall clock)"
                  + ("" if r["ok"] else f": {r.get('error', 'checks failed; see the JSON')[:300]}"))
    if args.out is not None:
        print(f"wrote {args.out}")
    if tmp:
        tmp.cleanup()
    return result


if __name__ == "__main__":
    main()
