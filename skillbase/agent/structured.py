"""Structured answers from the model: one forced tool call, validated, with a chance to fix it.

Distillation needs records, not prose. The model is made to call one tool whose
input schema is a pydantic model; input that fails validation (or the caller's
own check, such as a lint) goes back as an ``is_error`` tool result naming what
to fix, and the model tries again, up to ``tries`` times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from skillbase.agent.client import MessagesClient

M = TypeVar("M", bound=BaseModel)


@dataclass
class Answer(Generic[M]):
    """The validated value (None when every try failed) and the last problems found."""

    value: M | None
    problems: list[str]
    value_checked: Any = None  # what ``check`` built from the value, when it passed


def tool_spec(name: str, description: str, model: type[BaseModel]) -> dict[str, Any]:
    """A Messages API tool definition whose input schema is ``model``'s JSON schema."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    return {"name": name, "description": description, "input_schema": schema}


def ask(
    client: MessagesClient,
    *,
    system: str,
    prompt: str,
    tool: dict[str, Any],
    model: type[M],
    check: Callable[[M], tuple[Any, list[str]]] | None = None,
    tries: int = 2,
) -> Answer[M]:
    """Ask for one call of ``tool`` and validate it into ``model``; ``check`` may build from the
    value and return problems to send back. Raises AgentError only when the API fails."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    problems: list[str] = []
    for _ in range(tries):
        reply = client.create(
            system=system, messages=messages, tools=[tool], tool_choice={"type": "tool", "name": tool["name"]}
        )
        use = next((b for b in reply.content if b.type == "tool_use"), None)
        if use is None:
            problems = [f"the model answered without calling {tool['name']}"]
            messages += [
                {"role": "assistant", "content": [_text(reply)]},
                {"role": "user", "content": f"Answer by calling {tool['name']}."},
            ]
            continue
        value, built, problems = _validate(use, model, check)
        if not problems:
            return Answer(value, [], built)
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use.id,
                        "is_error": True,
                        "content": "Fix these and call the tool again: " + "; ".join(problems),
                    }
                ],
            },
        ]
    return Answer(None, problems)


def _validate(use: Any, model: type[M], check) -> tuple[M | None, Any, list[str]]:
    try:
        value = model.model_validate(use.input if isinstance(use.input, dict) else {})
    except ValidationError as e:
        return None, None, [f"`{'.'.join(map(str, err['loc'])) or 'input'}`: {err['msg']}" for err in e.errors()[:8]]
    if check is None:
        return value, None, []
    built, problems = check(value)
    return value, built, problems


def _text(reply: Any) -> dict[str, Any]:
    words = " ".join(b.text for b in reply.content if b.type == "text") or "(no text)"
    return {"type": "text", "text": words}
