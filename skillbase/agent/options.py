"""What an agent run needs besides the store: the API key, endpoint and model, the
retry policy, and the budget that ends an optimization.

The key comes from ``ANTHROPIC_API_KEY`` (or ``api_key=``), the endpoint from
``ANTHROPIC_BASE_URL`` (or ``base_url=``; the public API when neither is set),
the model from ``model=``, else ``Settings.agent_model`` (``SKILLBASE_AGENT_MODEL``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from skillbase.config import Settings
from skillbase.errors import ConfigError, InvalidInput

KEY_VAR = "ANTHROPIC_API_KEY"
BASE_URL_VAR = "ANTHROPIC_BASE_URL"


class RetryPolicy(BaseModel):
    """How API failures that may pass (429, 408, 409, 5xx, 529, lost connections) are retried:
    exponential backoff from ``base_delay_s``, doubling, capped at ``max_delay_s``; a
    ``retry-after`` header from the server is honoured up to the same cap."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: int = Field(5, ge=0, le=20)
    base_delay_s: float = Field(1.0, ge=0.0)
    max_delay_s: float = Field(60.0, ge=0.0)


class AgentOptions(BaseModel):
    """Connection and model settings of one agent run. Build with ``AgentOptions.from_env``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    api_key: SecretStr
    base_url: str | None = Field(None, description="Messages API endpoint; None is the SDK's default")
    max_output_tokens: int = Field(8192, ge=256, description="per reply; a candidate kernel is often 2-4k tokens")
    request_timeout_s: float = Field(300.0, gt=0)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    agent_name: str = Field("skillbase-agent", description="recorded as the agent of attempts and lessons")

    @classmethod
    def from_env(
        cls,
        settings: Settings,
        env: Mapping[str, str] | None = None,
        *,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        **overrides,
    ) -> "AgentOptions":
        """Options from explicit values, then the environment, then ``settings``.

        Raises ConfigError, before anything is sent, when no API key is given or set.
        """
        env = os.environ if env is None else env
        key = api_key or env.get(KEY_VAR, "").strip()
        if not key:
            raise ConfigError(
                f"no API key: {KEY_VAR} is not set",
                hint=f"export {KEY_VAR}=sk-ant-... (and {BASE_URL_VAR} for another endpoint), "
                "or bring your own agent through the MCP server: skillbase serve",
            )
        try:
            return cls(
                model=model or settings.agent_model,
                api_key=SecretStr(key),
                base_url=base_url or env.get(BASE_URL_VAR) or None,
                **overrides,
            )
        except ValueError as e:
            raise ConfigError(f"invalid agent options: {e}") from None


class Budget(BaseModel):
    """When an optimization stops: after ``rounds`` benchmarks, past ``tokens`` (input plus
    output, all requests), or once an attempt reaches ``sol_threshold`` percent of the
    roofline floor. ``max_turns`` bounds the model's replies (default 8 per round + 6)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rounds: int = Field(5, ge=1, le=100, description="benchmarks (attempts) at most")
    tokens: int | None = Field(None, ge=1000, description="input + output tokens at most, all requests together")
    sol_threshold: float = Field(90.0, gt=0, le=100, description="% of the roofline floor that counts as done")
    max_turns: int | None = Field(None, ge=1)
    wrap_up_turns: int = Field(3, ge=1, le=10, description="replies allowed after a stop, to record the last lesson")

    @classmethod
    def of(cls, budget: "int | Budget | Mapping | None") -> "Budget":
        """A Budget from a round count, a mapping of fields, or a Budget."""
        if budget is None:
            return cls()
        if isinstance(budget, Budget):
            return budget
        if isinstance(budget, bool):
            raise InvalidInput("a budget is a number of rounds or a Budget, not a bool")
        try:
            return cls(rounds=budget) if isinstance(budget, int) else cls(**dict(budget))
        except ValueError as e:
            raise InvalidInput(f"invalid budget: {e}", hint="rounds is 1-100; tokens at least 1000") from None

    @property
    def turns(self) -> int:
        """Model replies allowed before the wrap-up."""
        return self.max_turns or self.rounds * 8 + 6
