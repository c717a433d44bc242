"""``skillbase demo``: one optimization session through a real MCP client, as an agent sees it.

It seeds the store, starts ``python -m skillbase.mcp_server`` as a subprocess over stdio (as Claude
Code does), and drives the loop on a built-in task: list the tools, load the task, recall,
read the top skill, compile, benchmark the naive and the optimized solutions (sent as source text, the second
a child of the first with its techniques named), record a lesson, recall again to show the
new experience ranked, suggest the next technique and list the lineage. Without a GPU
every benchmark verifies correctness under the Triton interpreter and says timing needs a GPU.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from typing import Any

import anyio
import yaml
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation
from pydantic import BaseModel, Field
from rich.console import Console

from skillbase import seeds
from skillbase.config import Settings
from skillbase.errors import SkillbaseError
from skillbase.version import __version__

# The server inherits what a GPU run, the store and offline model loading need; nothing else.
_PASS_ENV = (
    "SKILLBASE_",
    "CUDA_",
    "NVIDIA_",
    "TRITON_",
    "TORCH_",
    "HF_",
    "LD_LIBRARY_PATH",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "VIRTUAL_ENV",
    "PYTHONPATH",
)


class DemoStep(BaseModel):
    """One tool call as the agent made it and what came back."""

    tool: str
    arguments: dict[str, Any] = Field(description="the arguments, with source texts shortened")
    ok: bool
    summary: str
    seconds: float = Field(description="wall-clock round trip")
    progress_messages: int = 0
    result: dict[str, Any] | None = None


class DemoTranscript(BaseModel):
    """What ``skillbase demo`` did and found."""

    ok: bool = False
    task: str
    home: str
    device: str = ""
    tools: list[str] = Field(default_factory=list)
    steps: list[DemoStep] = Field(default_factory=list)
    lesson_id: str | None = None
    lesson_rank: int | None = Field(None, description="rank of the recorded lesson in the second recall (1 = first)")
    verified: list[str] = Field(default_factory=list)
    timing_note: str | None = None
    seconds: float = 0.0


def _cut(text: str, width: int) -> str:
    """``text`` on one line, cut at a word boundary with an ellipsis when longer than ``width``."""
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder=" …")


def run_demo(settings: Settings, *, task: str = "row_softmax", console: Console | None = None) -> DemoTranscript:
    """Run the whole demo; returns the transcript (``ok`` tells whether every step worked)."""
    # One fact per line, as the agent reads it; never re-wrapped at 80 columns.
    console = console or Console(soft_wrap=True, highlight=False)
    start = time.perf_counter()
    transcript = DemoTranscript(task=task, home=str(settings.home))
    _seed(settings, console)
    anyio.run(_session, settings, transcript, console)
    transcript.seconds = time.perf_counter() - start
    _summary(transcript, console)
    return transcript


def _seed(settings: Settings, console: Console) -> None:
    from skillbase.api import SkillBase

    console.print(
        f"[bold]skillbase demo[/]: one optimization session through a real MCP client (store {settings.home})"
    )
    with console.status("seeding the store: techniques, 40 skills and the measured experiences (first run ~1 min)"):
        with SkillBase(settings) as sb:
            r = sb.init()
    console.print(
        f"seeded: {r.skills_total} skills, {r.experiences_total} experiences, {r.techniques} techniques "
        f"({r.skills_added + r.records_imported} new records, {r.seconds:.1f} s wall clock)"
    )


def _server_params(settings: Settings) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(_PASS_ENV)}
    env.update(
        {
            "SKILLBASE_HOME": str(settings.home),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return StdioServerParameters(command=sys.executable, args=["-m", "skillbase.mcp_server"], env=env)


async def _session(settings: Settings, t: DemoTranscript, console: Console) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    log_path = settings.home / "demo-server.log"
    with open(log_path, "w") as errlog:
        async with stdio_client(_server_params(settings), errlog=errlog) as (read, write):
            async with ClientSession(
                read, write, client_info=Implementation(name="skillbase-demo", version=__version__)
            ) as session:
                init = await session.initialize()
                listed = await session.list_tools()
                t.tools = [tool.name for tool in listed.tools]
                console.print(
                    f"MCP server [bold]{init.server_info.name}[/] {init.server_info.version} started over "
                    f"stdio ({sys.executable} -m skillbase.mcp_server); {len(t.tools)} tools: {', '.join(t.tools)}"
                )
                await _loop(Agent(session, t, console))
    t.ok = all(s.ok for s in t.steps) and t.lesson_rank is not None


class Agent:
    """Calls tools the way an agent does and prints what it sees."""

    def __init__(self, session: ClientSession, transcript: DemoTranscript, console: Console):
        self.session, self.t, self.console = session, transcript, console

    async def call(self, tool: str, arguments: dict[str, Any], show=None) -> dict[str, Any]:
        shown = {k: (f"<{len(v)} characters of source>" if k == "source" else v) for k, v in arguments.items()}
        self.console.print(f"\n[bold cyan]> {tool}[/] {json.dumps(shown)}")
        messages: list[str] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            if message and message not in messages:
                messages.append(message)
                self.console.print(f"  [dim]progress {done:.0%}: {message}[/]")

        start = time.perf_counter()
        result = await self.session.call_tool(tool, arguments, progress_callback=on_progress)
        seconds = time.perf_counter() - start
        data = result.structured_content if not result.is_error else None
        summary = result.content[0].text if result.is_error else (show(data) if show else "ok")
        for line in summary.splitlines():
            self.console.print(f"  {line}" if not result.is_error else f"  [red]{line}[/]")
        self.t.steps.append(
            DemoStep(
                tool=tool,
                arguments=shown,
                ok=not result.is_error,
                summary=summary,
                seconds=round(seconds, 3),
                progress_messages=len(messages),
                result=data,
            )
        )
        if result.is_error:
            raise SkillbaseError(
                f"the demo's {tool} call failed: {summary}", hint=f"see the server log in {self.t.home}/demo-server.log"
            )
        return data


async def _loop(agent: Agent) -> None:
    task = agent.t.task
    naive, optimized, techniques = _solutions(task)
    await agent.call("load_task", {"task": task}, _show_task)
    first = await agent.call("recall", {"task": task, "k": 5}, _show_recall)
    used = [item["id"] for item in first["items"][:2]]
    skills = [item["id"] for item in first["items"] if item["kind"] == "skill"]
    if skills:
        await agent.call("get_skill", {"name": skills[0]}, _show_skill)
        used = list(dict.fromkeys([skills[0], *used]))[:2]
    await agent.call("compile_kernel", {"task": task, "source": optimized}, _show_compile)
    session = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    base = await agent.call("benchmark_kernel", {"task": task, "source": naive, "session": session}, _show_bench)
    agent.t.device = base["report"]["device"]
    best = await agent.call(
        "benchmark_kernel",
        {
            "task": task,
            "source": optimized,
            "parent_id": base["attempt_id"],
            "techniques": techniques,
            "used": used,
            "session": session,
        },
        _show_bench,
    )
    lesson = await agent.call(
        "record_lesson",
        {
            "after_attempt": best["attempt_id"],
            "session": session,
            "title": f"{task}: naive to optimized",
            "lesson": _lesson_text(task, techniques, best),
        },
        _show_lesson,
    )
    agent.t.lesson_id = lesson["id"]
    again = await agent.call(
        "recall",
        {"task": task, "attempt_id": best["attempt_id"], "k": 5},
        lambda d: _show_recall(d, highlight=lesson["id"]),
    )
    ranks = [n for n, item in enumerate(again["items"], 1) if item["id"] == lesson["id"]]
    agent.t.lesson_rank = ranks[0] if ranks else None
    await agent.call("suggest_next", {"task": task, "session": session}, _show_suggestions)
    await agent.call("attempt_history", {"task": task, "session": session}, _show_history)
    agent.t.verified = _verified(agent.t, base, best)
    agent.t.timing_note = best["report"].get("timing_unavailable")


def _solutions(task: str) -> tuple[str, str, list[str]]:
    """The naive and optimized sources of a built-in task and the techniques on the path between them."""
    folder = seeds.TASKS_DIR / task
    if not (folder / "naive.py").is_file() or not (folder / "optimized.py").is_file():
        raise SkillbaseError(
            f"task {task!r} has no naive and optimized solutions to demonstrate",
            hint="use a built-in task such as row_softmax",
        )
    steps = yaml.safe_load((folder / "lineage.yaml").read_text()) if (folder / "lineage.yaml").is_file() else []
    children = {s["parent"]: s for s in steps or []}
    techniques, node = [], "naive"
    while node in children and node != "optimized":
        techniques += [x for x in children[node].get("techniques", []) if x not in techniques]
        node = children[node]["child"]
    return (folder / "naive.py").read_text(), (folder / "optimized.py").read_text(), techniques


def _lesson_text(task: str, techniques: list[str], best: dict[str, Any]) -> str:
    r = best["report"]
    measured = (
        f"It measured {r['speedup_vs_eager']:.2f}x vs eager on {r['hardware']['name']}."
        if r.get("speedup_vs_eager")
        else "It verified correct under the Triton interpreter; the gain still needs timing on a GPU."
    )
    return (
        f"On {task}, the path from the first correct naive kernel to the optimized one applied "
        f"{', '.join(techniques) or 'tuning'}, and every step stayed correct against the reference. {measured}"
    )


def _verified(t: DemoTranscript, base: dict, best: dict) -> list[str]:
    out = [
        f"the MCP server listed {len(t.tools)} tools and answered every call over stdio",
        f"naive and optimized candidates: verdicts {base['report']['verdict']} and {best['report']['verdict']} "
        f"({_trials(best)})",
        f"both recorded as attempts ({base['attempt_id']} -> {best['attempt_id']}) with the lineage and techniques",
        f"the lesson {t.lesson_id} was recorded and recalled at rank {t.lesson_rank}"
        if t.lesson_rank
        else f"the lesson {t.lesson_id} was recorded but not recalled in the top 5",
    ]
    return out


def _trials(bench: dict) -> str:
    c = bench["report"].get("correctness") or {}
    checks = [x for x in c.get("checks", []) if not x.get("skipped")]
    return f"{c.get('trials', 0)} fresh-input trials and {len(checks)} anti-cheat checks"


# -- what the agent sees, one line per fact --------------------------------------------------


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f} ms"


def _show_task(d: dict) -> str:
    s, i = d["summary"], d["summary"]["info"]
    lines = [
        f"{i['name']}: {i['family']} {i['dtype']}, inputs {i['input_shapes']} -> outputs {i['output_shapes']}, "
        f"{i['bytes_moved'] / 1e6:.1f} MB moved, {i['flops'] / 1e9:.2f} GFLOP; reference source "
        f"{len(d['reference_source'])} characters; solutions {', '.join(d['solutions'])}"
    ]
    if s.get("hardware"):
        base = ", ".join(f"{k} {_ms(v)}" for k, v in s["baselines_ms"].items())
        lines.append(
            f"measured before on {s['hardware']}: floor {_ms(s['floor_ms'])}; baselines {base} "
            f"(medians of CUDA-event timings)"
        )
    if s.get("best"):
        lines.append(f"best so far: {s['best']['id']} at {_ms(s['best']['median_ms'])} of {s['attempts']} attempts")
    return "\n".join(lines)


def _show_recall(d: dict, highlight: str | None = None) -> str:
    lines = []
    for n, item in enumerate(d["items"], 1):
        mark = "  <- the lesson just recorded" if item["id"] == highlight else ""
        lines.append(f"{n}. {item['kind']} {item['id']} (score {item['score']:.3f}){mark}: {_cut(item['title'], 70)}")
        lines.append(f"   why: {_cut(item['why'], 150)}")
    if d.get("suggestions"):
        lines.append("next techniques: " + ", ".join(s["technique"] for s in d["suggestions"]))
    return "\n".join(lines)


def _show_skill(d: dict) -> str:
    s = d["skill"]
    return (
        f"{s['name']} v{s['version']} ({s['status']}): {_cut(s['description'], 160)}\n"
        f"{len(s['body'])} characters of body, {len(s['pitfalls'])} pitfalls, examples {', '.join(d['example_files'])}"
    )


def _show_compile(d: dict) -> str:
    kernels = "; ".join(
        f"{k['name']}: {k['registers']} registers, {k['spill_store_bytes']} B spilled, {k['num_warps']} warps"
        for k in d["kernels"]
    )
    return (
        f"{'compiled' if d['ok'] else 'FAILED'} for {d['arch']} in {d['duration_s']:.1f} s: {kernels or 'no kernels'}"
    )


def _show_bench(d: dict) -> str:
    r = d["report"]
    lines = [
        f"{r['verdict']}: {r['message']}",
        f"recorded as {d['attempt_id']}" + (f" (child of {d['parent_id']})" if d.get("parent_id") else ""),
    ]
    if d.get("gain_vs_parent"):
        lines.append(f"{d['gain_vs_parent']:.2f}x faster than its parent (medians, same GPU)")
    return "\n".join(lines)


def _show_lesson(d: dict) -> str:
    gain = f"measured gain {d['gain']:.2f}x" if d.get("gain") else "no measured gain (not timed)"
    return f"experience {d['id']} on {d['task']}: techniques {', '.join(d['techniques'])}; {gain}"


def _show_suggestions(d: dict) -> str:
    return "\n".join(f"{s['technique']} (score {s['score']:.2f}): {_cut(s['why'], 140)}" for s in d["suggestions"])


def _show_history(d: dict) -> str:
    return "\n".join(
        f"{a['id']} <- {a['parent_id'] or 'root'}: {a['verdict']}, techniques "
        f"{', '.join(a['techniques']) or '-'}, median {_ms(a['median_ms'])}"
        for a in d["attempts"]
    )


def _summary(t: DemoTranscript, console: Console) -> None:
    console.print(f"\n[bold]{'done' if t.ok else 'FAILED'}[/] in {t.seconds:.0f} s (wall clock, seeding included)")
    for line in t.verified:
        console.print(f"  verified: {line}")
    if t.timing_note:
        console.print(
            f"  [yellow]not timed[/]: {t.timing_note}. Run `make demo` on a machine with a CUDA GPU "
            "for medians, speedups and % of the floor."
        )
