"""Fixtures of the surface tests: one store seeded per session (``skillbase init``, the slow
part), copied into tmp_path for every test that writes, so each starts from the same state."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from skillbase.config import Settings
from skillbase.models import AppliesWhen, Skill

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def seeded_home(tmp_path_factory) -> Path:
    """A store after ``init``: 40 skills, the measured experiences, the techniques. Never written
    after seeding; tests copy it with ``fresh_home``."""
    from skillbase.api import SkillBase

    home = tmp_path_factory.mktemp("seeded") / "home"
    with SkillBase(Settings.from_env(env={}, home=home)) as sb:
        report = sb.init()
    assert report.skills_total >= 40 and report.experiences_total > 0
    return home


@pytest.fixture
def fresh_home(tmp_path, seeded_home) -> Path:
    """A private copy of the seeded store."""
    home = tmp_path / "home"
    shutil.copytree(seeded_home, home)
    return home


@pytest.fixture(scope="module")
def module_home(tmp_path_factory, seeded_home) -> Path:
    """A copy of the seeded store shared by one test module."""
    home = tmp_path_factory.mktemp("module") / "home"
    shutil.copytree(seeded_home, home)
    return home


def server_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment a server subprocess gets: this interpreter's, the store, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLBASE_")}
    env.update({"SKILLBASE_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "HF_HUB_DISABLE_PROGRESS_BARS": "1", "PYTHONPATH": str(ROOT)}, **extra)
    return env


def server_command() -> tuple[str, list[str]]:
    """How Claude Code would start the server: the console script's module, over stdio."""
    return sys.executable, ["-m", "skillbase.mcp_server"]


# -- the curation UI's tests -------------------------------------------------------------------

BODY = """## When to use it
- A row-wise reduction whose rows fit in one block.

## The idea
Keep the row in registers: one read, one write.

## Steps
1. One program per row.
2. Reduce in registers.
3. Store once.

## Example
```python
row = tl.load(x_ptr + offs, mask=mask, other=0.0)
```

## How to check it worked
- Bytes moved equal one read and one write of the tensor.
"""
DRAFTS = ("ui-http-approve", "ui-http-reject", "ui-browser-approve", "ui-http-login")


def draft(name: str) -> Skill:
    """A lint-clean draft without example files (approving it needs no worker)."""
    return Skill(name=name, description=f"Keeps each row in registers ({name}). Use it when rows fit in one block.",
                 techniques=["online-softmax"], applies_when=AppliesWhen(families=["softmax"]),
                 languages=["triton"], expected_effect="One read and one write of the tensor.", body=BODY)


@pytest.fixture(scope="session")
def ui_home(tmp_path_factory, seeded_home) -> Path:
    """The store the UI tests share (tests/surface/test_ui*.py): a copy of the seeded store plus
    the drafts of DRAFTS, proposed by an agent. Each test that curates uses its own draft."""
    from skillbase.api import SkillBase

    home = tmp_path_factory.mktemp("ui") / "home"
    shutil.copytree(seeded_home, home)
    with SkillBase(Settings.from_env(env={}, home=home)) as sb:
        for name in DRAFTS:
            sb.propose_skill(draft(name), agent="test-agent")
    return home


@pytest.fixture(scope="session")
def ui_sb(ui_home):
    """One SkillBase over the shared store for the in-process apps."""
    from skillbase.api import SkillBase

    sb = SkillBase(Settings.from_env(env={}, home=ui_home))
    yield sb
    sb.close()
