"""Run the model's tool calls through the catalog (``skillbase.tools``) for one agent run.

Every ``tool_use`` block becomes exactly one ``tool_result`` block. Whatever the model
sends, the loop never crashes on it: an unknown tool, arguments that fail the
input model, an oversized call, a typed skillbase error or a tool that breaks
all come back as ``is_error`` results that say what to fix, and the loop goes on.

The harness owns some arguments: the session of writes (every attempt and lesson is
filed under this run's session; reads may look at other sessions), the device, and the parent of a benchmark when the
model gives none (the run's current best attempt), so the lineage is never lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from skillbase import tools as catalog
from skillbase.agent.models import AgentEvent, OnEvent
from skillbase.errors import InvalidInput, SkillbaseError
from skillbase.models import BenchmarkResult, Experience

if TYPE_CHECKING:
    from skillbase.api import SkillBase

MAX_RESULT_CHARS = 24_000  # what one tool result may put into the conversation
ARGUMENT_SLACK_BYTES = 16_000  # room for the other arguments beside a source at the size limit
BENCH_TOOLS = frozenset({"benchmark_kernel", "compile_kernel"})
OWN_SESSION_TOOLS = frozenset({"benchmark_kernel", "record_lesson"})  # writes are filed under the run's session


@dataclass
class RunState:
    """What the harness knows of the run so far."""

    task: str
    session: str
    device: str
    max_rounds: int = 1_000_000
    rounds: int = 0
    attempts: list[str] = field(default_factory=list)
    best_id: str | None = None
    best_ms: float | None = None
    best_pct_sol: float | None = None
    lessons: list[str] = field(default_factory=list)
    had_suggestions: bool = False
    suggestions_exhausted: bool = False
    wrapping_up: str | None = None  # why benchmarks are closed, once a stop condition is met

    def add_attempt(self, result: BenchmarkResult) -> None:
        """Count a benchmark; the best is the fastest correct timed attempt, else the latest correct one."""
        self.rounds += 1
        if not result.attempt_id:
            return
        self.attempts.append(result.attempt_id)
        report = result.report
        if report.verdict != "correct":
            return
        median = report.timing.median_ms if report.timing else None
        if median is not None and (self.best_ms is None or median < self.best_ms):
            self.best_id, self.best_ms = result.attempt_id, median
            self.best_pct_sol = report.roofline.pct_sol if report.roofline else None
        elif median is None and self.best_ms is None:
            self.best_id = result.attempt_id


class ToolRunner:
    """Executes tool calls for one run; see the module docstring for what it guarantees."""

    def __init__(
        self,
        sb: "SkillBase",
        state: RunState,
        *,
        agent: str,
        workspace: Path | None = None,
        on_event: OnEvent | None = None,
    ):
        self.sb = sb
        self.state = state
        self.agent = agent
        self.workspace = workspace or Path.cwd()
        self._on_event = on_event

    def run_all(self, blocks: Iterable[Any]) -> list[dict[str, Any]]:
        """The tool_result blocks answering the reply's tool_use blocks, in order."""
        return [self.run(b) for b in blocks]

    def run(self, block: Any) -> dict[str, Any]:
        """Run one tool_use block (an SDK object or a dict) and return its tool_result block."""
        use_id, name, arguments = _fields(block)
        try:
            arguments = self._prepare(name, arguments)
            output = catalog.call(self.sb, name, arguments, agent=self.agent, workspace=self.workspace)
        except SkillbaseError as e:
            return self._error(use_id, name, {**e.to_dict()})
        except Exception as e:  # noqa: BLE001 - a tool that breaks is reported to the model, never a dead loop
            return self._error(
                use_id,
                name,
                {
                    "error": type(e).__name__,
                    "message": str(e)[:2000],
                    "hint": "this is a fault of the tool, not of your call; try another step or end the run",
                },
            )
        self._emit("tool", f"{name}: {_gist(name, output)}", {"tool": name})
        notes = self._after(name, output)
        content = [{"type": "text", "text": _clip(output.model_dump_json(exclude_none=True))}]
        content += [{"type": "text", "text": n} for n in notes]
        return {"type": "tool_result", "tool_use_id": use_id, "content": content}

    # -- before: guard and fill in the harness's arguments ---------------------

    def _prepare(self, name: str, arguments: Any) -> dict[str, Any]:
        spec = catalog.get_tool(name)  # InvalidInput listing the tools for an unknown name
        if not isinstance(arguments, dict):
            raise InvalidInput(f"{name} takes a JSON object of arguments", hint=spec.usage())
        size = len(json.dumps(arguments).encode())
        limit = self.sb.settings.max_source_bytes + ARGUMENT_SLACK_BYTES
        if size > limit:
            raise InvalidInput(
                f"the arguments of {name} are {size:,} bytes; at most {limit:,} are accepted",
                hint="send one solution module: only ModelNew and its kernels, no data, no copies of the reference",
            )
        closed = self.state.wrapping_up or (
            "the round budget is spent"
            if name == "benchmark_kernel" and self.state.rounds >= self.state.max_rounds
            else None
        )
        if name in BENCH_TOOLS and closed:
            raise InvalidInput(
                f"no more candidates in this run: {closed}",
                hint="record_lesson for the latest attempt if you have not, then end your turn with a short summary",
            )
        args = dict(arguments)
        if name in OWN_SESSION_TOOLS:
            args["session"] = self.state.session
        if name in ("benchmark_kernel", "profile_kernel"):
            args["device"] = self.state.device
            if not args.get("parent_id") and self.state.best_id:
                args["parent_id"] = self.state.best_id
        return args

    # -- after: follow the run's progress ----------------------------------------

    def _after(self, name: str, output: BaseModel) -> list[str]:
        if isinstance(output, BenchmarkResult):
            self.state.add_attempt(output)
            return [self._round_note(output)]
        if isinstance(output, Experience):
            self.state.lessons.append(output.id)
        if isinstance(output, catalog.SuggestionList):
            if output.suggestions:
                self.state.had_suggestions = True
            elif self.state.had_suggestions:
                self.state.suggestions_exhausted = True
            else:
                return [
                    "harness: the memory has no suggestions for this task yet; choose techniques from the task "
                    "and your own knowledge"
                ]
        return []

    def _round_note(self, result: BenchmarkResult) -> str:
        s = self.state
        r = result.report
        timing = (
            f"median {r.timing.median_ms:.4f} ms" if r.timing else f"not timed ({r.timing_unavailable or 'no timing'})"
        )
        self._emit(
            "round",
            f"round {s.rounds}: {r.verdict}, {timing}",
            {"attempt_id": result.attempt_id, "verdict": r.verdict, "parent_id": result.parent_id},
        )
        best = f"best so far: {s.best_id}" if s.best_id else "no correct attempt yet"
        return (
            f"harness: round {s.rounds} recorded as {result.attempt_id} (parent {result.parent_id or 'none'}): "
            f"{r.verdict}, {timing}. {best}. Reflect on what this result shows, then record_lesson with "
            f"after_attempt={result.attempt_id} before the next candidate."
        )

    # -- plumbing -------------------------------------------------------------------

    def _error(self, use_id: str, name: str, payload: dict[str, Any]) -> dict[str, Any]:
        self._emit("tool_error", f"{name}: {payload.get('message')}", {"tool": name, **payload})
        return {
            "type": "tool_result",
            "tool_use_id": use_id,
            "is_error": True,
            "content": [{"type": "text", "text": json.dumps(payload)}],
        }

    def _emit(self, kind: str, message: str, data: dict[str, Any]) -> None:
        if self._on_event is not None:
            self._on_event(AgentEvent(kind=kind, message=message, round=self.state.rounds, data=data))


def _fields(block: Any) -> tuple[str, str, Any]:
    if isinstance(block, dict):
        return block["id"], block["name"], block.get("input")
    return block.id, block.name, block.input


def _clip(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return text[:MAX_RESULT_CHARS] + f"... [{len(text) - MAX_RESULT_CHARS} more characters cut]"


def _gist(name: str, output: BaseModel) -> str:
    """A few words on a tool's result for the progress view."""
    if isinstance(output, BenchmarkResult):
        return f"{output.report.verdict} -> {output.attempt_id}"
    if isinstance(output, Experience):
        return f"lesson {output.id}" + (f" (measured gain {output.gain:.2f}x)" if output.gain else "")
    if isinstance(output, catalog.SuggestionList):
        return ", ".join(s.technique for s in output.suggestions) or "no suggestions"
    if name == "recall":
        return f"{len(output.items)} items"
    if name == "compile_kernel":
        return "compiled" if output.ok else "compile failed"
    return "ok"
