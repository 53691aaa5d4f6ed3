"""decide(): one named case per routing behaviour, asserting action, rule id and reason."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from executor.policy import (
    Action,
    DecisionInputs,
    Layer,
    LayerVerdict,
    assess_correction,
    decide,
    with_verdict,
)
from executor.wire import RetryPolicy

TRUE, FALSE, UNSPEC = (
    RetryPolicy.EXPLICIT_TRUE,
    RetryPolicy.EXPLICIT_FALSE,
    RetryPolicy.UNSPECIFIED,
)

PARAMS = {"city": "Tokio", "units": "metric"}


def base(**fields: Any) -> DecisionInputs:
    """A dispatched attempt with an LLM configured and default budgets."""
    defaults: dict[str, Any] = dict(
        dispatched=True,
        status=400,
        parameter_keys=tuple(PARAMS),
        llm_configured=True,
    )
    defaults.update(fields)
    return DecisionInputs(**defaults)


def verdict(layer: Layer, *, should_retry: bool = True, changes: dict | None = None,
            replace_all: dict | None = None, transient: bool = False,
            protected: dict | None = None, schema: dict | None = None,
            answered: bool = True, failure: str | None = None) -> LayerVerdict:
    """A layer's answer assessed against PARAMS."""
    proposed = replace_all if replace_all is not None else {**PARAMS, **(changes or {})}
    return assess_correction(
        layer, answered=answered, current_parameters=PARAMS,
        proposed_parameters=proposed if answered else None,
        protected_keys=protected or {}, schema=schema, plan_step_ids=("step-1", "step-2"),
        should_retry=should_retry, is_transient=transient, explanation="because",
        changes=changes, failure=failure,
    )


ANALYZER_FIX = verdict(Layer.ANALYZER, changes={"city": "Tokyo"})
ANALYZER_CANNOT = verdict(Layer.ANALYZER, should_retry=False)
ANALYZER_TRANSIENT_EMPTY = verdict(Layer.ANALYZER, should_retry=True, changes={}, transient=True)
ANALYZER_CANNOT_TRANSIENT = verdict(Layer.ANALYZER, should_retry=False, transient=True)
ANALYZER_MALFORMED = verdict(Layer.ANALYZER, answered=False, failure="malformed answer: x")
RESOLVER_FIX = verdict(Layer.RE_RESOLUTION, replace_all={"city": "Tokyo", "units": "metric"})
LEGACY_FIX = verdict(Layer.LEGACY, replace_all={"city": "Tokyo", "units": "metric"})


def unavailable(layer: Layer, failures: str) -> LayerVerdict:
    """A layer whose LLM endpoint failed on every try."""
    return replace(verdict(layer, answered=False, failure="LLM call failed: HTTP 503"),
                   unavailable=failures)


ANALYZER_UNAVAILABLE = unavailable(Layer.ANALYZER, "HTTP 503 ×3")

