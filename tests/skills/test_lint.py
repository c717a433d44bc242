"""Lint: every seed passes (every example verified through the toolchain), and each problem class is caught.

All seed examples run in one batch over one warm Toolchain: Triton examples under the interpreter on
the CPU workers while the compile worker builds the CUDA ones with nvcc for sm_90.
"""

import shutil

import pytest

from skillbase.config import Settings
from skillbase.models import AppliesWhen, Evidence, Provenance
from skillbase.skills.lint import errors, lint, lint_dir, lint_many
from skillbase.skills.markdown import render_skill_md

from .conftest import SEEDS
from .factories import CUDA_BROKEN, make_skill, solution, write_skill

SEED_NAMES = sorted(p.parent.name for p in SEEDS.glob("*/SKILL.md"))


@pytest.fixture(scope="module")
def toolchain(tmp_path_factory):
    from skillbase.toolchain import Toolchain

    settings = Settings.from_env(env={}, home=tmp_path_factory.mktemp("lint-toolchain"), eval_timeout_s=180,
                                 compile_timeout_s=240)
    with Toolchain(settings) as tc:
        yield tc


@pytest.fixture(scope="module")
def seed_results(toolchain):
    return {r.skill: r for r in lint_dir(SEEDS, toolchain=toolchain)}


def _codes(issues, level="error"):
    return sorted({i.code for i in issues if i.level == level})


def test_fast_lint_passes_on_every_seed():
    results = lint_dir(SEEDS, verify_examples=False)
    assert [r.skill for r in results] == SEED_NAMES
    assert {r.skill: errors(r.issues) for r in results if not r.passed} == {}


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first item verifies every seed example in the module fixture
@pytest.mark.parametrize("name", SEED_NAMES)
def test_seed_skill_passes_lint_with_every_example_verified(seed_results, name):
    result = seed_results[name]
    assert errors(result.issues) == [], [i.message for i in errors(result.issues)]
    examples = [i.code for i in result.issues if i.code.startswith("example")]
    assert "example-verified" in examples
    assert set(examples) <= ({"example-verified"} if shutil.which("nvcc") else {"example-verified", "example-skipped"})


def _lint_folder(tmp_path, skill, toolchain=None, **kw):
    folder = write_skill(tmp_path, skill)
    return lint(folder, toolchain=toolchain, verify_examples=toolchain is not None, **kw)


def test_a_good_skill_passes_and_its_example_is_verified(tmp_path, toolchain):
    issues = _lint_folder(tmp_path, make_skill(), toolchain)
    assert errors(issues) == []
    assert sorted(i.code for i in issues if i.level == "info") == ["evidence-missing", "example-verified"]


@pytest.mark.parametrize("change, code, level", [
    ({"techniques": ["shared-memory-tilling"]}, "technique-unknown", "error"),
    ({"techniques": ["memory coalescing"]}, "technique-alias", "warning"),
    ({"techniques": []}, "techniques-missing", "warning"),
    ({"description": "Scales a tensor in one Triton pass."}, "description-when", "error"),
    ({"description": "Scales when N < 256. Use it when rows are short."}, "description-angle-brackets", "warning"),
    ({"name": "claude-scale"}, "name-reserved", "error"),
    ({"applies_when": AppliesWhen(families=["matmul", "spreadsheet"])}, "family-unknown", "error"),
    ({"applies_when": AppliesWhen(dtypes=["fp64"])}, "dtype-unknown", "error"),
    ({"applies_when": AppliesWhen(min_arch="hopper")}, "min-arch", "error"),
    ({"applies_when": AppliesWhen(requires_features=["magic"])}, "feature-unknown", "error"),
    ({"applies_when": AppliesWhen(requires_features=["tma"], excludes_features=["tma"])}, "feature-conflict", "error"),
    ({"languages": []}, "languages-missing", "warning"),
    ({"body": "## When to use it\nx\n## Steps\ny\n"}, "section-missing", "error"),
    ({"body": make_skill().body.replace("```python", "").replace("```", "")}, "example-code-missing", "warning"),
    ({"examples": []}, "examples-missing", "warning"),
    ({"examples": [{"task": "examples/task.py"}]}, "example-keys", "error"),
    ({"examples": [{"task": "examples/task.py", "solution": "examples/missing.py"}]}, "example-file-missing", "error"),
    ({"examples": [{"task": "no_such_builtin", "solution": "examples/after.py"}]}, "example-task-unknown", "error"),
    ({"status": "approved", "superseded_by": "other"}, "status-superseded", "error"),
    ({"evidence": [Evidence(note="fast")]}, "evidence-unlinked", "warning"),
])
def test_each_problem_class_is_reported(tmp_path, change, code, level):
    skill = make_skill(**change)
    issues = _lint_folder(tmp_path, skill)
    assert code in _codes(issues, level), issues
    if level != "error":
        assert errors(issues) == []


