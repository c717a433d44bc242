"""Fixtures of the agent tests: one fresh store and toolchain for the whole session (the
Triton interpreter worker starts once), scripted Messages API servers, and helpers to
read what the agent sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillbase.config import Settings

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "seeds" / "tasks" / "relu"
MODEL = "claude-sonnet-4-6"


@pytest.fixture(scope="session")
def sb(tmp_path_factory):
    """A SkillBase over a fresh, unseeded store (the technique vocabulary only). Tests that
    read it back filter by their own session or by time, so they do not see each other."""
    from skillbase import SkillBase

    base = SkillBase(Settings.from_env(env={}, home=tmp_path_factory.mktemp("agent") / "home"))
    yield base
    base.close()


@pytest.fixture(scope="session")
def options_for(sb):
    """AgentOptions pointed at a local server, with a fake key and short backoff."""
    from skillbase.agent.options import AgentOptions, RetryPolicy

    def make(server, **overrides):
        retry = overrides.pop("retry", RetryPolicy(base_delay_s=0.05, max_delay_s=2.0))
        model = overrides.pop("model", MODEL)
        return AgentOptions.from_env(sb.settings, env={"ANTHROPIC_API_KEY": "sk-ant-test"}, base_url=server.url,
                                     model=model, retry=retry, **overrides)

    return make


def relu_source(name: str) -> str:
    """A built-in relu solution's source."""
    return (RELU / f"{name}.py").read_text(encoding="utf-8")


def last_attempt_id(body: dict) -> str:
    """The newest attempt id in the tool results the agent sent (what a model would read)."""
    for msg in reversed(body["messages"]):
        if msg["role"] != "user" or isinstance(msg["content"], str):
            continue
        for block in msg["content"]:
            for part in block.get("content", []) if block.get("type") == "tool_result" else []:
                if '"attempt_id"' in part["text"]:
                    return json.loads(part["text"])["attempt_id"]
    raise AssertionError("no attempt id in the conversation so far")
