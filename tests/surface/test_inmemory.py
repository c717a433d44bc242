"""The server in-process through the SDK's in-memory client: every tool's error path, worker
crashes, bounded output, concurrent calls. Fast, because nothing starts but the server."""

from __future__ import annotations

import anyio
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from skillbase import seeds
from skillbase.mcp_server.server import WORK_MS_KEY, build_server
from skillbase.config import Settings
from skillbase.tools import MAX_TRACEBACK_CHARS, TOOLS

NO_ATTEMPT = "att_000000000000_00000000"
NO_EXPERIENCE = "exp_000000000000_00000000"
TEN_MB = "#" * 10_000_000
NAIVE = (seeds.TASKS_DIR / "relu" / "naive.py").read_text()

# (tool, arguments, words the error must contain). Every tool, every kind of bad input.
BAD_CALLS = [
    ("load_task", {}, "`task` is required"),
    ("load_task", {"task": 123}, "`task`"),
    ("load_task", {"task": "no_such_task"}, "row_softmax"),
    ("load_task", {"task": "../../etc/passwd"}, "outside the workspace"),
    ("load_task", {"task": "/etc/passwd"}, "outside the workspace"),
    ("load_task", {"task": "relu", "shape": [1]}, "`shape` is not a parameter"),
    ("compile_kernel", {"task": "relu"}, "exactly one of `source`"),
    ("compile_kernel", {"task": "relu", "source": TEN_MB}, "limit"),
    ("compile_kernel", {"task": "relu", "source_path": "../../../etc/passwd"}, "outside the workspace"),
    ("compile_kernel", {"task": "relu", "source": NAIVE, "arch": "hopper"}, "`arch`"),
    ("benchmark_kernel", {"task": "relu", "source": TEN_MB}, "limit"),
    ("benchmark_kernel", {"task": "relu", "source": NAIVE, "parent_id": NO_ATTEMPT}, "attempt_history"),
    ("benchmark_kernel", {"task": "relu", "source": NAIVE, "parent_id": "42"}, "`parent_id`"),
    ("benchmark_kernel", {"task": "relu", "source": NAIVE, "techniques": 7}, "`techniques`"),
    ("benchmark_kernel", {"task": "../seeds/tasks/relu/../../../etc/passwd", "source": NAIVE}, "outside"),
    ("benchmark_kernel", {"task": "nope", "source": NAIVE, "device": "tpu"}, "`device`"),
    ("recall", {}, "at least one of `task`"),
    ("recall", {"task": "relu", "k": 1000}, "`k`"),
    ("recall", {"attempt_id": NO_ATTEMPT}, "attempt_history"),
    ("suggest_next", {"task": "no_such_task"}, "row_softmax"),
    ("suggest_next", {"task": "relu", "k": "many"}, "`k`"),
    ("record_lesson", {"lesson": ""}, "`lesson`"),
    ("record_lesson", {"lesson": "works"}, "after_attempt"),
    ("record_lesson", {"lesson": "works", "after_attempt": NO_ATTEMPT}, "attempt_history"),
    ("get_skill", {"name": "online-softmax"}, "did you mean"),
    ("get_skill", {"name": "coalesced-memory-access", "version": 0}, "`version`"),
    ("get_skill", {"name": "coalesced-memory-access", "version": 99}, "NotFound"),
    ("propose_skill", {"name": "Bad Name!", "description": "d", "body": "b"}, "`name`"),
    ("propose_skill", {"name": "a-skill", "description": "d"}, "`body` is required"),
    ("propose_skill", {"name": "a-skill", "description": "d", "body": "b", "from_experiences": [NO_EXPERIENCE]},
     NO_EXPERIENCE),
    ("profile_kernel", {"task": "relu"}, "exactly one of `source`"),
    ("profile_kernel", {"task": "relu", "source": NAIVE, "attempt_id": NO_ATTEMPT}, "attempt_history"),
    ("profile_kernel", {"task": "relu", "source": NAIVE, "device": "tpu"}, "`device`"),
    ("attempt_history", {"task": "../../../etc/passwd"}, "outside the workspace"),
    ("attempt_history", {"task": "relu", "limit": 0}, "`limit`"),
    ("list_techniques", {"category": "no-such-category"}, "categories:"),
    ("list_techniques", {"category": ""}, "`category`"),
]


