"""Bad input and bad days: no key, rate limits, a failing API, malformed tool calls, limits.
None of these benchmark a kernel, so they are fast; they share the session's store."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillbase.agent.client import backoff_delay, retry_after
from skillbase.agent.distillation import parse_since
from skillbase.agent.options import AgentOptions, Budget, RetryPolicy
from skillbase.agent.usage import Usage, read_runs
from skillbase.config import Settings
from skillbase.errors import AgentError, ConfigError, InvalidInput, ToolchainUnavailable
from skillbase.models import utcnow
from tests.agent.conftest import MODEL
from tests.agent.messages_server import Fail, MessagesServer, message, text, tool_use


def _quick_end() -> list:
    return [message(tool_use("load_task", {"task": "relu"})), message(text("Nothing more to try."))]


def test_missing_key_is_a_clean_config_error(sb, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError) as e:
        sb.optimize("relu")
    assert "ANTHROPIC_API_KEY" in e.value.message and e.value.exit_code == 7
    with pytest.raises(ConfigError):
        sb.distill()


def test_missing_key_on_the_command_line_exits_7_without_a_traceback(tmp_path, monkeypatch):
    from skillbase.console import app

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for command in (["optimize", "relu"], ["distill", "--json"]):
        result = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), *command])
        assert result.exit_code == 7, result.output
        assert "ANTHROPIC_API_KEY is not set" in result.output and "Traceback" not in result.output


def test_rate_limit_is_retried_after_the_servers_retry_after(sb, options_for):
    events = []
    script = [Fail(429, "rate_limit_error", "Number of requests exceeded", {"retry-after": "1"}), *_quick_end()]
    with MessagesServer(script) as server:
        start = time.perf_counter()
        r = sb.optimize("relu", budget=1, options=options_for(server), progress=events.append)
        elapsed = time.perf_counter() - start
    assert len(server.received) == 3 and r.stop_reason == "model_ended"
    assert r.usage.retries == 1 and r.usage.requests == 2
    assert elapsed >= 1.0  # waited what the server asked, not the 0.05 s backoff
    [retry] = [e for e in events if e.kind == "retry"]
    assert retry.data["retry_after_s"] == 1.0 and "429" in retry.message


def test_a_persistent_server_error_ends_in_a_clear_agent_error(sb, options_for):
    policy = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.05)
    with MessagesServer([Fail(500, "api_error", "Internal server error")], repeat_last=True) as server:
        with pytest.raises(AgentError) as e:
            sb.optimize("relu", budget=1, options=options_for(server, retry=policy))
    assert len(server.received) == 3  # the first try and two retries
    assert "kept failing after 2 retries" in e.value.message and "500" in e.value.message
    assert e.value.hint and e.value.exit_code == 8
    assert read_runs(sb.settings, "optimize")[-1].stop_reason.startswith("error:")  # the spent tokens are logged


def test_a_bad_request_is_not_retried(sb, options_for):
    with MessagesServer([Fail(400, "invalid_request_error", "model: unknown model")], repeat_last=True) as server:
        with pytest.raises(AgentError) as e:
            sb.optimize("relu", budget=1, options=options_for(server))
    assert len(server.received) == 1 and "refused the request" in e.value.message


def test_malformed_tool_input_goes_back_to_the_model_as_a_tool_error(sb, options_for):
    huge = "# padding\n" * 30_000  # 300 kB, over the 256 kB source limit
    script = [
        message(tool_use("benchmark_kernel", {"task": "relu", "sorce": "import torch"}),
                tool_use("optimise_everything", {"task": "relu"}),
                tool_use("compile_kernel", {"task": "relu", "source": huge}),
                tool_use("record_lesson", {"lesson": "no anchor"})),
        message(tool_use("load_task", {"task": "relu"})),
        message(text("Giving up.")),
    ]
    events = []
    with MessagesServer(script) as server:
        r = sb.optimize("relu", budget=1, options=options_for(server), progress=events.append)
    answers = server.tool_results(1)
    assert [a["is_error"] for a in answers] == [True, True, True, True]
    said = [json.loads(a["content"][0]["text"]) for a in answers]
    assert "`sorce` is not a parameter of benchmark_kernel" in said[0]["message"]
    assert "no tool named 'optimise_everything'" in said[1]["message"] and "load_task" in said[1]["hint"]
    assert "bytes" in said[2]["message"] and said[2]["hint"]
    assert "after_attempt" in said[3]["message"]
    assert not server.tool_results(2)[0].get("is_error")  # the loop went on
    assert r.stop_reason == "model_ended" and r.rounds == 0 and r.attempts == []
    assert sum(e.kind == "tool_error" for e in events) == 4


def test_the_token_budget_stops_the_run(sb, options_for):
    loads = [message(tool_use("load_task", {"task": "relu"}), input_tokens=4000, output_tokens=100)] * 5
    with MessagesServer(loads) as server:
        r = sb.optimize("relu", budget={"rounds": 3, "tokens": 8000}, options=options_for(server))
    assert r.stop_reason == "token_budget" and len(server.received) == 2 and r.usage.tokens == 8200


def test_gpu_without_a_gpu_fails_before_any_request(sb, options_for):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with MessagesServer([]) as server:
        with pytest.raises(ToolchainUnavailable) as e:
            sb.optimize("relu", device="cuda", options=options_for(server))
    assert "--gpu" in e.value.message and "without --gpu" in e.value.hint and server.received == []


def test_optimize_on_the_command_line_prints_json_and_exits_9_without_a_correct_attempt(tmp_path):
    from skillbase.console import app

    with MessagesServer(_quick_end()) as server:
        env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.url, "SKILLBASE_AGENT_MODEL": MODEL}
        result = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "optimize", "relu", "--cpu",
                                          "--budget", "1", "--json"], env=env)
    assert result.exit_code == 9, result.output
    out = json.loads(result.stdout)
    assert out["stop_reason"] == "model_ended" and out["model"] == MODEL and out["device"] == "cpu"
    assert out["usage"]["requests"] == 2 and "estimate" in out["usage"]["cost_basis"]
    assert any(v.endswith("sk-ant-test") for v in server.received[0].headers.values())  # the key from the env


# -- the small parts --------------------------------------------------------------


def test_retry_after_reads_seconds_milliseconds_and_dates():
    assert retry_after({"retry-after": "2.5"}) == 2.5
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    when = datetime.now(timezone.utc) + timedelta(seconds=30)
    assert 25 < retry_after({"retry-after": format_datetime(when, usegmt=True)}) <= 30
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


def test_backoff_doubles_is_capped_and_honours_the_server_up_to_the_cap():
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0)
    assert [round(backoff_delay(n, policy, 0.5), 2) for n in range(3)] == [0.5, 0.5, 0.5]
    delays = [backoff_delay(n, policy, None) for n in range(6)]
    assert all(0.75 * min(8.0, 2 ** n) <= d <= min(8.0, 2 ** n) for n, d in enumerate(delays))
    assert backoff_delay(0, policy, 3600.0) <= 1.0  # an absurd retry-after falls back to backoff


def test_cost_is_an_estimate_from_list_prices_or_unknown():
    u = Usage(model="claude-sonnet-4-6", input_tokens=1_000_000, output_tokens=100_000, cache_read_input_tokens=1_000_000)
    assert u.cost_usd() == pytest.approx(3.0 + 1.5 + 0.3)
    assert Usage(model="some-local-model", input_tokens=10).cost_usd() is None
    assert "no price known" in Usage(model="some-local-model").report().cost_basis


def test_since_and_budget_parsing():
    assert abs((utcnow() - parse_since("2h")).total_seconds() - 7200) < 5
    assert parse_since("2026-11-20").tzinfo is not None
    with pytest.raises(InvalidInput):
        parse_since("last tuesday")
    assert Budget.of(3).rounds == 3 and Budget.of(3).turns == 30
    with pytest.raises(InvalidInput):
        Budget.of(0)
    with pytest.raises(ConfigError):
        AgentOptions.from_env(Settings.from_env(env={}, home=Path("/nonexistent")), env={})
