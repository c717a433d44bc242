"""Messages API calls with retries, backoff and usage accounting.

The SDK's own retries are turned off so that every retry is counted, reported
as a progress event and bounded by one policy (``RetryPolicy``): rate limits
(429), timeouts (408), conflicts (409), server errors (5xx, 529 overloaded) and
lost connections are retried with exponential backoff, honouring the server's
``retry-after`` / ``retry-after-ms`` and ``x-should-retry`` headers. Anything else
(bad request, bad key, unknown model) fails at once. Either way the caller gets
an ``AgentError`` that says what happened and what to do.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Any

from skillbase.agent.models import AgentEvent, OnEvent
from skillbase.agent.options import BASE_URL_VAR, KEY_VAR, AgentOptions, RetryPolicy
from skillbase.agent.usage import Usage
from skillbase.errors import AgentError

RETRYABLE_STATUS = frozenset({408, 409, 429})


def retryable_status(status: int, headers: Mapping[str, str]) -> bool:
    """Whether a failed request may pass if repeated (the server's x-should-retry wins)."""
    told = (headers.get("x-should-retry") or "").lower()
    if told in ("true", "false"):
        return told == "true"
    return status in RETRYABLE_STATUS or status >= 500


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait, from retry-after-ms or retry-after (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def backoff_delay(retry: int, policy: RetryPolicy, asked: float | None) -> float:
    """Seconds to wait before retry number ``retry`` (0-based): what the server asked for when it
    asked for no more than the cap, else exponential backoff with jitter (so many clients
    that failed together do not retry together)."""
    if asked is not None and asked <= policy.max_delay_s:
        return asked
    delay = min(policy.max_delay_s, policy.base_delay_s * 2**retry)
    return delay * (1 - 0.25 * random.random())


class MessagesClient:
    """One conversation partner: ``create`` sends a Messages API request and returns the reply."""

    def __init__(self, options: AgentOptions, *, on_event: OnEvent | None = None):
        import anthropic  # imported here: skillbase itself must import without the SDK loaded

        self.options = options
        self.usage = Usage(model=options.model)
        self._anthropic = anthropic
        self._on_event = on_event
        self._client = anthropic.Anthropic(
            api_key=options.api_key.get_secret_value(),
            base_url=options.base_url,
            max_retries=0,
            timeout=options.request_timeout_s,
        )

    @property
    def endpoint(self) -> str:
        """The base URL requests go to."""
        return str(self._client.base_url)

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()

    def create(
        self,
        *,
        system: str,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Any:
        """One reply (an SDK ``Message``), after as many retries as the policy allows.

        Raises AgentError when the request fails for good.
        """
        kwargs: dict[str, Any] = dict(
            model=self.options.model,
            system=system,
            messages=list(messages),
            max_tokens=max_tokens or self.options.max_output_tokens,
        )
        if tools:
            kwargs["tools"] = list(tools)
        if tool_choice:
            kwargs["tool_choice"] = tool_choice
        policy = self.options.retry
        waited = 0.0
        for retry in range(policy.max_retries + 1):
            start = time.perf_counter()
            try:
                reply = self._client.messages.create(**kwargs)
            except self._anthropic.APIStatusError as e:
                failure = e
                can_retry = retryable_status(e.status_code, e.response.headers)
                asked = retry_after(e.response.headers)
            except self._anthropic.APIConnectionError as e:
                failure, can_retry, asked = e, True, None
            else:
                self.usage.add(reply.usage, time.perf_counter() - start)
                return reply
            if not can_retry or retry == policy.max_retries:
                raise self._error(failure, retries=retry, waited=waited)
            delay = backoff_delay(retry, policy, asked)
            self.usage.retries += 1
            self._emit(
                AgentEvent(
                    kind="retry",
                    message=f"{_describe(failure)}; retrying in {delay:.1f} s "
                    f"(retry {retry + 1} of {policy.max_retries})",
                    data={"delay_s": delay, "retry_after_s": asked, "retry": retry + 1},
                )
            )
            time.sleep(delay)
            waited += delay
        raise AssertionError("unreachable: the loop returns or raises")

    def _emit(self, event: AgentEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)

    def _error(self, e: Exception, *, retries: int, waited: float) -> AgentError:
        """The AgentError for a request that failed for good, with the next step."""
        after = f" after {retries} retries over {waited:.1f} s" if retries else ""
        status = getattr(e, "status_code", None)
        what = _describe(e)
        if status == 401:
            return AgentError(
                f"the Messages API rejected the API key: {what}",
                hint=f"check {KEY_VAR}; it must be a valid key for {self.endpoint}",
            )
        if status == 429:
            return AgentError(
                f"rate limited by the Messages API{after}: {what}",
                hint="wait a minute and run again, or lower the budget; a higher usage tier raises the limits",
            )
        if status is not None and status >= 500:
            return AgentError(
                f"the Messages API kept failing{after}: {what}",
                hint="the service may be overloaded or down; try again later",
            )
        if status is None:
            return AgentError(
                f"could not reach the Messages API at {self.endpoint}{after}: {what}",
                hint=f"check the network, or {BASE_URL_VAR} / --base-url",
            )
        return AgentError(
            f"the Messages API refused the request: {what}",
            hint=f"check the model name ({self.options.model!r}) and the endpoint {self.endpoint}",
        )


def _describe(e: Exception) -> str:
    """'429 rate_limit_error: Number of requests ...' or the connection error's text."""
    status = getattr(e, "status_code", None)
    if status is None:
        return f"{type(e).__name__}: {getattr(e, 'message', str(e))}"
    kind = getattr(e, "type", None) or type(e).__name__
    text = getattr(e, "api_message", None) or getattr(e, "message", str(e))
    return f"{status} {kind}: {text}"
