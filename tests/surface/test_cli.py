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

TOOLS_DOC = Path(__file__).resolve().parents[2] / "docs" / "tools.md"
NO_ATTEMPT = "att_000000000000_00000000"


@pytest.fixture
def cli(module_home, monkeypatch):
    """cli(*args) -> the result of ``skillbase --home <a seeded copy> *args``."""
    monkeypatch.delenv("SKILLBASE_TOKEN", raising=False)
    monkeypatch.delenv("SKILLBASE_CHROMA_URL", raising=False)
    runner = CliRunner()

    def invoke(*args: str, home: Path = module_home, input: str | None = None):
        return runner.invoke(app, ["--home", str(home), *args], input=input, catch_exceptions=False)

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


def test_tools_doc_table_is_generated_from_the_catalog():
    text = TOOLS_DOC.read_text()
    table = re.search(r"<!-- tools:begin -->\n(.*?)\n<!-- tools:end -->", text, re.S)
    assert table, "docs/tools.md lost its tool table markers"
    assert table.group(1).strip() == markdown_reference().strip(), "run `skillbase tools --markdown` into docs/tools.md"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_demo_drives_a_whole_session_over_stdio(cli, fresh_home):
    result = cli("demo", "--json", home=fresh_home)
    assert result.exit_code == 0, result.stderr[-3000:]
    t = DemoTranscript.model_validate_json(result.stdout)
    assert t.ok and len(t.tools) == 11
    called = [s.tool for s in t.steps]
    for tool in ("load_task", "recall", "compile_kernel", "benchmark_kernel", "record_lesson", "suggest_next"):
        assert tool in called
    benches = [s for s in t.steps if s.tool == "benchmark_kernel"]
    assert len(benches) == 2 and all(s.progress_messages > 0 for s in benches)
    assert benches[1].result["parent_id"] == benches[0].result["attempt_id"]
    assert t.lesson_id and t.lesson_rank is not None, "the recorded lesson was not recalled"
    # What a person reads: every step and the verdicts, on stderr when --json holds stdout.
    assert "> benchmark_kernel" in result.stderr and "verified:" in result.stderr


def test_recall_takes_long_words_and_standard_input(cli, tmp_path):
    words = "a reduction over rows too wide for registers " * 12  # past a file name's 255 bytes
    got = cli("recall", words, "--json")
    assert got.exit_code == 0, got.stderr
    assert RecallResult.model_validate_json(got.stdout).items
    piped = cli("recall", "-", "--json", input=words)
    assert piped.exit_code == 0 and RecallResult.model_validate_json(piped.stdout).query == got_query(got)
    empty = CliRunner().invoke(app, ["--home", str(tmp_path), "recall", "-"], input="", catch_exceptions=False)
    assert empty.exit_code == 2 and "read nothing" in empty.stderr


def got_query(result) -> str:
    return RecallResult.model_validate_json(result.stdout).query


def test_recall_on_an_empty_store_says_to_run_init(tmp_path):
    got = CliRunner().invoke(app, ["--home", str(tmp_path / "empty"), "recall", "row softmax", "--json"],
                             catch_exceptions=False)
    assert got.exit_code == 0, got.stderr
    result = RecallResult.model_validate_json(got.stdout)
    assert result.items == [] and any("skillbase init" in n for n in result.notes)