CASES: list[tuple[str, DecisionInputs, Action, str, str]] = [
    # --- before dispatch (row 0, 12, 13, circuit)
    ("guard_rejects_unresolved_binding",
     base(dispatched=False, status=None, guard_violations=("unresolved {{step-1.x}}",)),
     Action.REJECT_PREDISPATCH, "guard.reject_predispatch", "pre-dispatch guard"),
    ("clean_parameters_dispatch", base(dispatched=False, status=None),
     Action.DISPATCH, "predispatch.dispatch", "no pre-dispatch rule"),
    ("cancelled_before_dispatch", base(dispatched=False, status=None, cancelled=True),
     Action.STOP_CANCELLED, "cancel.before_dispatch", "cancelled"),
    ("wall_clock_used_before_dispatch",
     base(dispatched=False, status=None, elapsed_s=31.0, max_wall_clock_s=30.0),
     Action.STOP_BUDGET, "budget.wall_clock.before_dispatch", "wall-clock"),
    ("circuit_open_before_dispatch", base(dispatched=False, status=None, circuit_open=True),
     Action.STOP_CIRCUIT_OPEN, "circuit.open", "circuit breaker is open"),
    # --- success (row 1)
    ("200_success", base(status=200), Action.SUCCESS, "success.2xx", "HTTP 200 is success"),
    ("204_success", base(status=204), Action.SUCCESS, "success.2xx", "204"),
    ("2xx_with_retryable_false_is_still_success", base(status=200, retry_policy=FALSE),
     Action.SUCCESS, "success.2xx", "success"),
    # --- explicit false (row 2)
    ("retryable_false_on_503_stops", base(status=503, retry_policy=FALSE),
     Action.STOP_REFUSED, "refused.explicit_false", "retryable=false on HTTP 503"),
    ("retryable_false_on_500_stops", base(status=500, retry_policy=FALSE),
     Action.STOP_REFUSED, "refused.explicit_false", "explicit refusal precedes"),
    ("retryable_false_on_429_stops", base(status=429, retry_policy=FALSE),
     Action.STOP_REFUSED, "refused.explicit_false", "HTTP 429"),
    ("retryable_false_on_400_stops_before_analyzer", base(status=400, retry_policy=FALSE),
     Action.STOP_REFUSED, "refused.explicit_false", "HTTP 400"),
    ("retryable_false_on_orchestrator", base(status=500, retry_policy=FALSE, orchestrator=True),
     Action.STOP_REFUSED, "refused.explicit_false", "retryable=false"),
    # --- terminal (row 3)
    ("401_terminal", base(status=401), Action.STOP_TERMINAL, "terminal.auth_or_method",
     "HTTP 401 is terminal"),
    ("403_terminal_even_with_retryable_true", base(status=403, retry_policy=TRUE),
     Action.STOP_TERMINAL, "terminal.auth_or_method", "no retry, no LLM layer"),
    ("405_terminal", base(status=405), Action.STOP_TERMINAL, "terminal.auth_or_method", "405"),
    ("401_with_resolver_never_reaches_layer_4",
     base(status=401, analyzer=ANALYZER_CANNOT, has_dependencies=True),
     Action.STOP_TERMINAL, "terminal.auth_or_method", "401"),
    # --- orchestrator (row 4)
    ("orchestrator_500_single_dispatch", base(status=500, orchestrator=True),
     Action.STOP_SINGLE_DISPATCH, "orchestrator.single_dispatch", "one physical dispatch"),
    ("orchestrator_400_no_analyzer", base(status=400, orchestrator=True),
     Action.STOP_SINGLE_DISPATCH, "orchestrator.single_dispatch", "HTTP 400"),
    ("orchestrator_transport_failure", base(status=0, transport_error="timeout",
                                            orchestrator=True),
     Action.STOP_SINGLE_DISPATCH, "orchestrator.single_dispatch", "transport failure"),
    # --- transient (row 5)
    ("503_without_flag_retries_same", base(status=503),
     Action.RETRY_SAME, "transient.retry_same", "after 542.1 ms (backoff)"),
    ("503_with_retryable_true_retries_same", base(status=503, retry_policy=TRUE),
     Action.RETRY_SAME, "transient.retry_same", "transient"),
    ("429_retries_same", base(status=429), Action.RETRY_SAME, "transient.retry_same",
     "HTTP 429 is transient"),
    ("408_retries_same", base(status=408), Action.RETRY_SAME, "transient.retry_same", "408"),
    ("502_second_attempt_waits_1090ms", base(status=502, attempt_number=2),
     Action.RETRY_SAME, "transient.retry_same", "after 1090.9 ms"),
    ("transport_connect_failure_retries", base(status=0, transport_error="connect"),
     Action.RETRY_SAME, "transient.retry_same", "transport failure (connect)"),
    ("429_retry_after_header_sets_delay",
     base(status=429, retry_after_ms=2000.0, retry_after_source="retry_after_header"),
     Action.RETRY_SAME, "transient.retry_same", "2000.0 ms (retry_after_header)"),
    ("retry_after_capped_by_max_delay",
     base(status=429, retry_after_ms=60000.0, retry_after_source="retry_after_details"),
     Action.RETRY_SAME, "transient.retry_same", "10000.0 ms (retry_after_details)"),
    ("retry_after_capped_by_wall_clock_left",
     base(status=429, retry_after_ms=5000.0, retry_after_source="retry_after_header",
          elapsed_s=9.0, max_wall_clock_s=10.0),
     Action.RETRY_SAME, "transient.retry_same", "1000.0 ms"),
    ("503_last_attempt_budget", base(status=503, attempt_number=3),
     Action.STOP_BUDGET, "budget.attempts", "all 3 attempts are used"),
    ("max_attempts_1_stops_first_503", base(status=503, max_attempts=1),
     Action.STOP_BUDGET, "budget.attempts", "all 1 attempts"),
    ("transient_never_asks_llm", base(status=500, analyzer=None),
     Action.RETRY_SAME, "transient.retry_same", "transient"),
    # --- unsafe side effects (SPEC §2.6)
    ("unsafe_502_not_resent", base(status=502, side_effects="unsafe"),
     Action.STOP_UNSAFE_RESEND, "side_effects.unsafe_resend", "query status"),
    ("unsafe_timeout_not_resent", base(status=0, transport_error="timeout",
                                       side_effects="unsafe"),
     Action.STOP_UNSAFE_RESEND, "side_effects.unsafe_resend", "may have been accepted"),
    ("unsafe_429_is_refused_so_safe", base(status=429, side_effects="unsafe"),
     Action.RETRY_SAME, "transient.retry_same", "429"),
    ("unsafe_503_with_retry_after_is_safe",
     base(status=503, side_effects="unsafe", retry_after_ms=100.0,
          retry_after_source="retry_after_header"),
     Action.RETRY_SAME, "transient.retry_same", "100.0 ms"),
    ("unsafe_connect_error_never_sent_so_safe",
     base(status=0, transport_error="connect", side_effects="unsafe"),
     Action.RETRY_SAME, "transient.retry_same", "connect"),
    ("idempotent_502_resent", base(status=502, side_effects="idempotent"),
     Action.RETRY_SAME, "transient.retry_same", "502"),
    # --- protected (row 6)
    ("all_inputs_hitl_approved_stop",
     base(status=400, protected_keys={"city": "hitl_approved", "units": "hitl_approved"}),
     Action.STOP_PROTECTED, "protected.no_mutable_inputs", "city (hitl_approved)"),
    ("all_inputs_exact_bound_stop",
     base(status=422, protected_keys={"city": "exact_bound", "units": "exact_bound"}),
     Action.STOP_PROTECTED, "protected.no_mutable_inputs", "exact_bound"),
    ("analyzer_touching_hitl_key_stops",
     base(status=400, protected_keys={"city": "hitl_approved"},
          analyzer=verdict(Layer.ANALYZER, changes={"city": "Tokyo"},
                           protected={"city": "hitl_approved"})),
     Action.STOP_PROTECTED, "analyzer.protected", "protected input(s): city"),
    ("resolver_touching_exact_bound_key_stops",
     base(status=400, has_dependencies=True, protected_keys={"units": "exact_bound"},
          analyzer=ANALYZER_CANNOT,
          resolver=verdict(Layer.RE_RESOLUTION, replace_all={"city": "Tokyo", "units": "si"},
                           protected={"units": "exact_bound"})),
     Action.STOP_PROTECTED, "re_resolution.protected", "units"),
    # --- correction budget (row 7)
    ("correction_budget_used_up", base(status=400, validation_retries=2),
     Action.STOP_BUDGET, "budget.corrections", "2 of 2 corrections"),
    ("correction_budget_zero", base(status=422, max_validation_retries=0),
     Action.STOP_BUDGET, "budget.corrections", "0 of 0"),
    # --- analyzer (row 8)
    ("400_omitted_retryable_asks_analyzer", base(status=400),
     Action.ASK_ANALYZER, "analyzer.ask", "consult the layer 3 error analyzer"),
    ("404_retryable_true_asks_analyzer", base(status=404, retry_policy=TRUE),
     Action.ASK_ANALYZER, "analyzer.ask", "HTTP 404"),
    ("analyzer_fix_accepted", base(status=400, analyzer=ANALYZER_FIX),
     Action.RETRY_CORRECTED, "analyzer.accept", "corrected city"),
    ("analyzer_empty_changes_never_resends_unchanged",
     base(status=400, analyzer=ANALYZER_TRANSIENT_EMPTY),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "never resent unchanged"),
    ("analyzer_same_value_is_no_change",
     base(status=400, analyzer=verdict(Layer.ANALYZER, changes={"city": "Tokio"})),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "proposed no change"),
    ("analyzer_transient_claim_on_400_does_not_resend",
     base(status=400, analyzer=ANALYZER_CANNOT_TRANSIENT, semantic_retry_enabled=False),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "claimed transient"),
    ("analyzer_malformed_is_no_correction", base(status=400, analyzer=ANALYZER_MALFORMED),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "no usable answer"),
    ("analyzer_fix_failing_enum_guard_rejected",
     base(status=400, analyzer=verdict(
         Layer.ANALYZER, changes={"units": "kelvin"},
         schema={"properties": {"units": {"type": "string", "enum": ["metric", "imperial"]}}})),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "invalid parameters"),
    # --- re-resolution (row 9)
    ("analyzer_cannot_fix_asks_resolver", base(status=400, analyzer=ANALYZER_CANNOT,
                                               has_dependencies=True),
     Action.ASK_RESOLVER, "re_resolution.ask", "layer 4"),
    ("independent_step_asks_resolver_by_default", base(status=400, analyzer=ANALYZER_CANNOT),
     Action.ASK_RESOLVER, "re_resolution.ask", "cannot fix"),
    ("independent_step_resolver_disabled_by_config",
     base(status=400, analyzer=ANALYZER_CANNOT, semantic_retry_independent_steps=False),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "layer 3 said cannot fix"),
    ("semantic_budget_used_up",
     base(status=400, analyzer=ANALYZER_CANNOT, validation_retries=1, max_semantic_retries=1),
     Action.STOP_NO_CORRECTION, "re_resolution.budget_exhausted",
     "layer 4 has no budget left (1 corrections used, max_semantic_retries 1)"),
    ("semantic_budget_zero_is_no_correction",
     base(status=400, analyzer=ANALYZER_CANNOT, max_semantic_retries=0),
     Action.STOP_NO_CORRECTION, "re_resolution.budget_exhausted", "never resent unchanged"),
    ("resolver_fix_accepted",
     base(status=400, analyzer=ANALYZER_CANNOT, resolver=RESOLVER_FIX, has_dependencies=True),
     Action.RETRY_CORRECTED, "re_resolution.accept", "layer 4 re-resolver corrected city"),
    ("resolver_cannot_fix_stops",
     base(status=400, analyzer=ANALYZER_CANNOT,
          resolver=verdict(Layer.RE_RESOLUTION, should_retry=False)),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "layer 4 said cannot fix"),
    ("malformed_analyzer_does_not_reach_resolver", base(status=400, analyzer=ANALYZER_MALFORMED,
                                                        has_dependencies=True),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "layer 3 gave no usable answer"),
    # --- an LLM endpoint that failed on every try is not "cannot fix"
    ("analyzer_unavailable_stops_with_its_own_rule",
     base(status=400, analyzer=ANALYZER_UNAVAILABLE),
     Action.STOP_NO_CORRECTION, "analyzer.unavailable",
     "HTTP 400: the layer 3 analyzer was unavailable (HTTP 503 ×3); no correction"),
    ("analyzer_unavailable_does_not_reach_resolver",
     base(status=422, analyzer=ANALYZER_UNAVAILABLE, has_dependencies=True),
     Action.STOP_NO_CORRECTION, "analyzer.unavailable", "never resent unchanged"),
    ("analyzer_unavailable_non_transient_says_not_retried",
     base(status=400, analyzer=unavailable(
         Layer.ANALYZER, "HTTP 401 ×1; not retried: HTTP 401 is not transient")),
     Action.STOP_NO_CORRECTION, "analyzer.unavailable",
     "unavailable (HTTP 401 ×1; not retried: HTTP 401 is not transient)"),
    ("analyzer_cannot_fix_is_not_unavailable",
     base(status=400, analyzer=ANALYZER_CANNOT, semantic_retry_enabled=False),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "layer 3 said cannot fix"),
    ("resolver_unavailable_stops_with_its_own_rule",
     base(status=400, analyzer=ANALYZER_CANNOT, has_dependencies=True,
          resolver=unavailable(Layer.RE_RESOLUTION, "timeout ×3")),
     Action.STOP_NO_CORRECTION, "re_resolution.unavailable",
     "the layer 4 re-resolver was unavailable (timeout ×3)"),
    # --- legacy (row 10)
    ("legacy_on_type_error_without_analyzer",
     base(status=400, error_analyzer_enabled=False, legacy_callback_set=True,
          legacy_pattern="cannot unmarshal string into"),
     Action.ASK_LEGACY, "legacy.ask", "cannot unmarshal string into"),
    ("legacy_on_retryable_true_without_pattern",
     base(status=404, error_analyzer_enabled=False, legacy_callback_set=True, retry_policy=TRUE),
     Action.ASK_LEGACY, "legacy.ask", "retryable is explicitly true"),
    ("legacy_needs_pattern_or_true",
     base(status=404, error_analyzer_enabled=False, legacy_callback_set=True),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "no accepted correction"),
    ("legacy_off_when_feedback_disabled",
     base(status=400, error_analyzer_enabled=False, legacy_callback_set=True,
          legacy_pattern="is required", validation_feedback_enabled=False),
     Action.STOP_NO_CORRECTION, "no_correction.stop",
     "the error analyzer is disabled; legacy correction not used: validation feedback is disabled"),
    ("legacy_fix_accepted",
     base(status=400, error_analyzer_enabled=False, legacy_callback_set=True,
          legacy_pattern="type mismatch", legacy=LEGACY_FIX),
     Action.RETRY_CORRECTED, "legacy.accept", "legacy callback corrected city"),
    ("legacy_touching_hitl_key_stops",
     base(status=400, error_analyzer_enabled=False, legacy_callback_set=True,
          legacy_pattern="type mismatch", protected_keys={"units": "hitl_approved"},
          legacy=verdict(Layer.LEGACY, replace_all={"city": "Tokyo", "units": "si"},
                         protected={"units": "hitl_approved"})),
     Action.STOP_PROTECTED, "legacy.protected", "units"),
    ("legacy_unavailable_stops_with_its_own_rule",
     base(status=400, error_analyzer_enabled=False, legacy_callback_set=True,
          legacy_pattern="type mismatch",
          legacy=unavailable(Layer.LEGACY, "HTTP 429 ×1, HTTP 503 ×2")),
     Action.STOP_NO_CORRECTION, "legacy.unavailable",
     "the legacy correction callback was unavailable (HTTP 429 ×1, HTTP 503 ×2)"),
    # --- no correction (row 11)
    ("no_llm_configured_400_stops",
     base(status=400, llm_configured=False),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "LLM layers are off"),
    ("409_no_llm_never_resent", base(status=409, llm_configured=False, retry_policy=TRUE),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "never resent unchanged"),
    # --- cancellation and task budgets (rows 12, 13)
    ("cancelled_in_flight", base(status=0, transport_error="cancelled"),
     Action.STOP_CANCELLED, "cancel.in_flight", "cancelled"),
    ("cancelled_after_503", base(status=503, cancelled=True),
     Action.STOP_CANCELLED, "cancel.in_flight", "without waiting"),
    ("token_budget_stops_before_analyzer",
     base(status=400, llm_tokens_used=120, max_total_tokens=100),
     Action.STOP_BUDGET, "budget.total_tokens", "120 of 100 tokens"),
    ("token_budget_does_not_stop_transient",
     base(status=503, llm_tokens_used=120, max_total_tokens=100),
     Action.RETRY_SAME, "transient.retry_same", "transient"),
    ("token_budget_allows_applying_the_last_answer",
     base(status=400, llm_calls_used=1, max_llm_calls=1, analyzer=ANALYZER_FIX),
     Action.RETRY_CORRECTED, "analyzer.accept", "corrected city"),
    ("llm_call_budget_stops_before_resolver",
     base(status=400, llm_calls_used=1, max_llm_calls=1, analyzer=ANALYZER_CANNOT),
     Action.STOP_BUDGET, "budget.llm_calls", "1 of 1 calls"),
    ("llm_call_budget_stops", base(status=400, llm_calls_used=4, max_llm_calls=4),
     Action.STOP_BUDGET, "budget.llm_calls", "4 of 4 calls"),
    ("repeated_error_budget_stops", base(status=503, repeated_error_count=3,
                                         max_repeated_errors=3),
     Action.STOP_BUDGET, "budget.repeated_error", "seen 3 times"),
    ("wall_clock_budget_after_response", base(status=502, elapsed_s=12.0, max_wall_clock_s=10.0),
     Action.STOP_BUDGET, "budget.wall_clock", "12.000s of 10s"),
    # --- default
    ("302_unrouted_stops", base(status=302), Action.STOP_TERMINAL, "default.unrouted",
     "matches no routing rule"),
    ("101_unrouted_stops", base(status=101), Action.STOP_TERMINAL, "default.unrouted", "101"),
]


