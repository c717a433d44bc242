"""``skillbase suite run`` end to end on the CPU: real workers, the Triton interpreter,
shapes shrunk automatically, a real store; killed with SIGKILL and resumed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "seeds" / "tasks"
ADVERSARIAL = ROOT / "tests" / "adversarial"

# Our own KernelBench-format problems, laid out as a KernelBench checkout. The first moves
# 512 MiB at its own shape: the CPU run must shrink it to verify it.
BIG_RELU = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

rows = 8192
cols = 8192

def get_inputs():
    return [torch.randn(rows, cols)]

def get_init_inputs():
    return []
"""


KB_LIKE = Path(__file__).resolve().parent / "kb_like"
# What a GPU box without the store has: these must never be imported by `suite run --no-record`.
STORE_ONLY = "chromadb,sentence_transformers,anthropic,mcp,typer,rich,bm25s"
BLOCKER = """
import os, sys, importlib.abc
blocked = set(sys.argv[1].split(","))
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in blocked:
            sys.stderr.write(f"imported {name} on the no-store path\\n")
            os._exit(86)
sys.meta_path.insert(0, Blocker())
sys.argv = sys.argv[2:]
import runpy
runpy.run_module("skillbase.suite", run_name="__main__", alter_sys=True)
"""


def cli(*args: str, home: Path, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "SKILLBASE_HOME": str(home), "HF_HUB_OFFLINE": "1", "COLUMNS": "400",
           "SKILLBASE_CPU_SHAPE_MB": "2"}
    return subprocess.run([sys.executable, "-m", "skillbase", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)


def suite_without_store(*args: str, home: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """``python -m skillbase.suite ARGS`` in a process where importing any store-only package exits 86."""
    script = tmp_path / "blocker.py"
    script.write_text(BLOCKER)
    env = {**os.environ, "SKILLBASE_HOME": str(home), "HF_HUB_OFFLINE": "1", "SKILLBASE_CPU_SHAPE_MB": "2"}
    return subprocess.run([sys.executable, str(script), STORE_ONLY, "x", *args], env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture
def kb(tmp_path) -> Path:
    level1 = tmp_path / "kb" / "KernelBench" / "level1"
    level1.mkdir(parents=True)
    (level1 / "1_big_relu.py").write_text(BIG_RELU)
    shutil.copy(SEEDS / "relu" / "task.py", level1 / "2_relu.py")
    shutil.copy(KB_LIKE / "matmul_task.py", level1 / "3_matmul.py")
    return tmp_path / "kb"


@pytest.mark.slow
def test_kernelbench_named_run_shrinks_verifies_and_reports(tmp_path, kb):
    run, home = tmp_path / "run", tmp_path / "home"
    run.mkdir()
    files = {"level_1_problem_1_sample_0_kernel.py": SEEDS / "relu" / "optimized.py",
             "level_1_problem_2_sample_0_kernel.py": ADVERSARIAL / "no_own_kernel.py",
             "level_1_problem_3_sample_0_kernel.py": KB_LIKE / "honest_matmul.py",
             "level_1_problem_3_sample_1_kernel.py": KB_LIKE / "zero_out.py",
             "level_1_problem_3_sample_2_kernel.py": KB_LIKE / "result_reuse.py"}
    for name, src in files.items():
        shutil.copy(src, run / name)
    (run / "level_1_problem_2_sample_1_kernel.py").write_text("this is not python\n")
    (run / "notes.py").write_text("# not a candidate name: ignored\n")
    r = suite_without_store("run", str(run), "--kernelbench", str(kb), "--device", "cpu", "--no-record", "--json",
                            "--level", "1", home=home, tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    rows = {x["name"]: x for x in report["rows"]}
    assert set(rows) == {Path(n).stem for n in files} | {"level_1_problem_2_sample_1_kernel"}
    big = rows["level_1_problem_1_sample_0_kernel"]
    assert big["verdict"] == "correct" and "small shape" in big["message"]
    assert "shrunk automatically" in big["notes"][0] and "limit 2 MiB" in big["notes"][0]
    assert rows["level_1_problem_2_sample_0_kernel"]["verdict"] == "rejected"
    assert "own_kernel_launched" in rows["level_1_problem_2_sample_0_kernel"]["failed_checks"]
    assert rows["level_1_problem_2_sample_1_kernel"]["verdict"] in ("invalid", "compile_error")
    # KernelBench's own adversarial kernels, rewritten in Triton: each fails the check named after its hack.
    assert rows["level_1_problem_3_sample_0_kernel"]["verdict"] == "correct"
    assert rows["level_1_problem_3_sample_1_kernel"]["verdict"] == "rejected"
    assert "inputs_unmodified" in rows["level_1_problem_3_sample_1_kernel"]["failed_checks"]
    assert rows["level_1_problem_3_sample_2_kernel"]["verdict"] == "rejected"
    assert "output_fully_written" in rows["level_1_problem_3_sample_2_kernel"]["failed_checks"]
    s = report["summary"]["level1"]
    assert s["candidates"] == 6 and s["correct"] == 2 and s["fast_p"]["eager"]["1"] is None
    assert s["problems"] == 3 and s["per_problem"]["correct"] == 2
    assert s["rejections_by_check"]["inputs_unmodified"] == 1
    assert report["recorded"] is None and report["note"] and report["complete"]
    md = (run / "skillbase_report.md").read_text()
    assert md.count("| level_1_problem") == 6 and "Per problem" in md

    # The typer CLI, --level with several values, a filter: every result is read back.
    r2 = cli("suite", "run", str(run), "--kernelbench", str(kb), "--device", "cpu", "--no-record", "--json",
             "--level", "1", "2", "--problems", "3", home=home)
    assert r2.returncode == 0, r2.stderr[-2000:]
    again = json.loads(r2.stdout)
    assert {x["name"] for x in again["rows"]} == {f"level_1_problem_3_sample_{i}_kernel" for i in range(3)}
    assert all(x["resumed"] for x in again["rows"]) and again["evaluated_now"] == 0
    assert [x["verdict"] for x in again["rows"]] == [rows[x["name"]]["verdict"] for x in again["rows"]]

    # A time limit that has passed starts nothing new: the report says what is left for the next call.
    shutil.copy(KB_LIKE / "honest_matmul.py", run / "level_1_problem_3_sample_3_kernel.py")
    (run / "level_1_problem_3_sample_3_kernel.py").open("a").write("# a new sample\n")
    r3 = cli("suite", "run", str(run), "--kernelbench", str(kb), "--device", "cpu", "--no-record", "--json",
             "--time-limit", "0", home=home)
    assert r3.returncode == 0, r3.stderr[-2000:]
    partial = json.loads(r3.stdout)
    assert not partial["complete"] and partial["left"] == ["level_1_problem_3_sample_3_kernel"]
    assert len(partial["rows"]) == 6 and "Incomplete" in (run / "skillbase_report.md").read_text()

    # Evaluated without a store: recorded afterwards where the store is, once.
    rec = cli("suite", "record", str(run), "--kernelbench", str(kb), "--json", home=home)
    assert rec.returncode == 0, rec.stderr[-2000:]
    recorded = json.loads(rec.stdout)
    assert recorded["recorded"] == 6 and set(recorded["not_recorded"]) == {"level_1_problem_3_sample_3_kernel"}
    assert all(r["attempt_id"] for r in recorded["rows"]) and len(attempts_of(home, "run")) == 6


def manifest_run(tmp_path: Path) -> Path:
    run = tmp_path / "campaign"
    run.mkdir()
    shutil.copy(SEEDS / "relu" / "naive.py", run / "relu_v1.py")
    shutil.copy(SEEDS / "relu" / "optimized.py", run / "relu_v2.py")
    shutil.copy(SEEDS / "row_softmax" / "naive.py", run / "softmax_v1.py")
    shutil.copy(SEEDS / "row_softmax" / "optimized.py", run / "softmax_v2.py")
    cands = [
        {"name": "relu-v1", "file": "relu_v1.py", "task": "relu", "techniques": []},
        {"name": "relu-v2", "file": "relu_v2.py", "task": "relu", "parent": "relu-v1",
         "techniques": ["vectorized-access"], "note": "wider accesses"},
        {"name": "softmax-v2", "file": "softmax_v2.py", "task": "row_softmax", "parent": "softmax-v1",
         "techniques": ["online-softmax"]},
        {"name": "softmax-v1", "file": "softmax_v1.py", "task": "row_softmax", "techniques": []},
    ]
    (run / "manifest.json").write_text(json.dumps({"candidates": cands}))
    return run


def attempts_of(home: Path, run_name: str) -> list[dict]:
    import sqlite3

    con = sqlite3.connect(home / "ledger.sqlite3")
    try:
        return [json.loads(r[0]) for r in con.execute("SELECT record FROM attempts")
                if json.loads(r[0]).get("run") == run_name]
    finally:
        con.close()


@pytest.mark.slow
def test_a_killed_run_resumes_with_identical_results_and_records_nothing_twice(tmp_path):
    run, home = manifest_run(tmp_path), tmp_path / "home"
    env = {**os.environ, "SKILLBASE_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "skillbase", "suite", "run", str(run), "--device", "cpu",
                             "--workers", "1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    results = run / ".skillbase" / "results"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(results.glob("*.json"))) < 2:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished_before = {p.name: p.read_text() for p in results.glob("*.json")}
    assert 2 <= len(finished_before) < 4, "the kill was meant to land halfway"
    assert not (run / "skillbase_report.json").exists()

    r = cli("suite", "run", str(run), "--device", "cpu", "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    rows = {x["name"]: x for x in report["rows"]}
    assert all(x["verdict"] == "correct" for x in rows.values())
    assert sum(x["resumed"] for x in rows.values()) == len(finished_before)
    assert all("trials" in x["phases_s"] and "wider_inputs" in x["phases_s"] for x in rows.values())
    marks = report["marks_s"]  # what of the wall clock was not evaluation
    assert marks["prepared_s"] <= marks["workers_ready_s"] <= marks["evaluated_s"] <= report["wall_s"]
    for name, text in finished_before.items():  # what was finished is read back, not redone
        assert (results / name).read_text() == text
    attempts = attempts_of(home, "campaign")
    assert len(attempts) == 4 and report["recorded"] == 4
    by_id = {a["id"]: a for a in attempts}
    assert by_id[rows["relu-v2"]["attempt_id"]]["parent_id"] == rows["relu-v1"]["attempt_id"]
    assert by_id[rows["softmax-v2"]["attempt_id"]]["parent_id"] == rows["softmax-v1"]["attempt_id"]
    assert by_id[rows["relu-v2"]["attempt_id"]]["techniques"] == ["vectorized-access"]

    # Unchanged files: seconds, the same attempts; and `suite record` of the same run adds nothing.
    start = time.monotonic()
    r2 = cli("suite", "run", str(run), "--device", "cpu", "--json", home=home)
    assert r2.returncode == 0 and time.monotonic() - start < 60
    assert {x["name"]: x["attempt_id"] for x in json.loads(r2.stdout)["rows"]} == \
        {n: x["attempt_id"] for n, x in rows.items()}
    r3 = cli("suite", "record", str(run), "--json", home=home)
    assert r3.returncode == 0, r3.stderr[-2000:]
    assert len(attempts_of(home, "campaign")) == 4

    c = cli("suite", "compare", str(run), str(run), "--json", home=home)
    assert c.returncode == 0 and len(json.loads(c.stdout)["candidates"]) == 4

    # The run's name is on its attempts: recall can keep to them.
    rc = cli("recall", "relu elementwise kernel", "--run", "campaign", "--json", "-k", "10", home=home)
    assert rc.returncode == 0, rc.stderr[-2000:]
    found = json.loads(rc.stdout)["items"]
    assert found and {i["id"] for i in found} <= {x["attempt_id"] for x in rows.values()}


def test_bad_run_directories_get_clear_errors(tmp_path):
    home = tmp_path / "home"
    r = cli("suite", "run", str(tmp_path / "missing"), "--device", "cpu", home=home)
    assert r.returncode == 3 and "does not exist" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli("suite", "run", str(empty), "--device", "cpu", home=home)
    assert r.returncode == 3 and "no candidates" in r.stderr
    (empty / "manifest.json").write_text(json.dumps({"candidates": [
        {"name": "a", "file": "a.py", "task": "relu"}]}))
    r = cli("suite", "run", str(empty), "--device", "cpu", home=home)
    assert r.returncode == 3 and "a.py" in r.stderr
    (empty / "a.py").write_text("x = 1\n")
    (empty / "manifest.json").write_text(json.dumps({"candidates": [
        {"name": "a", "file": "a.py", "task": "kb:1/5"}]}))
    r = cli("suite", "run", str(empty), "--device", "cpu", home=home)
    assert r.returncode == 2 and "--kernelbench" in r.stderr
    (empty / "manifest.json").write_text(json.dumps({"candidates": [
        {"name": "a", "file": "a.py", "task": "relu", "parent": "b"}]}))
    r = cli("suite", "run", str(empty), "--device", "cpu", home=home)
    assert r.returncode == 2 and "parent" in r.stderr