@pytest.fixture(scope="module")
def server(module_home, tmp_path_factory):
    from skillbase.api import SkillBase

    sb = SkillBase(Settings.from_env(env={}, home=module_home))
    srv = build_server(sb, workspace=tmp_path_factory.mktemp("workspace"), warm=False)
    yield sb, srv
    sb.close()


def _run(server, fn):
    async def main():
        async with Client(server[1]) as client:
            return await fn(client)

    return anyio.run(main)


def test_every_tool_is_exercised_by_the_bad_input_cases():
    assert {tool for tool, _, _ in BAD_CALLS} == {t.name for t in TOOLS}


def test_bad_input_on_every_tool_is_a_tool_error_with_a_next_step_and_loses_nothing(server):
    sb = server[0]
    before = sb.stats().counts

    async def calls(client):
        errors = []
        for tool, args, _ in BAD_CALLS:
            result = await client.call_tool(tool, args)
            errors.append((result.is_error, result.content[0].text))
        unknown = await client.call_tool("optimize_everything", {})
        alive = await client.call_tool("get_skill", {"name": "coalesced-memory-access"})
        return errors, unknown, alive

    errors, unknown, alive = _run(server, calls)
    for (tool, args, words), (is_error, text) in zip(BAD_CALLS, errors):
        assert is_error, f"{tool} accepted {str(args)[:80]}"
        assert words in text, f"{tool} {str(args)[:80]}: {text[:300]}"
        assert "Next step" in text, f"{tool}: no next step in {text[:300]}"
        assert len(text) < 4000, f"{tool}: an error of {len(text)} characters"
    assert unknown.is_error
    assert not alive.is_error and alive.structured_content["skill"]["name"] == "coalesced-memory-access"
    assert sb.stats().counts == before, "a failed call changed the store"


