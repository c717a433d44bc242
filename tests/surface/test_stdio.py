"""The server as Claude Code runs it: ``python -m skillbase.mcp_server`` as a subprocess, driven over
stdio by the SDK's client. Two server processes share one store while both write."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation

from skillbase import seeds
from skillbase.config import Settings
from skillbase.tools import TOOLS

from .conftest import server_command, server_env

RELU = seeds.TASKS_DIR / "relu"
EXPECTED = {t.name for t in TOOLS}
LESSONS_EACH = 3


def _params(home: Path) -> StdioServerParameters:
    command, args = server_command()
    return StdioServerParameters(command=command, args=args, env=server_env(home), cwd=str(home.parent))


async def _open(stack, home: Path, name: str) -> ClientSession:
    errlog = stack.enter_context(open(home.parent / f"{name}.log", "w"))
    read, write = await stack.enter_async_context(stdio_client(_params(home), errlog=errlog))
    session = await stack.enter_async_context(
        ClientSession(read, write, client_info=Implementation(name=name, version="0")))
    await session.initialize()
    return session


async def _call(session: ClientSession, tool: str, args: dict, **kw) -> dict:
    result = await session.call_tool(tool, args, **kw)
    assert not result.is_error, f"{tool}: {result.content[0].text}"
    return result.structured_content


async def _error(session: ClientSession, tool: str, args: dict) -> str:
    result = await session.call_tool(tool, args)
    assert result.is_error, f"{tool} {args} should have failed"
    return result.content[0].text


async def _session(home: Path, out: dict) -> None:
    from contextlib import AsyncExitStack

    async with AsyncExitStack() as stack:
        # Both processes start together and open the same store.
        a, b = await _open(stack, home, "agent-a"), await _open(stack, home, "agent-b")

        listed = await a.list_tools()
        out["tools"] = {t.name: t for t in listed.tools}
        out["templates"] = [t.uri_template for t in (await a.list_resource_templates()).resource_templates]
        prompt = await a.get_prompt("optimize-kernel", {"task": "relu"})
        out["prompt"] = prompt.messages[0].content.text

        out["task"] = await _call(a, "load_task", {"task": "relu"})
        first = await _call(a, "recall", {"task": "relu", "k": 5})
        skill = next(i["id"] for i in first["items"] if i["kind"] == "skill")
        out["skill"] = await _call(a, "get_skill", {"name": skill})
        naive, optimized = (RELU / "naive.py").read_text(), (RELU / "optimized.py").read_text()

        progress: list[tuple[float, str]] = []

        async def on_progress(done, total, message):
            progress.append((done, message))

        base = await _call(a, "benchmark_kernel", {"task": "relu", "source": naive, "session": "s-a"},
                           progress_callback=on_progress)
        best = await _call(a, "benchmark_kernel", {
            "task": "relu", "source": optimized, "parent_id": base["attempt_id"], "session": "s-a",
            "techniques": ["autotuning", "block size tuning"], "used": [skill]})
        out.update(progress=progress, base=base, best=best)

        # Concurrent writers: both processes record lessons at once on the same store.
        results: list[dict] = []

        async def lessons(session: ClientSession, who: str, anchor: dict) -> None:
            for n in range(LESSONS_EACH):
                results.append(await _call(session, "record_lesson", {
                    **anchor, "session": f"s-{who}", "lesson": f"{who} lesson {n}: wide blocks changed nothing "
                                                                 "at the copy roofline on relu"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(lessons, a, "a", {"after_attempt": best["attempt_id"]})
            tg.start_soon(lessons, b, "b", {"task": "relu"})
        out["lessons"] = results

        out["recall_after"] = await _call(a, "recall", {"attempt_id": best["attempt_id"], "k": 20})
        out["recall_words"] = await _call(b, "recall", {"task": "relu", "query": "wide blocks changed nothing at "
                                                                                 "the copy roofline", "k": 5})
        out["suggest"] = await _call(a, "suggest_next", {"task": "relu", "session": "s-a"})
        out["history_b"] = await _call(b, "attempt_history", {"task": "relu", "session": "s-a"})
        out["proposal"] = await _call(b, "propose_skill", {
            "name": "measure-before-widening-blocks", "description": "Check achieved bandwidth before widening "
            "blocks of an elementwise kernel.", "body": "Wider blocks pay only below the copy roofline.",
            "techniques": ["block-size-tuning"], "from_experiences": [results[0]["id"]]})
        attempt = await b.read_resource(f"attempt://{best['attempt_id']}")
        out["attempt_resource"] = json.loads(attempt.contents[0].text)
        out["skill_resource"] = (await a.read_resource(f"skill://{skill}")).contents[0].text

        # Bad input over the real transport: tool errors, then the server still answers.
        out["errors"] = [
            await _error(a, "benchmark_kernel", {"task": "relu", "source": "x" * 10_000_000}),
            await _error(a, "load_task", {"task": "../../etc/passwd"}),
            await _error(a, "recall", {"attempt_id": "att_000000000000_00000000"}),
            await _error(a, "compile_kernel", {"task": "relu"}),
        ]
        out["still_up"] = await _call(a, "get_skill", {"name": skill})


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_whole_session_over_stdio_with_two_server_processes_on_one_store(fresh_home):
    out: dict = {}
    anyio.run(_session, fresh_home, out)

    tools = out["tools"]
    assert set(tools) == EXPECTED
    for t in tools.values():
        assert t.description and t.input_schema["type"] == "object" and t.output_schema, t.name
    assert tools["benchmark_kernel"].input_schema["required"] == ["task"]
    assert set(out["templates"]) == {"skill://{name}", "task://{name}", "attempt://{attempt_id}"}
    assert "load_task" in out["prompt"] and "record_lesson" in out["prompt"]

    assert out["task"]["summary"]["info"]["name"] == "relu" and "class Model" in out["task"]["reference_source"]
    base, best = out["base"], out["best"]
    assert base["report"]["verdict"] == best["report"]["verdict"] == "correct"
    assert best["parent_id"] == base["attempt_id"] and best["recorded"]
    assert out["progress"], "benchmark_kernel sent no progress notifications"
    assert all(0.0 <= done <= 1.0 for done, _ in out["progress"])

    lessons = out["lessons"]
    assert len({e["id"] for e in lessons}) == 2 * LESSONS_EACH
    mine = [e["id"] for e in lessons if e["after_attempt"] == best["attempt_id"]]
    assert set(mine) & {i["id"] for i in out["recall_after"]["items"]}, "the lesson just recorded was not recalled"
    # Process b finds what both processes wrote.
    assert {e["id"] for e in lessons} & {i["id"] for i in out["recall_words"]["items"][:3]}
    assert out["suggest"]["suggestions"]

    # Process b reads what process a wrote: the lineage and the full attempt.
    lineage = out["history_b"]["attempts"]
    assert [a["id"] for a in lineage] == [base["attempt_id"], best["attempt_id"]]
    assert lineage[1]["parent_id"] == base["attempt_id"]
    assert lineage[1]["techniques"] == ["autotuning", "block-size-tuning"]
    assert out["attempt_resource"]["source"] == (RELU / "optimized.py").read_text()
    assert out["proposal"]["status"] == "draft"
    assert out["skill_resource"].startswith("---")

    big, traversal, unknown, missing = out["errors"]
    assert "limit" in big and "Next step" in big
    assert "outside the workspace" in traversal
    assert "NotFound" in unknown and "attempt_history" in unknown
    assert "exactly one of `source`" in missing
    assert out["still_up"]["skill"]["name"]

    # Nothing written by either process was lost.
    from skillbase.api import SkillBase

    with SkillBase(Settings.from_env(env={}, home=fresh_home)) as sb:
        history = sb.attempt_history("relu", session="s-a")
        assert [a.id for a in history] == [base["attempt_id"], best["attempt_id"]]
        for e in lessons:
            assert sb.get_experience(e["id"]).lesson.startswith(("a lesson", "b lesson"))
        assert sb.get_skill("measure-before-widening-blocks").status == "draft"
