"""Token usage, an estimated cost, and the run log.

Every request's ``usage`` block (input, output and cache tokens, as the API
reports them) is added up per run. The cost is an ESTIMATE from approximate
list prices per million tokens below; the invoice is the truth. Each run
appends one JSON line to ``<home>/agent/runs.jsonl`` (kind, session, model,
tokens, estimated cost, stop reason, records made), readable with ``read_runs``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skillbase.config import Settings
from skillbase.models import utcnow

PRICE_BASIS = (
    "estimate from approximate list prices in USD per million tokens (cache writes 1.25x and cache "
    "reads 0.1x the input price); not a bill"
)

# (substrings of the model id, input $/MTok, output $/MTok); the first match wins, so specific before
# general. Models not listed get no estimate rather than a guess.
PRICES: tuple[tuple[tuple[str, ...], float, float], ...] = (
    (("opus-4-5", "opus-4-6"), 5.0, 25.0),
    (("opus-4-0", "opus-4-1", "opus-4-2025", "3-opus"), 15.0, 75.0),
    (("sonnet-4", "3-7-sonnet", "3-5-sonnet"), 3.0, 15.0),
    (("haiku-4-5",), 1.0, 5.0),
    (("3-5-haiku",), 0.8, 4.0),
    (("3-haiku",), 0.25, 1.25),
)
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1


def price_of(model: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens for ``model``, or None when no price is known."""
    for patterns, inp, outp in PRICES:
        if any(p in model for p in patterns):
            return inp, outp
    return None


class Usage(BaseModel):
    """Tokens used by one run, all requests together, with the estimated cost."""

    model_config = ConfigDict(extra="forbid")

    model: str
    requests: int = 0
    retries: int = Field(0, description="requests repeated after a rate limit or server error")
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    api_seconds: float = Field(0.0, description="wall-clock time waiting on the API, seconds")

    def add(self, usage: Any, seconds: float) -> None:
        """Add one reply's ``usage`` block (an SDK object or a mapping)."""
        get = usage.get if isinstance(usage, dict) else (lambda k, d=None: getattr(usage, k, d))
        self.requests += 1
        self.input_tokens += get("input_tokens", 0) or 0
        self.output_tokens += get("output_tokens", 0) or 0
        self.cache_creation_input_tokens += get("cache_creation_input_tokens", 0) or 0
        self.cache_read_input_tokens += get("cache_read_input_tokens", 0) or 0
        self.api_seconds += seconds

    @property
    def tokens(self) -> int:
        """Input (cached or not) plus output tokens: what a token budget counts."""
        return self.input_tokens + self.output_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def cost_usd(self) -> float | None:
        """Estimated cost in USD (see PRICE_BASIS); None when the model has no known price."""
        price = price_of(self.model)
        if price is None:
            return None
        inp, outp = price
        dollars = (
            self.input_tokens * inp
            + self.output_tokens * outp
            + self.cache_creation_input_tokens * inp * CACHE_WRITE_FACTOR
            + self.cache_read_input_tokens * inp * CACHE_READ_FACTOR
        )
        return dollars / 1e6

    def report(self) -> "UsageReport":
        """The totals with the estimated cost and how it was computed."""
        cost = self.cost_usd()
        return UsageReport(
            **self.model_dump(),
            total_tokens=self.tokens,
            estimated_cost_usd=cost,
            cost_basis=PRICE_BASIS if cost is not None else f"no price known for model {self.model!r}",
        )

    def line(self) -> str:
        """One line for people: tokens, requests and the estimated cost."""
        cost = self.cost_usd()
        money = f"~${cost:.4f} (estimate from list prices)" if cost is not None else "cost unknown for this model"
        return (
            f"{self.input_tokens:,} input + {self.output_tokens:,} output tokens"
            + (
                f" (+{self.cache_read_input_tokens + self.cache_creation_input_tokens:,} cache)"
                if self.cache_read_input_tokens or self.cache_creation_input_tokens
                else ""
            )
            + f" in {self.requests} requests ({self.retries} retried), {money}"
        )


class UsageReport(Usage):
    """Usage as reported at the end of a run."""

    total_tokens: int
    estimated_cost_usd: float | None = Field(description="USD, an estimate: see cost_basis")
    cost_basis: str


class RunRecord(BaseModel):
    """One line of the run log."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["optimize", "distill"]
    session: str | None = None
    task: str | None = None
    model: str
    base_url: str | None = None
    started_at: datetime
    ended_at: datetime = Field(default_factory=utcnow)
    stop_reason: str
    usage: UsageReport
    records: dict[str, list[str]] = Field(default_factory=dict, description="ids made: attempts, experiences, skills")


def runs_path(settings: Settings) -> Path:
    """Where the run log lives: ``<home>/agent/runs.jsonl``."""
    return settings.home / "agent" / "runs.jsonl"


def log_run(settings: Settings, record: RunRecord) -> Path:
    """Append ``record`` to the run log (one line, written whole so concurrent runs never interleave)."""
    path = runs_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(record.model_dump_json() + "\n")
    return path


def read_runs(settings: Settings, kind: str | None = None) -> list[RunRecord]:
    """The run log, oldest first (only runs of ``kind`` when given); unreadable lines are skipped."""
    path = runs_path(settings)
    if not path.is_file():
        return []
    return [r for r in _parse(path.read_text(encoding="utf-8").splitlines()) if kind is None or r.kind == kind]


def _parse(lines: Iterable[str]) -> Iterable[RunRecord]:
    for line in lines:
        try:
            yield RunRecord.model_validate(json.loads(line))
        except ValueError:
            continue  # a line cut by a crash mid-write; the rest of the log stays readable