CRASHES = NAIVE.replace("class ModelNew(nn.Module):", "import os\n\n\nclass ModelNew(nn.Module):").replace(
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        os._exit(3)\n")
RAISES = NAIVE.replace(
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        deep(60)\n") + '''

def deep(n):
    if n == 0:
        raise RuntimeError("the kernel launch failed: " + "details " * 400)
    deep(n - 1)
'''


def test_crashing_and_failing_candidates_are_verdicts_and_the_server_stays_up(server):
    assert "os._exit(3)" in CRASHES and "deep(60)" in RAISES

    async def calls(client):
        raised = await client.call_tool("benchmark_kernel", {"task": "relu", "source": RAISES, "device": "cpu"})
        crashed = await client.call_tool("benchmark_kernel", {"task": "relu", "source": CRASHES, "device": "cpu"})
        history = await client.call_tool("attempt_history", {"task": "relu"})
        return raised, crashed, history

    raised, crashed, history = _run(server, calls)
    assert not raised.is_error and not crashed.is_error
    r = raised.structured_content
    assert r["report"]["verdict"] == "runtime_error" and r["attempt_id"]
    tb = r["report"]["error"]["traceback"]
    assert len(tb) <= MAX_TRACEBACK_CHARS + 200 and f"attempt://{r['attempt_id']}" in tb
    c = crashed.structured_content
    assert c["report"]["verdict"] in ("crashed", "runtime_error"), c["report"]["message"]
    ids = [a["id"] for a in history.structured_content["attempts"]]
    assert r["attempt_id"] in ids and c["attempt_id"] in ids
    # The full traceback stays in the store, behind the resource the clipped one names.
    assert len(server[0].get_attempt(r["attempt_id"]).bench_report.error.traceback) > len(tb)


def test_concurrent_calls_and_two_clients_on_one_server(server):
    calls = [("recall", {"task": "row_softmax", "k": 3}), ("recall", {"query": "bank conflicts in shared memory"}),
             ("get_skill", {"name": "coalesced-memory-access"}), ("load_task", {"task": "matmul"}),
             ("suggest_next", {"task": "layernorm"}), ("attempt_history", {"task": "row_softmax"})]

    async def main():
        results: dict[tuple[int, int], object] = {}
        async with Client(server[1]) as a, Client(server[1]) as b:
            async with anyio.create_task_group() as tg:
                for n, client in enumerate((a, b)):
                    for m, (tool, args) in enumerate(calls):
                        async def one(n=n, m=m, client=client, tool=tool, args=args):
                            results[n, m] = await client.call_tool(tool, args)

                        tg.start_soon(one)
        return results

    results = anyio.run(main)
    assert len(results) == 2 * len(calls)
    for (n, m), result in results.items():
        assert not result.is_error, f"{calls[m][0]}: {result.content[0].text}"
        assert result.meta[WORK_MS_KEY] >= 0
    assert results[0, 2].structured_content == results[1, 2].structured_content


def test_a_server_serves_the_catalog_it_is_given(server):
    # build_server(catalog=...): only those tools, each through the same handler (validation, pools,
    # structured results); the load benchmark's canned server runs on this.
    from dataclasses import replace

    from skillbase.models import RecallResult

    by_name = {spec.name: spec for spec in TOOLS}
    answer = RecallResult(query="a fixed answer", notes=["from the catalog given"])
    catalog = [replace(by_name["recall"], fn=lambda sb, args, ctx: answer), by_name["get_skill"]]
    srv = build_server(server[0], warm=False, catalog=catalog)

    async def main():
        async with Client(srv) as client:
            listed = await client.list_tools()
            got = await client.call_tool("recall", {"query": "anything at all", "k": 2})
            refused = await client.call_tool("recall", {"k": 2})  # still validated: no task, no query
            gone = await client.call_tool("attempt_history", {"task": "relu"})
            return listed, got, refused, gone

    listed, got, refused, gone = anyio.run(main)
    assert sorted(t.name for t in listed.tools) == ["get_skill", "recall"]
    assert not got.is_error and got.structured_content["notes"] == ["from the catalog given"]
    assert got.meta[WORK_MS_KEY] >= 0
    assert refused.is_error and "at least one of `task`" in refused.content[0].text
    assert gone.is_error


def test_resources_and_prompt(server):
    async def calls(client):
        templates = await client.list_resource_templates()
        task = await client.read_resource("task://row_softmax")
        skill = await client.read_resource("skill://coalesced-memory-access")
        prompt = await client.get_prompt("optimize-kernel", {"task": "matmul", "rounds": "2"})
        try:
            await client.read_resource(f"attempt://{NO_ATTEMPT}")
            missing = None
        except MCPError as e:
            missing = str(e)
        alive = await client.read_resource("skill://coalesced-memory-access")
        return templates, task, skill, prompt, missing, alive

    templates, task, skill, prompt, missing, alive = _run(server, calls)
    assert {t.uri_template for t in templates.resource_templates} == {
        "skill://{name}", "task://{name}", "attempt://{attempt_id}"}
    assert "class Model" in task.contents[0].text and '"bytes_moved"' in task.contents[0].text
    assert "name: coalesced-memory-access" in skill.contents[0].text
    assert "`matmul`" in prompt.messages[0].content.text and "up to 2 rounds" in prompt.messages[0].content.text
    assert missing and NO_ATTEMPT in missing
    assert alive.contents[0].text == skill.contents[0].text


def test_profile_without_a_gpu_is_a_typed_unavailable_answer(server):
    """No GPU here: profile_kernel answers (never hangs or errors) with the reason and what was measured instead."""
    async def calls(client):
        return [await client.call_tool("profile_kernel", {"task": "relu", "source": NAIVE, "device": d})
                for d in ("cuda", "auto")]

    for result in _run(server, calls):
        assert not result.is_error, result.content[0].text
        p = result.structured_content
        assert p["available"] is False and p["unavailable"] == "no_gpu" and p["kernels"] == []
        assert p["compile"]["ok"] and p["compile"]["kernels"][0]["name"] == "relu_kernel"
        assert any(m.startswith("roofline: memory-bound") for m in p["measured_instead"])
        if p["attempt_id"]:  # the seeded store holds this source's measured attempt: stored with it
            assert server[0].memory.get_profile(p["attempt_id"]).unavailable == "no_gpu"
        else:
            assert "not stored" in p["notes"][-1]


def test_a_client_finds_the_lesson_it_just_recorded_while_indexing_lags(server):
    """Each tool call runs in a context of its own; a client's recall must still see the lesson the
    same client recorded a moment before, even when the index follower is behind the ledger."""
    import time

    store = server[0].memory
    original = store._follower._sync

    def lagging():
        time.sleep(0.8)  # the follower behind the ledger, as under load
        return original()

    text = "Rows of 1.5 MiB split over twelve co-resident programs read each byte once: 87% of bandwidth"
    store._follower._sync = lagging
    try:
        async def fn(client):
            await client.call_tool("recall", {"query": "warm the embedding model up", "k": 1})
            lesson = await client.call_tool("record_lesson", {"lesson": text, "task": "row_softmax"})
            assert not lesson.is_error, lesson.content[0].text
            found = await client.call_tool("recall", {"query": text, "k": 5})
            return lesson.structured_content["id"], found.structured_content

        lesson_id, found = _run(server, fn)
    finally:
        store._follower._sync = original
    item = next((i for i in found["items"] if i["id"] == lesson_id), None)
    assert item is not None, [i["id"] for i in found["items"]]
    # Found by meaning, not only by its words: the vector index held it when the recall ran.
    assert "close in meaning" in item["why"], item["why"]


def test_lookups_by_key_are_answered_on_the_event_loop_once_the_store_is_open(fresh_home, tmp_path):
    """attempt_history by a task's name and get_skill are ledger lookups: once the store is open the
    server answers them on its event loop, not through a thread (two more waits for the interpreter lock
    under load). Before the store is open, and for a task given as a file (which is loaded), the call goes
    to a thread: the event loop never opens a store or imports a task."""
    import shutil
    import threading

    from skillbase.api import SkillBase

    task_file = tmp_path / "work" / "my_relu.py"
    task_file.parent.mkdir()
    shutil.copy(seeds.TASKS_DIR / "relu" / "task.py", task_file)
    sb = SkillBase(Settings.from_env(env={}, home=fresh_home))
    threads: list[int] = []
    real = sb.attempt_history

    def spy(*args, **kwargs):
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    sb.attempt_history = spy
    real_skill = sb.get_skill
    skill_threads: list[int] = []

    def skill_spy(*args, **kwargs):
        skill_threads.append(threading.get_ident())
        return real_skill(*args, **kwargs)

    sb.get_skill = skill_spy
    srv = build_server(sb, workspace=task_file.parent, warm=False)

    async def main():
        loop_thread = threading.get_ident()
        answers = []
        async with Client(srv) as client:
            for args in ({"task": "relu"}, {"task": "relu"}, {"task": "my_relu.py"}, {"task": "no_such_task"}):
                answers.append(await client.call_tool("attempt_history", args))
            skill = await client.call_tool("get_skill", {"name": "coalesced-memory-access", "include_examples": True})
            assert not skill.is_error, skill.content[0].text
        return loop_thread, answers

    try:
        assert not sb.memory_open
        loop_thread, answers = anyio.run(main)
    finally:
        sb.close()
    for a in answers:
        assert not a.is_error, a.content[0].text
    assert answers[0].structured_content == answers[1].structured_content  # one answer, either way
    assert answers[0].structured_content["attempts"]  # the seeded store's relu attempts
    assert threads[0] != loop_thread  # the store was not open yet: a thread opened it
    assert threads[1] == loop_thread  # open: answered on the event loop
    assert threads[2] != loop_thread  # a task file is loaded in a thread
    assert threads[3] == loop_thread  # a name only the store might know: a lookup
    assert skill_threads == [loop_thread]