def test_recall_at_80_columns_keeps_ids_and_reasons_whole(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    full = RecallResult.model_validate_json(cli("recall", "row_softmax", "-k", "3", "--json").stdout)
    text = " ".join(cli("recall", "row_softmax", "-k", "3").stdout.split())
    assert "…" not in text
    for item in full.items:
        assert item.id in text and " ".join(item.why.split()) in text


def test_an_experience_is_shown_by_its_own_command_and_by_attempt(cli):
    exp = next(i for i in RecallResult.model_validate_json(cli("recall", "row_softmax", "--json").stdout).items
               if i.kind == "experience")
    for args in (("experience", exp.id), ("attempt", exp.id)):
        shown = cli(*args)
        assert shown.exit_code == 0, shown.stderr
        assert exp.id in shown.stdout and "task:" in shown.stdout
    assert json.loads(cli("experience", exp.id, "--json").stdout)["id"] == exp.id


def test_the_technique_vocabulary_is_listed_and_named_in_hints(cli):
    listed = json.loads(cli("techniques", "--json").stdout)
    assert {"online-softmax", "autotuning"} <= {t["name"] for t in listed}
    bad = cli("bench", "relu", "optimized", "--device", "cpu", "--technique", "no-such-technique")
    assert bad.exit_code == 2 and "skillbase techniques" in bad.stderr


def test_a_broken_or_missing_solution_is_answered_before_any_worker(cli, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n        return x\n")
    empty = tmp_path / "empty.py"
    empty.write_text("import torch\nclass Model2(torch.nn.Module):\n    pass\n")
    for path, says in ((bad, "does not parse: line 3"), (empty, "defines no `ModelNew`")):
        got = cli("bench", "relu", str(path), "--device", "cpu", "--no-record", "--json")
        report = json.loads(got.stdout)["report"]
        assert got.exit_code == 9 and says in report["message"]
        assert report["wall_s"] < 1.0  # the evaluation's own time: no worker round trip (one took about 7 s)
    missing = cli("bench", "relu", str(tmp_path / "nope.py"), "--device", "cpu")
    assert missing.exit_code == 3 and "does not exist" in " ".join(missing.stderr.split())


def test_a_task_the_store_holds_loads_by_the_name_the_other_tools_print(module_home):
    from skillbase.api import SkillBase
    from skillbase.config import Settings
    from skillbase.errors import NotFound
    from skillbase.tools import call

    with SkillBase(Settings.from_env(env={}, home=module_home)) as sb:
        name = next(a.task for a in sb.memory.list_attempts(limit=500) if a.task[0].isdigit())  # a campaign problem
        view = call(sb, "load_task", {"task": name}, agent="test")
        assert view.summary.info.name == name and view.summary.attempts > 0 and view.summary.best is not None
        assert "records only" in view.summary.note and view.reference_source == ""
        with pytest.raises(NotFound, match="here or in the store"):
            call(sb, "load_task", {"task": "no_such_task_anywhere"}, agent="test")


def test_skills_list_at_80_columns_is_one_line_a_skill_with_names_whole(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    skills = json.loads(cli("skills", "list", "--json").stdout)
    lines = cli("skills", "list").stdout.splitlines()
    assert len(lines) == len(skills) + 1  # and a closing count line
    for skill, line in zip(sorted(skills, key=lambda s: s["name"]), sorted(lines[:-1])):
        assert line.startswith(skill["name"] + " ") and len(line) <= 80 and f"v{skill['version']}" in line


def test_skills_show_prints_the_front_matter_as_yaml_lines(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    shown = cli("skills", "show", "coalesced-memory-access").stdout.splitlines()
    keys = [line.split(":")[0] for line in shown if line[:1].isalpha() and ":" in line]
    assert keys[:2] == ["name", "description"] and "techniques" in keys  # one key a line, not one paragraph
    assert all(len(line) <= 80 for line in shown)


def test_bench_on_the_cpu_says_not_timed_once(cli):
    got = cli("bench", "relu", "optimized", "--device", "cpu", "--no-record")
    assert got.exit_code == 0, got.stderr
    assert " ".join(got.stdout.split()).count("not timed") == 1, got.stdout


def test_the_model_preparation_line_reaches_stderr(cli):
    import logging

    from skillbase.cli import _PreparingLine, _show_model_preparation

    _show_model_preparation()
    _show_model_preparation()  # once, however often the CLI starts in one process
    logger = logging.getLogger("skillbase.memory.onnx_encoder.prepare")
    assert sum(isinstance(h, _PreparingLine) for h in logger.handlers) == 1 and logger.isEnabledFor(logging.INFO)


def test_options_in_help_name_their_values_not_python_types(monkeypatch):
    import typer

    monkeypatch.setenv("COLUMNS", "120")
    group = typer.main.get_command(app)
    paths = [[name] for name in group.commands]
    paths += [[name, sub] for name, cmd in group.commands.items() for sub in getattr(cmd, "commands", {})]
    assert len(paths) > 30
    for path in paths:
        text = CliRunner().invoke(app, [*path, "--help"]).stdout
        options = [line for line in text.splitlines() if re.search(r"│ +(-\w, )?--[\w-]+", line) and "--help" not in line]
        bad = [line.strip() for line in options if re.search(r"<(bool|str|int|float|path|list\[\w+\])>", line)]
        assert not bad, (path, bad)


def test_the_demo_cuts_long_recall_lines_at_words():
    from skillbase.demo import _show_recall

    why = "online-softmax is worth x1.15 here (2 measured in state:softmax:fp32:medium|memory) " * 3
    text = _show_recall({"items": [{"kind": "skill", "id": "s", "score": 0.5, "title": "t " * 50, "why": why}]})
    shown = text.splitlines()[1].removeprefix("   why: ")
    assert shown.endswith(" …") and why.startswith(shown.removesuffix(" …")) and len(shown) <= 150
    assert why[len(shown.removesuffix(" …"))] == " "  # cut where a word ends, not inside one
