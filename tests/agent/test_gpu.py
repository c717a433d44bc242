"""On a GPU: the scripted agent's attempts are timed, and the run stops at the roofline."""

from __future__ import annotations

import pytest

from tests.agent.conftest import last_attempt_id, relu_source
from tests.agent.messages_server import MessagesServer, message, text, tool_use


@pytest.mark.gpu
def test_a_timed_run_stops_at_the_roofline(sb, options_for):
    script = [
        message(tool_use("benchmark_kernel", {"task": "relu", "source": relu_source("naive"),
                                              "techniques": ["masking"]})),
        lambda body: message(tool_use("record_lesson", {
            "after_attempt": last_attempt_id(body), "lesson": "The naive kernel already streams near the copy peak."})),
        message(text("At the roofline; stopping.")),
    ]
    with MessagesServer(script) as server:
        r = sb.optimize("relu", budget={"rounds": 3, "sol_threshold": 20.0}, device="cuda",
                        options=options_for(server))
    [attempt] = r.attempts
    assert r.device == "cuda" and attempt.verdict == "correct"
    assert attempt.median_ms > 0 and attempt.pct_sol >= 20.0
    assert r.stop_reason == "roofline" and r.rounds == 1 and r.best.id == attempt.id
    assert "Benchmarks are closed" in server.tool_results(1)[0]["content"][-1]["text"]
