"""The reference optimization agent and experience distillation, on the Messages API.

For users who do not bring their own agent. ``optimize`` runs a tool-use loop whose
tools are the catalog's (``skillbase.tools``, the same the MCP server exposes), called
through ``SkillBase``; ``distill`` turns new attempts and lessons into experiences and
draft skills that await a curator.

    from skillbase import SkillBase

    with SkillBase() as sb:                                   # ANTHROPIC_API_KEY must be set
        run = sb.optimize("row_softmax", budget=4)            # OptimizeResult
        print(run.stop_reason, run.best, run.usage.estimated_cost_usd)
        found = sb.distill()                                   # DistillResult: new experiences, drafts

The key comes from ``ANTHROPIC_API_KEY``; the endpoint from ``ANTHROPIC_BASE_URL`` or
``AgentOptions(base_url=...)``; the model from ``model=`` or ``SKILLBASE_AGENT_MODEL``.
Tokens and an estimated cost are logged per run to ``<home>/agent/runs.jsonl``.

Bringing your own agent framework instead: register the same tools from
``skillbase.tools.anthropic_tool_definitions()`` (name, description, JSON-schema input)
and answer each call with ``skillbase.tools.call``, which validates the arguments and
raises typed errors your framework can return to the model:

    import json
    from skillbase import SkillBase
    from skillbase.errors import SkillbaseError
    from skillbase.tools import anthropic_tool_definitions, call

    tools = anthropic_tool_definitions()          # Messages API `tools=`; for OpenAI-style function
    functions = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                   "parameters": t["input_schema"]}} for t in tools]

    def handle(sb: SkillBase, name: str, arguments: dict) -> tuple[str, bool]:
        try:
            return call(sb, name, arguments, agent="my-agent").model_dump_json(), False
        except SkillbaseError as e:                # bad arguments, unknown task, ...: tell the model
            return json.dumps(e.to_dict()), True   # (content, is_error)

Names load on first use, so importing this package does not import the SDK.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "loop": ("optimize",),
    "distillation": ("distill",),
    "options": ("AgentOptions", "Budget", "RetryPolicy"),
    "models": ("AgentEvent", "DistillResult", "OptimizeResult", "SkillOutcome", "DistilledStep"),
    "usage": ("Usage", "UsageReport", "read_runs"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'skillbase.agent' has no attribute {name!r}")
    return getattr(import_module(f"skillbase.agent.{module}"), name)
