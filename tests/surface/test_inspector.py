"""The MCP Inspector CLI (npm ``@modelcontextprotocol/inspector-cli``) against the
streamable-HTTP server with a token (what ``SKILLBASE_TOKEN=... skillbase serve --transport
http`` runs): without the token it cannot connect; with it, it lists the tools and runs
load_task, recall, benchmark_kernel (CPU), record_lesson and attempt_history, and every
structured result, and the text beside it, parses against the tool's output schema.

Skipped, with the reason, when npm or the registry is unavailable.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from pydantic import BaseModel

from skillbase import seeds
from skillbase.config import Settings
from skillbase.mcp_server.http import http_app
from skillbase.mcp_server.server import build_server
from skillbase.tools import TOOLS

from .npm_clients import INSPECTOR_CLI, inspector_cli
from .servers import free_port, running
from .transcripts import Call, keep, parse_result, shorten, summarize

TOKEN = "inspector-token-6f0e9d1c2b3a4f5e"
SESSION = "inspector-e2e"
LESSON = "The autotuned relu verified under the interpreter; timing it needs a GPU."
START_TIMEOUT_S = 30


@pytest.fixture
def inspector() -> Path:
    """The Inspector CLI's script, installed (or the test skipped) before any server starts."""
    return inspector_cli()


@pytest.fixture
def http_server(inspector, tmp_path, fresh_home):
    """The streamable-HTTP app ``skillbase serve --transport http`` runs (token required), under
    uvicorn on a free loopback port, in this process; yields the URL and the server's SkillBase."""
    from skillbase.api import SkillBase

    sb = SkillBase(Settings.from_env(env={"SKILLBASE_TOKEN": TOKEN}, home=fresh_home))
    port = free_port()
    work = tmp_path / "work"
    work.mkdir()
    app = http_app(build_server(sb, workspace=work, warm=False), host="127.0.0.1", port=port,
                   token=sb.settings.http_token)
    with running(app, port, START_TIMEOUT_S):
        yield f"http://127.0.0.1:{port}/mcp", sb
    sb.close()


def _inspect(script: Path, url: str, method: str, *args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    """Run the Inspector CLI once (it connects, makes one request and disconnects)."""
    headers = ["--header", f"Authorization: Bearer {token}"] if token else []
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLBASE_")}
    # Run from the script's folder: the CLI finds its own package.json relative to the working directory.
    return subprocess.run(["node", str(script), url, "--transport", "http", *headers, "--method", method, *args],
                          cwd=script.parent, env=env, capture_output=True, text=True, timeout=240)


def _call(script: Path, url: str, tool: str, arguments: dict) -> tuple[BaseModel, Call]:
    pairs = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in arguments.items()]
    proc = _inspect(script, url, "tools/call", "--tool-name", tool, "--tool-arg", *pairs)
    assert proc.returncode == 0, f"{tool}: {proc.stderr[-2000:]}"
    result = json.loads(proc.stdout)
    assert not result.get("isError"), f"{tool}: {result['content'][0]['text'][:500]}"
    parsed = parse_result(tool, result["structuredContent"])      # the structured result...
    assert parse_result(tool, result["content"][0]["text"]) == parsed  # ...and the text block say the same
    return parsed, Call(tool, shorten(arguments), summarize(tool, parsed))


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_inspector_cli_runs_the_tools_over_http_with_the_token(inspector, http_server, tmp_path):
    url, sb = http_server
    refused = _inspect(inspector, url, "tools/list", token=None)  # (a wrong token: tests/surface/test_http.py)
    assert refused.returncode != 0 and "SKILLBASE_TOKEN" in refused.stderr + refused.stdout, refused

    listed = _inspect(inspector, url, "tools/list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    tools = {t["name"]: t for t in json.loads(listed.stdout)["tools"]}
    assert set(tools) == {t.name for t in TOOLS}
    assert all(tools[t.name]["outputSchema"] == t.output_schema() for t in TOOLS)

    source = (seeds.TASKS_DIR / "relu" / "optimized.py").read_text(encoding="utf-8")
    results, calls = {}, []
    steps = [("load_task", lambda: {"task": "relu"}),
             ("recall", lambda: {"task": "relu", "k": 3}),
             ("benchmark_kernel", lambda: {"task": "relu", "source": source, "device": "cpu", "session": SESSION,
                                           "techniques": ["autotuning"]}),
             ("record_lesson", lambda: {"lesson": LESSON, "session": SESSION,
                                        "after_attempt": results["benchmark_kernel"].attempt_id}),
             ("attempt_history", lambda: {"task": "relu", "session": SESSION})]
    for tool, arguments in steps:
        results[tool], call = _call(inspector, url, tool, arguments())
        calls.append(call)
    keep("inspector_http_session", "MCP Inspector CLI", INSPECTOR_CLI[1], calls, tmp_path,
         command="node inspector-cli/build/index.js URL --transport http --header 'Authorization: Bearer TOKEN' "
                 "--method tools/call --tool-name TOOL --tool-arg K=V ...")
    bench, lesson, history = results["benchmark_kernel"], results["record_lesson"], results["attempt_history"]

    assert bench.report.verdict == "correct"
    assert [a.id for a in history.attempts] == [bench.attempt_id]
    resource = _inspect(inspector, url, "resources/read", "--uri", f"attempt://{bench.attempt_id}")
    assert resource.returncode == 0 and json.loads(json.loads(resource.stdout)["contents"][0]["text"])["id"] \
        == bench.attempt_id

    assert sb.get_attempt(bench.attempt_id).session == SESSION  # in the server's store
    stored = sb.get_experience(lesson.id)
    assert (stored.lesson, stored.after_attempt) == (LESSON, bench.attempt_id)