@pytest.mark.parametrize(("inputs", "action", "rule_id", "reason_part"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decide(inputs: DecisionInputs, action: Action, rule_id: str, reason_part: str) -> None:
    decision = decide(inputs)
    assert (decision.action, decision.rule_id) == (action, rule_id), decision.reason
    assert reason_part in decision.reason


def test_case_names_are_unique():
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names))


def test_every_rule_is_exercised_by_the_corpus():
    from executor.policy import ALL_RULES

    fired = {c[3] for c in CASES}
    assert {r.rule_id for r in ALL_RULES} - fired == set()


def test_not_matched_explains_every_earlier_rule():
    decision = decide(base(status=400, llm_configured=False))
    ids = [m.rule_id for m in decision.not_matched]
    assert ids[:5] == ["success.2xx", "cancel.in_flight", "refused.explicit_false",
                       "terminal.auth_or_method", "orchestrator.single_dispatch"]
    reasons = {m.rule_id: m.reason for m in decision.not_matched}
    assert "not transient" in reasons["transient.retry_same"]
    assert "no LLM is configured" in reasons["analyzer.ask"]


def test_decision_records_the_inputs_it_read():
    decision = decide(base(status=503, retry_policy=UNSPEC, attempt_number=2))
    assert decision.inputs["status"] == 503
    assert decision.inputs["retry_policy"] == "unspecified"
    assert decision.inputs["attempt_number"] == 2
    assert decision.inputs["max_attempts"] == 3
    assert decision.to_dict()["delay_source"] == "backoff"


