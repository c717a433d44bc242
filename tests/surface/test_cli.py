"""The CLI through typer's runner: ``--json`` is the result model and nothing else, exit codes
say what went wrong, and ``skillbase demo`` drives a whole MCP session."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import TypeAdapter
from typer.testing import CliRunner

from skillbase.console import app
from skillbase.demo import DemoTranscript
from skillbase.memory.records import IndexCheck
from skillbase.models import AttemptSummary, RecallResult, Skill, Suggestion, TaskInfo, TaskSummary
from skillbase.tools import anthropic_tool_definitions, markdown_reference

README = Path(__file__).resolve().parents[2] / "README.md"
NO_ATTEMPT = "att_000000000000_00000000"


@pytest.fixture
def cli(module_home, monkeypatch):
    """cli(*args) -> the result of ``skillbase --home <a seeded copy> *args``."""
    monkeypatch.delenv("SKILLBASE_TOKEN", raising=False)
    monkeypatch.delenv("SKILLBASE_CHROMA_URL", raising=False)
    runner = CliRunner()

    def invoke(*args: str, home: Path = module_home):
        return runner.invoke(app, ["--home", str(home), *args], catch_exceptions=False)

    return invoke


@pytest.mark.parametrize("args, model", [
    (("tasks", "list"), list[TaskInfo]),
    (("tasks", "show", "row_softmax"), TaskSummary),
    (("recall", "row_softmax", "-k", "3"), RecallResult),
    (("recall", "softmax rows too wide for registers"), RecallResult),
    (("suggest", "layernorm"), list[Suggestion]),
    (("history", "row_softmax"), list[AttemptSummary]),
    (("skills", "list", "--status", "approved"), list[Skill]),
    (("skills", "show", "coalesced-memory-access"), Skill),
    (("memory", "check"), IndexCheck),
])
def test_json_output_is_the_result_model_and_nothing_else(cli, args, model):
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    value = TypeAdapter(model).validate_python(json.loads(result.stdout))
    assert value


def test_memory_stats_and_tools_json(cli):
    stats = json.loads(cli("memory", "stats", "--json").stdout)
    assert stats["counts"]["skills"] >= 40
    assert stats["index_graphs"]["skills"] == {"links": 32, "candidates": 200} and stats["index_sparser"] == []
    assert "sparser" not in cli("memory", "stats").stdout
    assert json.loads(cli("tools", "--json").stdout) == anthropic_tool_definitions()


def test_memory_stats_says_when_an_older_store_would_gain_from_reindexing(cli, tmp_path, monkeypatch):
    from skillbase.memory import vectors

    denser = vectors.COLLECTION_METADATA
    monkeypatch.setattr(vectors, "COLLECTION_METADATA", {"hnsw:space": "cosine"})  # chroma's default graph
    home = tmp_path / "older"
    assert cli("init", "--json", home=home).exit_code == 0
    monkeypatch.setattr(vectors, "COLLECTION_METADATA", denser)
    shown = cli("memory", "stats", home=home).stdout
    assert "attempts, experiences, skills: made with a sparser search graph" in " ".join(shown.split())
    assert cli("memory", "reindex", "--json", home=home).exit_code == 0
    assert "sparser" not in cli("memory", "stats", home=home).stdout


@pytest.mark.parametrize("args, code, words", [
    (("tasks", "show", "no_such_task"), 3, "no task named"),
    (("skills", "show", "no-such-skill"), 3, "no-such-skill"),
    (("bench", "relu", "naive", "--parent", NO_ATTEMPT), 3, NO_ATTEMPT),
    (("compile", "relu", "no_such_solution"), 3, "no_such_solution"),
    (("lesson", "it worked"), 2, "needs a task or an attempt"),
    (("skills", "edit", "coalesced-memory-access", "--reason", "r"), 2, "nothing to change"),
    (("serve", "--transport", "carrier-pigeon"), 2, "unknown transport"),
    (("serve", "--transport", "http", "--host", "0.0.0.0"), 7, "without a token"),
    (("serve", "--workers", "2"), 2, "needs the HTTP transport"),
    (("serve", "--transport", "http", "--workers", "2"), 7, "need a chroma server"),
    (("serve", "--transport", "http", "--workers", "0"), 2, "1 or more"),
])
def test_bad_input_exits_with_the_error_code_and_a_red_line(cli, args, code, words):
    result = cli(*args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "error:" in result.stderr and words in result.stderr
    assert "Traceback" not in result.stderr


def test_errors_under_json_are_json_too(cli):
    result = cli("tasks", "show", "no_such_task", "--json")
    assert result.exit_code == 3
    error = json.loads(result.stdout)
    assert error["message"] and error["hint"]


def test_readme_tool_table_is_generated_from_the_catalog():
    text = README.read_text()
    table = re.search(r"<!-- tools:begin -->\n(.*?)\n<!-- tools:end -->", text, re.S)
    assert table, "README.md lost its tool table markers"
    assert table.group(1).strip() == markdown_reference().strip(), "run `skillbase tools --markdown` into README.md"


@pytest.mark.timeout(240)
def test_demo_drives_a_whole_session_over_stdio(cli, fresh_home):
    result = cli("demo", "--json", home=fresh_home)
    assert result.exit_code == 0, result.stderr[-3000:]
    t = DemoTranscript.model_validate_json(result.stdout)
    assert t.ok and len(t.tools) == 10
    called = [s.tool for s in t.steps]
    for tool in ("load_task", "recall", "compile_kernel", "benchmark_kernel", "record_lesson", "suggest_next"):
        assert tool in called
    benches = [s for s in t.steps if s.tool == "benchmark_kernel"]
    assert len(benches) == 2 and all(s.progress_messages > 0 for s in benches)
    assert benches[1].result["parent_id"] == benches[0].result["attempt_id"]
    assert t.lesson_id and t.lesson_rank is not None, "the recorded lesson was not recalled"
    # What a person reads: every step and the verdicts, on stderr when --json holds stdout.
    assert "> benchmark_kernel" in result.stderr and "verified:" in result.stderr