def test_unknown_technique_suggests_the_closest_name(tmp_path):
    issues = _lint_folder(tmp_path, make_skill(techniques=["shared-memory-tilling"]))
    assert "did you mean smem-tiling" in next(i.message for i in issues if i.code == "technique-unknown")
    alias = _lint_folder(tmp_path / "b", make_skill(techniques=["memory coalescing"]))
    assert "'coalesced-access'" in next(i.message for i in alias if i.code == "technique-alias")


def test_schema_errors_and_folder_names_are_issues_not_crashes(tmp_path):
    folder = write_skill(tmp_path, make_skill())
    text = (folder / "SKILL.md").read_text()
    (folder / "SKILL.md").write_text(text.replace("techniques:", "technics:"))
    [issue] = lint(folder, verify_examples=False)
    assert (issue.code, issue.field) == ("schema", "technics") and "unknown frontmatter" in issue.message
    (folder / "SKILL.md").write_text(text)
    moved = folder.rename(tmp_path / "renamed")
    assert "name-folder" in _codes(lint(moved / "SKILL.md", verify_examples=False))
    bad = write_skill(tmp_path / "c", make_skill())
    (bad / "SKILL.md").write_text(render_skill_md(make_skill(examples=[
        {"task": "examples/task.py", "solution": "../../etc/passwd"}])))
    assert "example-path" in _codes(lint(bad, verify_examples=False))


def test_duplicate_names_in_one_run(tmp_path):
    a = write_skill(tmp_path / "a", make_skill())
    b = write_skill(tmp_path / "b", make_skill())
    results = lint_many([a, b], verify_examples=False)
    assert results[0].passed and "name-duplicate" in _codes(results[1].issues)


def test_failing_examples_fail_lint(tmp_path, toolchain):
    wrong = make_skill(files={**make_skill().files, "examples/after.py": solution("3.0")})
    issues = _lint_folder(tmp_path, wrong, toolchain)
    [failed] = [i for i in issues if i.code == "example-failed"]
    assert failed.field == "examples.0.solution" and "incorrect" in failed.message
    cuda = make_skill(files={**make_skill().files, "examples/after.py": CUDA_BROKEN})
    issues = _lint_folder(tmp_path / "cuda", cuda, toolchain)
    if shutil.which("nvcc") is None:
        assert "example-skipped" in _codes(issues, "info")
    else:
        [failed] = [i for i in issues if i.code == "example-failed"]
        assert "does not compile for sm_90" in failed.message


def test_records_are_linted_with_their_files_and_the_store(tmp_path, toolchain, open_store):
    from skillbase.models import Experience

    store = open_store()
    exp = store.record_experience(Experience(lesson="one pass beats two", techniques=["elementwise-fusion"]))
    skill = make_skill(evidence=[Evidence(experience_id=exp.id, gain=1.4), Evidence(attempt_id="att_missing")],
                       provenance=Provenance(author="t", from_experiences=[exp.id, "exp_missing"]))
    issues = lint(skill, store=store, toolchain=toolchain)
    assert [(i.code, i.field) for i in errors(issues)] == [
        ("evidence-unknown", "evidence.1.attempt_id"), ("provenance-unknown", "provenance.from_experiences.1")]
    assert "example-verified" in _codes(issues, "info")
    no_files = lint(skill.model_copy(update={"files": {}, "evidence": []}), verify_examples=True, toolchain=toolchain)
    assert "example-skipped" in _codes(no_files, "info")
    assert "evidence-unchecked" in _codes(lint(skill, verify_examples=False), "info")


def test_a_record_with_an_unsafe_file_path_is_an_error():
    issues = lint(make_skill(files={**make_skill().files, "../../etc/evil.py": "x"}), verify_examples=False)
    assert [(i.code, i.field) for i in errors(issues)] == [("example-path", "files")]
