"""Results and progress events of the reference agent and of distillation."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skillbase.agent.usage import UsageReport
from skillbase.models import AttemptSummary, Experience

EventKind = Literal["start", "request", "text", "tool", "tool_error", "round", "retry", "stop", "distill"]


class AgentEvent(BaseModel):
    """One step of a run, for a progress view: what happened, in one line, with details."""

    model_config = ConfigDict(extra="forbid")

    kind: EventKind
    message: str
    round: int = 0
    data: dict[str, Any] = Field(default_factory=dict)


OnEvent = Callable[[AgentEvent], None]

StopReason = Literal["budget", "roofline", "no_suggestions", "model_ended", "token_budget", "turn_limit", "max_tokens"]


class OptimizeResult(BaseModel):
    """What one optimization run did: its attempts (the lineage), the best one, the lessons
    recorded, the tokens spent and why it stopped."""

    model_config = ConfigDict(extra="forbid")

    session: str
    task: str
    model: str
    device: str = Field(description="'cuda' (timed) or 'cpu' (verified under the Triton interpreter, not timed)")
    stop_reason: StopReason
    stop_detail: str = Field(description="the stop reason in words")
    rounds: int = Field(description="benchmarks run")
    turns: int = Field(description="model replies")
    attempts: list[AttemptSummary] = Field(default_factory=list, description="this session's attempts, oldest first")
    best: AttemptSummary | None = Field(None, description="fastest correct timed attempt, else the last correct one")
    lessons: list[Experience] = Field(default_factory=list)
    summary: str = Field("", description="the model's closing words")
    usage: UsageReport
    seconds: float = Field(description="wall clock of the whole run")
    notes: list[str] = Field(default_factory=list)
    log_path: str | None = None


class DistilledStep(BaseModel):
    """A parent -> child step that had no lesson and got one from the model."""

    model_config = ConfigDict(extra="forbid")

    experience_id: str
    kind: Literal["improvement", "regression", "fix"]
    before_attempt: str
    after_attempt: str
    gain: float | None = Field(None, description="measured: parent median / child median, same hardware")


class SkillOutcome(BaseModel):
    """What distillation did with one group of experiences."""

    model_config = ConfigDict(extra="forbid")

    name: str
    action: Literal["proposed", "merged", "skipped"]
    version: int | None = None
    status: str | None = None
    techniques: list[str] = Field(default_factory=list)
    experiences: list[str] = Field(default_factory=list, description="evidence: experience ids")
    attempts: list[str] = Field(default_factory=list, description="evidence: attempt ids")
    lint: list[str] = Field(default_factory=list, description="lint findings (errors and warnings)")
    reason: str = ""


class DistillResult(BaseModel):
    """What ``distill`` turned new attempts and lessons into."""

    model_config = ConfigDict(extra="forbid")

    since: datetime | None
    attempts_seen: int
    experiences_seen: int
    distilled: list[DistilledStep] = Field(default_factory=list)
    skills: list[SkillOutcome] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    usage: UsageReport
    seconds: float
    log_path: str | None = None
