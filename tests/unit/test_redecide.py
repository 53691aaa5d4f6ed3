"""redecide(): recorded decision inputs decided again under overridden config keys."""

from __future__ import annotations

from typing import Any

import pytest

from executor.policy import DecisionInputs, decide, redecide

# A 503 on the last of three attempts: the recorded decision is budget.attempts.
LAST_503 = DecisionInputs(dispatched=True, status=503, attempt_number=3, tool="weather")
# A 503 on the first attempt: the recorded decision resends after the computed backoff.
FIRST_503 = DecisionInputs(dispatched=True, status=503, attempt_number=1, tool="weather")
# A 429 asking for a 30 s wait, honoured under the default 60 s limit.
LONG_RETRY_AFTER = DecisionInputs(dispatched=True, status=429, retry_after_ms=30_000.0,
                                  retry_after_source="retry_after_header")
# A 400 with an LLM and the analyzer on: the recorded decision asks layer 3.
CORRECTABLE_400 = DecisionInputs(dispatched=True, status=400, parameter_keys=("city",),
                                 llm_configured=True)

# name, recorded inputs, overrides, rule id, reason part
CASES: list[tuple[str, DecisionInputs, dict[str, Any], str, str]] = [
    ("no_overrides_decide_as_recorded", LAST_503, {},
     "budget.attempts", "all 3 attempts are used"),
    ("more_attempts_turn_a_budget_stop_into_a_resend", LAST_503, {"max_attempts": 5},
     "transient.retry_same", "attempt 4 of 5"),
    ("fewer_tool_retries_stop_the_resend", FIRST_503, {"max_retries_per_tool": 0},
     "budget.retries_per_tool", "weather"),
    ("a_lower_retry_after_limit_stops_the_wait", LONG_RETRY_AFTER,
     {"retry_after_max_ms": 1000}, "budget.retry_after_max", "retry_after_max_ms"),
    ("recorded_400_asks_the_analyzer", CORRECTABLE_400, {}, "analyzer.ask", "layer 3"),
    ("analyzer_off_stops_without_correction", CORRECTABLE_400,
     {"error_analyzer_enabled": False}, "no_correction.stop", "the error analyzer is disabled"),
]  # fmt: skip


@pytest.mark.parametrize(("inputs", "overrides", "rule_id", "reason_part"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_redecide(inputs, overrides, rule_id, reason_part):
    decision = redecide(inputs.to_dict(), overrides)
    assert decision.rule_id == rule_id, decision.reason
    assert reason_part in decision.reason


def test_backoff_overrides_change_the_delay_and_keep_the_other_settings():
    recorded = decide(FIRST_503)
    faster = redecide(FIRST_503.to_dict(), {"initial_delay_ms": 100, "jitter": False})
    assert faster.rule_id == recorded.rule_id == "transient.retry_same"
    assert faster.delay_ms == 100.0
    assert faster.inputs["backoff"] == {"initial_delay_ns": 100_000_000,
                                        "max_delay_ns": 10_000_000_000,
                                        "backoff_factor": 2.0, "jitter_enabled": False}


BAD_OVERRIDES = [
    ("unknown_key", {"max_attempt": 5}, "unknown config key 'max_attempt'"),
    ("key_decide_does_not_read", {"timeout_s": 5}, "config key 'timeout_s' does not change"),
    ("bad_value", {"max_attempts": 0}, "config.max_attempts: expected an integer >= 1, got 0"),
    ("wrong_type", {"jitter": "no"}, "config.jitter: expected true or false"),
]  # fmt: skip


@pytest.mark.parametrize(("overrides", "message"), [c[1:] for c in BAD_OVERRIDES],
                         ids=[c[0] for c in BAD_OVERRIDES])
def test_bad_overrides_name_the_key(overrides, message):
    with pytest.raises(ValueError) as raised:
        redecide(LAST_503.to_dict(), overrides)
    assert message in str(raised.value)
