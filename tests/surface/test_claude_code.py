"""A real Claude Code session, end to end: the ``claude`` CLI from npm runs ``claude -p`` at
the repository root with the repository's own ``.mcp.json``, which starts ``skillbase
serve`` over stdio; its model is a local scripted
Messages API (streamed, as Claude Code asks) that makes it call load_task, recall,
benchmark_kernel (CPU), record_lesson and attempt_history through Claude Code's own
MCP client. The store then holds the attempt and the lesson, and every result Claude
Code relayed back to the model parses against the tool's output schema.

Skipped, with the reason, when npm or the registry is unavailable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from skillbase import seeds
from skillbase.config import Settings
from skillbase.tools import TOOLS
from tests.agent.messages_server import MessagesServer, message, text, tool_use

from .npm_clients import CLAUDE_CODE, claude_binary
from .transcripts import Call, keep, parse_result, shorten, summarize

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_CONFIG = ROOT / ".mcp.json"
PREFIX = "mcp__skillbase__"
SESSION = "claude-code-e2e"
ORDER = ["load_task", "recall", "benchmark_kernel", "record_lesson", "attempt_history"]
LESSON = ("Autotuned 1024-element blocks verified on the CPU interpreter; relu is a pure stream, "
          "so only the GPU timing can say whether wider blocks pay.")


def _text(content: Any) -> str:
    """A tool_result's content as text (a string, or a list of text blocks)."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def exchanged(messages: list[dict]) -> list[tuple[dict, dict]]:
    """(tool_use, tool_result) pairs of a conversation, in order."""
    uses = {b["id"]: b for m in messages if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_use"}
    return [(uses[b["tool_use_id"]], b) for m in messages if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result" and b["tool_use_id"] in uses]


class Script:
    """The scripted model: one tool call per turn, in ORDER, each filled from the results so far.

    Requests that do not offer our tools (Claude Code's side requests) get a plain reply.
    """

    def __init__(self) -> None:
        self.source = (seeds.TASKS_DIR / "relu" / "optimized.py").read_text(encoding="utf-8")
        self.offered: list[str] = []
        self.final: list[dict] = []

    def __call__(self, body: dict) -> dict:
        names = [t.get("name", "") for t in body.get("tools", [])]
        if PREFIX + "load_task" not in names:
            return message(text("ok"))
        self.offered, self.final = names, body["messages"]
        done = exchanged(body["messages"])
        if any(r.get("is_error") for _, r in done) or len(done) == len(ORDER):
            return message(text("Done."))
        step = ORDER[len(done)]
        results = {u["name"].removeprefix(PREFIX): json.loads(_text(r["content"])) for u, r in done}
        return message(text(f"Next: {step}."), tool_use(PREFIX + step, self._arguments(step, results)))

    def _arguments(self, step: str, results: dict[str, dict]) -> dict:
        if step == "load_task":
            return {"task": "relu"}
        if step == "recall":
            return {"task": "relu", "k": 3}
        if step == "benchmark_kernel":
            used = [i["id"] for i in results["recall"]["items"][:1]]
            return {"task": "relu", "source": self.source, "device": "cpu", "session": SESSION,
                    "techniques": ["autotuning", "block-size-tuning"], "used": used}
        if step == "record_lesson":
            return {"lesson": LESSON, "after_attempt": results["benchmark_kernel"]["attempt_id"],
                    "session": SESSION, "title": "relu: autotuned blocks verified"}
        return {"task": "relu", "session": SESSION}


def _version(claude: Path) -> str:
    out = subprocess.run([str(claude), "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def _client_env(base_url: str, home: Path) -> dict[str, str]:
    """Claude Code's environment: our scripted API, a throwaway HOME, no traffic elsewhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "SKILLBASE_"))}
    env.update(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="sk-ant-test", HOME=str(home),
               ENABLE_TOOL_SEARCH="false",  # list MCP tools directly instead of behind ToolSearch
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
               MCP_TIMEOUT="120000", MCP_TOOL_TIMEOUT="240000")
    return env


@pytest.fixture
def claude() -> Path:
    """The pinned ``claude`` CLI, installed (or the test skipped) before the store is seeded."""
    return claude_binary()


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_claude_code_drives_the_tools_through_its_own_mcp_client(claude, tmp_path, seeded_home):
    version = _version(claude)
    assert version.startswith(CLAUDE_CODE[1]), version
    # The repository's own .mcp.json, as a reader working here uses it: Claude Code started at the
    # root runs .venv/bin/skillbase with SKILLBASE_HOME=~/.skillbase, here a throwaway HOME's store.
    shipped = json.loads(SHIPPED_CONFIG.read_text())["mcpServers"]["skillbase"]
    if not (ROOT / shipped["command"]).is_file():
        pytest.skip(f"the shipped .mcp.json starts {shipped['command']}, which this checkout lacks (make install)")
    home = tmp_path / "home"
    store = home / ".skillbase"
    shutil.copytree(seeded_home, store)

    script = Script()
    with MessagesServer([script], repeat_last=True) as server:
        proc = subprocess.run(
            [str(claude), "-p", "Make the relu task faster with the skillbase tools.",
             "--mcp-config", str(SHIPPED_CONFIG), "--strict-mcp-config",
             "--allowedTools", ",".join(PREFIX + t for t in ORDER), "--output-format", "json"],
            cwd=ROOT, env=_client_env(server.url, home), capture_output=True, text=True, timeout=360)
    assert proc.returncode == 0, f"claude exited {proc.returncode}:\n{proc.stderr[-3000:]}\n{proc.stdout[-2000:]}"
    outcome = json.loads(proc.stdout)
    assert not outcome["is_error"] and outcome["result"] == "Done.", outcome

    # Claude Code listed all of our tools under its MCP prefix and relayed each call's result.
    assert {PREFIX + t.name for t in TOOLS} <= set(script.offered)
    pairs = exchanged(script.final)
    assert [u["name"] for u, _ in pairs] == [PREFIX + t for t in ORDER]
    calls, results = [], {}
    for use, result in pairs:
        tool = use["name"].removeprefix(PREFIX)
        assert not result.get("is_error"), f"{tool}: {_text(result['content'])[:500]}"
        parsed = parse_result(tool, _text(result["content"]))  # raises unless it matches the output schema
        results[tool] = parsed
        calls.append(Call(tool, shorten(use["input"]), summarize(tool, parsed)))
    keep("claude_code_session", "claude (Claude Code CLI)", version, calls, tmp_path,
         command="claude -p PROMPT --mcp-config .mcp.json --strict-mcp-config --allowedTools "
                 "mcp__skillbase__load_task,... --output-format json (at the repository root)",
         num_turns=outcome["num_turns"], duration_ms=outcome["duration_ms"])

    bench, lesson = results["benchmark_kernel"], results["record_lesson"]
    assert bench.report.verdict == "correct" and bench.attempt_id
    assert lesson.after_attempt == bench.attempt_id
    assert [a.id for a in results["attempt_history"].attempts] == [bench.attempt_id]

    from skillbase.api import SkillBase

    with SkillBase(Settings.from_env(env={}, home=store)) as sb:
        attempt = sb.get_attempt(bench.attempt_id)
        stored = sb.get_experience(lesson.id)
    assert (attempt.session, attempt.verdict, attempt.task) == (SESSION, "correct", "relu")
    assert attempt.source == script.source
    assert (stored.lesson, stored.after_attempt, stored.session) == (LESSON, bench.attempt_id, SESSION)
