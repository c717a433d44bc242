"""Transcripts of the tool calls a real MCP client made: tool, arguments, and a one-line
summary of the result, checked against the tool's output model.

Set ``SKILLBASE_E2E_OUT=DIR`` to keep them: each end-to-end test writes
``DIR/<name>.json`` (the client, its version and the calls), the record behind the
transcripts in docs/performance.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from skillbase.tools import TOOLS_BY_NAME

LONG_ARGUMENT_CHARS = 200


@dataclass
class Call:
    """One tool call as the client made it and the result it got back."""

    tool: str
    arguments: dict[str, Any]
    result: str


def parse_result(tool: str, payload: str | dict[str, Any]) -> BaseModel:
    """The result as our output model (JSON text or an already decoded object); raises
    pydantic's ValidationError when it does not match the tool's output schema."""
    model = TOOLS_BY_NAME[tool].output_model
    return model.model_validate_json(payload) if isinstance(payload, str) else model.model_validate(payload)


def summarize(tool: str, result: BaseModel) -> str:
    """One line saying what came back."""
    data = result.model_dump(mode="json")
    if tool == "load_task":
        info = data["summary"]["info"]
        return f"{info['name']}: {info['family']} {info['dtype']}, shape {info['shape']}, {info['bytes_moved']} bytes moved"
    if tool == "recall":
        items = data["items"]
        return f"{len(items)} items: " + ", ".join(f"{i['kind']} {i['id']}" for i in items[:3])
    if tool == "benchmark_kernel":
        return f"{data['attempt_id']}: {data['report']['message'].split(';')[0]}"
    if tool == "record_lesson":
        return f"{data['id']} after {data['after_attempt']}"
    if tool == "attempt_history":
        return f"{len(data['attempts'])} attempt(s), best {data['best_id']}"
    if tool == "get_skill":
        return f"skill {data['skill']['name']} v{data['skill']['version']}"
    return ", ".join(sorted(data))[:120]


def shorten(arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments with long strings (kernel sources) replaced by their length."""
    return {k: f"<{len(v)} characters>" if isinstance(v, str) and len(v) > LONG_ARGUMENT_CHARS else v
            for k, v in arguments.items()}


def keep(name: str, client: str, version: str, calls: list[Call], tmp: Path, **facts: Any) -> Path:
    """Write the transcript (and any ``facts`` about the run) to ``tmp`` and, when
    SKILLBASE_E2E_OUT is set, there too."""
    record = {"client": client, "version": version, **facts, "calls": [asdict(c) for c in calls]}
    text = json.dumps(record, indent=1) + "\n"
    path = tmp / f"{name}.json"
    path.write_text(text, encoding="utf-8")
    if out := os.environ.get("SKILLBASE_E2E_OUT"):
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(text, encoding="utf-8")
    return path
