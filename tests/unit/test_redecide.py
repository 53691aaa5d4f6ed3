"""redecide(): recorded decision inputs decided again under overridden config keys."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from executor.policy import DecisionInputs, Layer, LayerVerdict, decide, redecide
from executor.policy.redecide import IncompleteInputs
from executor.wire import RetryPolicy

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

# A 422 the analyzer corrected: recorded after its one LLM call (120 tokens), with the
# counters as they were when it was asked.
FIXED_BY_ANALYZER = DecisionInputs(
    dispatched=True, status=422, parameter_keys=("city",), llm_configured=True,
    llm_calls_used=1, llm_tokens_used=120, elapsed_s=0.2,
    analyzer=LayerVerdict(Layer.ANALYZER, answered=True, should_retry=True,
                          explanation="use PAR", changes={"city": "PAR"},
                          proposed_parameters={"city": "PAR"}, changed_keys=("city",),
                          llm_calls_used_before=0, llm_tokens_used_before=0,
                          elapsed_s_before=0.1),
)
# A 400 layer 3 could not fix and layer 4 corrected: two LLM calls of 120 tokens.
FIXED_BY_RESOLVER = DecisionInputs(
    dispatched=True, status=400, parameter_keys=("currency",), llm_configured=True,
    llm_calls_used=2, llm_tokens_used=240, elapsed_s=0.3,
    analyzer=LayerVerdict(Layer.ANALYZER, answered=True, should_retry=False,
                          explanation="needs data", llm_calls_used_before=0,
                          llm_tokens_used_before=0, elapsed_s_before=0.1),
    resolver=LayerVerdict(Layer.RE_RESOLUTION, answered=True, should_retry=True,
                          explanation="France uses EUR", changes={"currency": "EUR"},
                          proposed_parameters={"currency": "EUR"}, changed_keys=("currency",),
                          llm_calls_used_before=1, llm_tokens_used_before=120,
                          elapsed_s_before=0.2),
)
# FIXED_BY_ANALYZER as recorded by a version that did not keep the counters when asked.
FIXED_BY_ANALYZER_OLD = DecisionInputs(
    dispatched=True, status=422, parameter_keys=("city",), llm_configured=True,
    llm_calls_used=1, llm_tokens_used=120,
    analyzer=LayerVerdict(Layer.ANALYZER, answered=True, should_retry=True,
                          proposed_parameters={"city": "PAR"}, changed_keys=("city",)),
)

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
    ("a_recorded_correction_decides_as_recorded", FIXED_BY_ANALYZER, {},
     "analyzer.accept", "corrected city"),
    ("analyzer_off_drops_its_recorded_verdict", FIXED_BY_ANALYZER,
     {"error_analyzer_enabled": False}, "no_correction.stop", "the error analyzer is disabled"),
    ("feedback_off_drops_every_recorded_verdict", FIXED_BY_RESOLVER,
     {"validation_feedback_enabled": False}, "no_correction.stop",
     "validation_feedback_enabled is false"),
    ("semantic_retry_off_drops_the_resolver_verdict", FIXED_BY_RESOLVER,
     {"semantic_retry_enabled": False}, "no_correction.stop", "layer 3 said cannot fix"),
    ("no_llm_calls_stop_before_the_analyzer_with_the_count_then", FIXED_BY_ANALYZER,
     {"max_llm_calls": 0}, "budget.llm_calls", "0 of 0 calls"),
    ("one_llm_call_lets_the_analyzer_answer", FIXED_BY_ANALYZER,
     {"max_llm_calls": 1}, "analyzer.accept", "corrected city"),
    ("one_llm_call_stops_before_the_resolver", FIXED_BY_RESOLVER,
     {"max_llm_calls": 1}, "budget.llm_calls", "1 of 1 calls"),
    ("tokens_spent_by_the_analyzer_stop_before_the_resolver", FIXED_BY_RESOLVER,
     {"max_total_tokens": 50}, "budget.total_tokens", "120 of 50 tokens"),
    ("a_layer_the_record_never_asked_is_its_ask",
     replace(FIXED_BY_ANALYZER, legacy_callback_set=True, retry_policy=RetryPolicy.EXPLICIT_TRUE),
     {"error_analyzer_enabled": False, "max_llm_calls": 5}, "legacy.ask",
     "consult the legacy correction callback"),
    ("old_records_without_counters_decide_when_no_budget_reads_them", FIXED_BY_ANALYZER_OLD,
     {"max_attempts": 3}, "analyzer.accept", "corrected city"),
]  # fmt: skip


@pytest.mark.parametrize(("inputs", "overrides", "rule_id", "reason_part"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_redecide(inputs, overrides, rule_id, reason_part):
    decision = redecide(inputs.to_dict(), overrides)
    assert decision.rule_id == rule_id, decision.reason
    assert reason_part in decision.reason


def test_a_budget_on_counters_an_old_record_did_not_keep_is_not_redecided():
    with pytest.raises(IncompleteInputs) as raised:
        redecide(FIXED_BY_ANALYZER_OLD.to_dict(), {"max_llm_calls": 1})
    assert raised.value.missing == ("analyzer.llm_calls_used_before",)


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