def test_analyzer_round_trip_through_with_verdict():
    first = base(status=400)
    assert decide(first).action is Action.ASK_ANALYZER
    second = with_verdict(first, ANALYZER_FIX)
    decision = decide(second)
    assert decision.action is Action.RETRY_CORRECTED
    assert decision.layer is Layer.ANALYZER
    assert decision.corrected_parameters == {"city": "Tokyo", "units": "metric"}
    assert decision.inputs["analyzer"]["changed_keys"] == ["city"]


def test_missing_protected_key_in_full_replacement_is_restored():
    assessed = verdict(Layer.RE_RESOLUTION, replace_all={"city": "Tokyo"},
                       protected={"units": "exact_bound"})
    assert assessed.proposed_parameters == {"city": "Tokyo", "units": "metric"}
    assert assessed.touched_protected == ()
    assert assessed.changed_keys == ("city",)


def test_numbers_compare_as_json_values():
    same = assess_correction(Layer.ANALYZER, answered=True, current_parameters={"n": 1},
                             proposed_parameters={"n": 1.0}, protected_keys={}, schema=None,
                             plan_step_ids=(), should_retry=True)
    flipped = assess_correction(Layer.ANALYZER, answered=True, current_parameters={"n": 1},
                                proposed_parameters={"n": True}, protected_keys={}, schema=None,
                                plan_step_ids=(), should_retry=True)
    assert same.changed_keys == ()
    assert flipped.changed_keys == ("n",)


def test_decide_is_pure():
    inputs = base(status=503)
    assert decide(inputs) == decide(replace(inputs))
