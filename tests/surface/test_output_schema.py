"""The tools' published output schemas: the output models' own schemas made cheap to check
(``plain_schema``), deciding every value the same way. An MCP client checks each result against them."""

from __future__ import annotations

import json
from typing import Any, Literal

import anyio
import pytest
from jsonschema import exceptions as jsonschema_exceptions
from jsonschema.validators import validator_for
from mcp.client.client import Client
from pydantic import BaseModel, Field
from referencing import Registry

from skillbase.config import Settings
from skillbase.mcp_server.server import build_server
from skillbase.tools import TOOLS, plain_schema


def _validator(schema: dict[str, Any]):
    """A checker built the way the MCP SDK's client builds it."""
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=Registry())


def _accepts(validator, value: Any) -> bool:
    return jsonschema_exceptions.best_match(validator.iter_errors(value)) is None


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in _refs(v)]
    return [r for v in node for r in _refs(v)] if isinstance(node, list) else []


def _variants(value: Any, limit: int = 400) -> list[Any]:
    """``value`` changed in one place each: a field nulled, given the wrong type, removed; an unknown
    field added; a list item replaced."""
    out: list[Any] = []

    def at(path: tuple, node: Any) -> None:
        if len(out) >= limit:
            return
        for changed in (None, 7 if isinstance(node, str) else "seven", [], {}):
            out.append(_replace(value, path, changed))
        if isinstance(node, dict):
            out.append(_replace(value, path, {**node, "unexpected": 1}))
            for key in node:
                out.append(_replace(value, path, {k: v for k, v in node.items() if k != key}))
                at(path + (key,), node[key])
        elif isinstance(node, list):
            for i, item in enumerate(node[:3]):
                at(path + (i,), item)

    at((), value)
    return out


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    node = copy
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = new
    return copy


@pytest.fixture(scope="module")
def results(module_home, tmp_path_factory) -> dict[str, list[dict]]:
    """Real results of the tools that answer without a GPU or a compiler, through the SDK's client
    (which checks each one against the published schema: a result it refused would raise here)."""
    from skillbase.api import SkillBase

    calls = [("recall", {"task": "row_softmax", "k": 5}), ("recall", {"query": "bank conflicts in shared memory"}),
             ("record_lesson", {"lesson": "Vectorized 128-bit loads halved the transactions of the copy.",
                                "task": "relu", "session": "schema-test"}),
             ("attempt_history", {"task": "row_softmax", "limit": 20}), ("get_skill", {"name": "online-softmax-one-pass"}),
             ("load_task", {"task": "layernorm"}), ("suggest_next", {"task": "matmul"})]
    sb = SkillBase(Settings.from_env(env={}, home=module_home))
    server = build_server(sb, workspace=tmp_path_factory.mktemp("workspace"), warm=False)

    async def main():
        out: dict[str, list[dict]] = {}
        async with Client(server) as client:
            for tool, args in calls:
                result = await client.call_tool(tool, args)
                assert not result.is_error, f"{tool}: {result.content[0].text}"
                out.setdefault(tool, []).append(result.structured_content)
        return out

    try:
        return anyio.run(main)
    finally:
        sb.close()


def test_published_output_schemas_have_no_indirection_left():
    for spec in TOOLS:
        schema = spec.output_schema()
        assert _refs(schema) == [] and "$defs" not in schema, spec.name
        assert {"type": "null"} not in _branches(schema), spec.name
        assert _validator(schema), spec.name


def _branches(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [b for b in node.get("anyOf", [])] + [b for v in node.values() for b in _branches(v)]
    return [b for v in node for b in _branches(v)] if isinstance(node, list) else []


def test_published_schemas_decide_every_result_and_every_changed_result_as_the_models_schemas_do(results):
    accepted = refused = 0
    for spec in TOOLS:
        if spec.name not in results:
            continue
        ours, models = _validator(spec.output_schema()), _validator(spec.output_model.model_json_schema())
        for result in results[spec.name]:
            assert _accepts(ours, result) and _accepts(models, result), spec.name
            for variant in _variants(result):
                verdict = _accepts(models, variant)
                assert _accepts(ours, variant) == verdict, (spec.name, variant)
                accepted += verdict
                refused += not verdict
    assert accepted > 50 and refused > 500, (accepted, refused)


class _Node(BaseModel):
    name: str
    children: list[_Node] = Field(default_factory=list)


class _Point(BaseModel):
    x: float = Field(ge=0)
    label: str | None = None
    kind: str | None = Field(None, pattern="^[a-z]+$", description="lower-case")
    tag: list[int] | None = None
    choice: int | str | None = None
    mode: Literal["a", "b"] | None = None
    level: Literal[1, 2, 3] | str | None = None


class _Tree(BaseModel):
    root: _Node
    at: _Point | None = Field(None, description="where it is drawn")
    points: list[_Point] = []


def test_plain_schema_keeps_recursive_definitions_and_leaves_other_unions_alone():
    original = _Tree.model_json_schema()
    plain = plain_schema(original)
    assert set(plain["$defs"]) == {"_Node"} and set(_refs(plain)) == {"#/$defs/_Node"}
    at = plain["properties"]["at"]
    assert at["type"] == ["object", "null"] and at["description"] == "where it is drawn"
    point = plain["properties"]["points"]["items"]["properties"]
    assert point["label"]["type"] == ["string", "null"]
    assert point["kind"]["type"] == ["string", "null"] and point["kind"]["pattern"] == "^[a-z]+$"
    assert point["tag"]["type"] == ["array", "null"]
    assert point["mode"]["type"] == ["string", "null"] and point["mode"]["enum"] == ["a", "b", None]
    assert "anyOf" in point["choice"] and "anyOf" in point["level"]  # three branches each

    ours, models = _validator(plain), _validator(original)
    tree = {"root": {"name": "a", "children": [{"name": "b", "children": []}]},
            "at": {"x": 1.0, "label": None, "kind": "abc", "tag": [1], "choice": "c", "mode": "a", "level": 2},
            "points": [{"x": 2.0}, {"x": 0.5, "kind": None, "mode": None}]}
    variants = _variants(tree) + [_replace(tree, ("at", "kind"), "ABC"), _replace(tree, ("at", "x"), -1),
                                  _replace(tree, ("at", "mode"), "c"), _replace(tree, ("at", "level"), 4.5),
                                  _replace(tree, ("root", "children", 0), 3)]
    verdicts = [_accepts(models, v) for v in variants]
    assert [_accepts(ours, v) for v in variants] == verdicts
    assert any(verdicts) and not all(verdicts)


def test_no_input_schema_composes_at_its_top_level():
    """The Anthropic Messages API refuses a tool whose input_schema has anyOf, oneOf or allOf at its top
    level, and Claude Code forwards MCP tools' schemas to it as they are: one such tool makes every request
    of the session fail. The rules that span fields (exactly one of source and source_path; at least one
    of recall's task, query, source and attempt_id; a lesson's anchor) are stated in each tool's and field's
    description and enforced when the call is validated."""
    from skillbase.tools import TOOLS

    for spec in TOOLS:
        schema = spec.input_schema()
        assert schema["type"] == "object" and not {"anyOf", "oneOf", "allOf", "not"} & set(schema), spec.name
