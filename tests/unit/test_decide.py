"""decide(): one named case per routing behaviour, asserting action, rule id and reason."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from typing import Any

import pytest

from executor.backoff import BackoffConfig
from executor.policy import (
    Action,
    Decision,
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
     Action.RETRY_SAME, "transient.retry_same", "after 542.1 ms (exponential backoff)"),
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
     Action.RETRY_SAME, "transient.retry_same", "2000.0 ms (Retry-After header)"),
    # seed 003: honor Retry-After; max_delay_ms (10 s) caps only the computed backoff.
    ("retry_after_above_max_delay_is_waited_in_full",
     base(status=429, retry_after_ms=60000.0, retry_after_source="retry_after_details",
          retry_after_max_ms=60000.0),
     Action.RETRY_SAME, "transient.retry_same", "60000.0 ms (error.details.retry_after)"),
    ("retry_after_above_retry_after_max_stops",
     base(status=503, retry_after_ms=120000.0, retry_after_source="retry_after_header",
          retry_after_max_ms=60000.0),
     Action.STOP_BUDGET, "budget.retry_after_max",
     "asks to wait 120000.0 ms (Retry-After header), more than retry_after_max_ms 60000"),
    ("retry_after_outlasting_wall_clock_stops",
     base(status=429, retry_after_ms=5000.0, retry_after_source="retry_after_header",
          elapsed_s=9.0, max_wall_clock_s=10.0),
     Action.STOP_BUDGET, "budget.wall_clock.wait",
     "wait of 5000.0 ms (Retry-After header) would outlast the task wall-clock budget "
     "(1000.0 ms left of 10s)"),
    ("backoff_outlasting_wall_clock_stops",
     base(status=503, elapsed_s=9.8, max_wall_clock_s=10.0),
     Action.STOP_BUDGET, "budget.wall_clock.wait", "542.1 ms (exponential backoff) would outlast"),
    ("retry_after_on_last_attempt_is_attempts_budget",
     base(status=429, attempt_number=3, retry_after_ms=120000.0, retry_after_max_ms=60000.0),
     Action.STOP_BUDGET, "budget.attempts", "all 3 attempts are used"),
    # seed 003: "Every task limits ... retries per tool".
    ("per_tool_retry_budget_stops",
     base(status=503, tool="weather", tool_retries_used=4, max_retries_per_tool=4),
     Action.STOP_BUDGET, "budget.retries_per_tool",
     "tool 'weather' has used 4 of 4 unchanged resends allowed per tool"),
    ("per_tool_retry_budget_left_retries",
     base(status=503, tool="weather", tool_retries_used=3, max_retries_per_tool=4),
     Action.RETRY_SAME, "transient.retry_same", "after 542.1 ms"),
    ("per_tool_budget_never_blocks_a_correction",
     base(status=400, tool="weather", tool_retries_used=9, max_retries_per_tool=1),
     Action.ASK_ANALYZER, "analyzer.ask", "consult the layer 3 error analyzer"),
    # seed 003 + seed 000 §9: the wall-clock budget ends a request in flight.
    ("request_ended_by_wall_clock_budget",
     base(status=0, transport_error="timeout", ended_by_deadline=True, elapsed_s=1.0,
          max_wall_clock_s=1.0),
     Action.STOP_BUDGET, "budget.wall_clock", "ended the request in flight"),
    ("503_last_attempt_budget", base(status=503, attempt_number=3),
     Action.STOP_BUDGET, "budget.attempts", "all 3 attempts are used"),
    ("max_attempts_1_stops_first_503", base(status=503, max_attempts=1),
     Action.STOP_BUDGET, "budget.attempts", "all 1 attempt is used"),
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
     "layer 4 has no budget left (1 corrections used, of every layer, against "
     "max_semantic_retries 1)"),
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
     "correction is off: validation_feedback_enabled is false (layers 1 and 2 only, seed 001)"),
    # seed 001: "disable Layer 3 ... Relies on Layers 1 & 2 only": no analyzer, no resolver.
    ("analyzer_off_when_feedback_disabled",
     base(status=400, validation_feedback_enabled=False),
     Action.STOP_NO_CORRECTION, "no_correction.stop",
     "no accepted correction (correction is off: validation_feedback_enabled is false"),
    ("feedback_disabled_with_retryable_true_still_stops",
     base(status=422, retry_policy=TRUE, validation_feedback_enabled=False,
          legacy_callback_set=True),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "validation_feedback_enabled is false"),
    # seed 000 §4: a correction is a change on the wire, after layer-2 coercion.
    ("proposal_equal_after_coercion_is_no_correction",
     base(status=400, parameter_keys=("lat",), analyzer=assess_correction(
         Layer.ANALYZER, answered=True, current_parameters={"lat": 35.6},
         proposed_parameters={"lat": "35.6"}, protected_keys={},
         schema={"properties": {"lat": {"type": "number"}}}, plan_step_ids=(),
         should_retry=True)),
     Action.STOP_NO_CORRECTION, "no_correction.stop", "layer 3 proposed no change on the wire"),
    # seed 000 §12: exact template bindings are protected at any depth.
    ("nested_exact_binding_change_is_protected",
     base(status=400, parameter_keys=("order",),
          protected_keys={"order.total": "exact_bound"}, analyzer=assess_correction(
         Layer.ANALYZER, answered=True, current_parameters={"order": {"total": 10, "n": 1}},
         proposed_parameters={"order": {"total": 99, "n": 1}},
         protected_keys={"order.total": "exact_bound"}, schema=None, plan_step_ids=(),
         should_retry=True, protected_paths={"order.total": ("order", "total")})),
     Action.STOP_PROTECTED, "analyzer.protected", "protected input(s): order.total"),
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
    ("repeated_error_budget_of_one_says_seen_1_time",
     base(status=503, repeated_error_count=1, max_repeated_errors=1),
     Action.STOP_BUDGET, "budget.repeated_error", "seen 1 time (limit 1)"),
    ("wall_clock_budget_after_response", base(status=502, elapsed_s=12.0, max_wall_clock_s=10.0),
     Action.STOP_BUDGET, "budget.wall_clock", "12.000s of 10s"),
    # seed 003: "Rephrasing cannot fix account quota".
    ("402_quota_stops_without_llm", base(status=402),
     Action.STOP_TERMINAL, "terminal.quota", "rephrasing cannot fix account quota"),
    ("402_with_retryable_true_still_stops", base(status=402, retry_policy=TRUE),
     Action.STOP_TERMINAL, "terminal.quota", "no retry and no LLM layer"),
    ("402_with_explicit_false_is_refused", base(status=402, retry_policy=FALSE),
     Action.STOP_REFUSED, "refused.explicit_false", "retryable=false on HTTP 402"),
    # seed 003 fault matrix: result parsing is a failure class.
    ("200_not_json_object_is_result_parsing_failure", base(status=200, body_is_json_object=False),
     Action.STOP_TERMINAL, "result.not_json_object", "not a JSON object: a result-parsing"),
    ("204_empty_body_is_result_parsing_failure", base(status=204, body_is_json_object=False),
     Action.STOP_TERMINAL, "result.not_json_object", "HTTP 204 but the body"),
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
    assert ids[:7] == ["success.2xx", "result.not_json_object", "cancel.in_flight",
                       "refused.explicit_false", "terminal.auth_or_method", "terminal.quota",
                       "orchestrator.single_dispatch"]
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


# seed 003: every final decision carries a recovery action and a user-facing impact.
RECOVERY_CASES = [
    ("503_retry_waits", base(status=503), "wait", "server error", "resends the same payload"),
    ("401_requests_authorization", base(status=401), "request authorization", "permission",
     "refused the credentials"),
    ("402_escalates", base(status=402), "escalate", "quota", "quota"),
    ("404_correction_stop_modifies", base(status=404, llm_configured=False), "modify",
     "missing resource", "found nothing"),
    ("429_exhausted_waits", base(status=429, attempt_number=3), "wait", "rate limit",
     "failed after 3 attempts"),
    ("timeout_exhausted_waits", base(status=0, transport_error="timeout", attempt_number=3),
     "wait", "timeout", "timed out"),
    ("connect_failure_says_unreachable",
     base(status=0, transport_error="connect", attempt_number=3), "wait", "server error",
     "the tool could not be reached (transport failure (connect)): the step failed after 3"),
    ("result_parsing_escalates", base(status=200, body_is_json_object=False), "escalate",
     "result parsing", "not a JSON object"),
    ("cancelled_stops", base(status=0, transport_error="cancelled"), "stop", "cancellation",
     "cancelled"),
    ("unsafe_queries_status", base(status=504, side_effects="unsafe"), "query status",
     "server error", "may have been accepted"),
    ("guard_rejection_modifies",
     base(dispatched=False, status=None, guard_violations=("missing city",)), "modify", "schema",
     "nothing was sent"),
    ("token_budget_stops", base(status=400, llm_tokens_used=10, max_total_tokens=10), "stop",
     "budget", "task token budget"),
    ("protected_requests_authorization",
     base(status=400, protected_keys={"city": "hitl_approved", "units": "hitl_approved"}),
     "request authorization", "schema", "HITL-approved"),
    ("refused_400_modifies", base(status=400, retry_policy=FALSE), "modify", "schema",
     "not retryable"),
    ("analyzer_unavailable_modifies_or_reruns",
     base(status=400, analyzer=ANALYZER_UNAVAILABLE), "modify", "schema",
     "the LLM endpoint was unavailable, so no correction ran; correct the parameters (or the "
     "plan), then rerun the step (or rerun it once the LLM endpoint answers)"),
    # A refused credential is not mended by waiting (found by an outside check: a 401 from the
    # LLM advised "rerun it once the LLM endpoint answers").
    ("analyzer_refused_names_the_credential",
     base(status=400, analyzer=unavailable(
         Layer.ANALYZER, "HTTP 401 ×1; not retried: HTTP 401 is not transient")),
     "modify", "schema",
     "the LLM endpoint refused the call (HTTP 401), so no correction ran; correct the parameters "
     "(or the plan), then rerun the step (or fix the LLM credential, llm.api_key or "
     "OPENAI_API_KEY, and rerun it)"),
    ("resolver_refused_after_a_503_names_the_credential",
     base(status=400, analyzer=ANALYZER_CANNOT, has_dependencies=True,
          resolver=unavailable(Layer.RE_RESOLUTION,
                               "HTTP 503 ×1, HTTP 403 ×1; not retried: HTTP 403 is not transient")),
     "modify", "schema", "the LLM endpoint refused the call (HTTP 403)"),
    ("a_401_that_was_not_the_last_answer_is_not_a_refusal",
     base(status=400, analyzer=unavailable(Layer.ANALYZER, "HTTP 401 ×1, HTTP 503 ×2")),
     "modify", "schema", "(or rerun it once the LLM endpoint answers)"),
    ("legacy_failing_with_a_429_still_waits_for_the_endpoint",
     base(status=400, error_analyzer_enabled=False, legacy_callback_set=True,
          legacy_pattern="type mismatch", legacy=unavailable(Layer.LEGACY, "HTTP 429 ×3")),
     "modify", "schema", "(or rerun it once the LLM endpoint answers)"),
]


@pytest.mark.parametrize(("inputs", "corrector"), [
    (base(status=400, analyzer=ANALYZER_FIX), "the analyzer"),
    (base(status=400, analyzer=ANALYZER_CANNOT, resolver=RESOLVER_FIX, has_dependencies=True),
     "the layer 4 re-resolver"),
    (base(status=400, error_analyzer_enabled=False, legacy_callback_set=True,
          legacy_pattern="type mismatch", legacy=LEGACY_FIX), "the legacy correction callback"),
], ids=["analyzer", "re_resolution", "legacy"])  # fmt: skip
def test_a_corrected_resend_names_its_corrector_in_words(inputs, corrector):
    # Was the layer's id: "corrected by the re_resolution", "corrected by the legacy" (found by
    # an outside check).
    impact = decide(inputs).to_dict()["impact"]
    assert impact.endswith(f"the executor resends with parameters corrected by {corrector}")


def test_unavailable_layer_note_says_unavailable_not_cannot_fix():
    notes = decide(base(status=400, analyzer=ANALYZER_UNAVAILABLE)).to_dict()["layers"]
    assert notes[0] == {"layer": "analyzer", "consulted": True,
                        "detail": "unavailable: its LLM endpoint failed (HTTP 503 ×3)"}


@pytest.mark.parametrize(("inputs", "recovery", "failure_class", "impact_part"),
                         [c[1:] for c in RECOVERY_CASES], ids=[c[0] for c in RECOVERY_CASES])
def test_final_decision_has_recovery_and_impact(inputs, recovery, failure_class, impact_part):
    decision = decide(inputs)
    assert decision.final
    record = decision.to_dict()
    assert (record["recovery"], record["failure_class"]) == (recovery, failure_class)
    assert impact_part in record["impact"], record["impact"]
    assert "\n" not in record["impact"]


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 408, 409, 410, 418, 422, 429,
                                    500, 502, 503, 504, 599, 200, 302])
def test_the_impact_names_the_status_once(status):
    # The cause and the evidence are joined as "cause (HTTP N): …": a cause that names the
    # status too printed "(HTTP 402) (HTTP 402)".
    impact = decide(base(status=status, attempt_number=3, body_is_json_object=False,
                         analyzer=ANALYZER_UNAVAILABLE)).impact
    assert impact is not None and impact.count(f"HTTP {status}") == 1, impact


def test_every_final_decision_of_the_corpus_has_a_recovery():
    allowed = {"modify", "wait", "query status", "request authorization", "stop", "escalate"}
    for name, inputs, action, _rule, _reason in CASES:
        decision = decide(inputs)
        if not decision.final:
            assert decision.recovery is None and decision.impact is None, name
        elif action is Action.SUCCESS:
            assert decision.recovery is None and decision.impact, name
        else:
            assert str(decision.recovery) in allowed and decision.impact, name


# seed 000 §4: the "why not" of a decision covers the correction layers too.
def test_transient_decision_says_layers_are_not_consulted():
    notes = decide(base(status=503)).to_dict()["layers"]
    assert [n["layer"] for n in notes] == ["analyzer", "re_resolution", "legacy"]
    assert all(not n["consulted"] for n in notes)
    assert all("HTTP 503 is transient" in n["detail"] and "never asks an LLM" in n["detail"]
               for n in notes)


def test_4xx_stop_names_consulted_layers_with_verdicts_and_off_ones_with_why():
    inputs = base(status=400, max_semantic_retries=0, analyzer=ANALYZER_CANNOT)
    decision = decide(inputs)
    assert decision.rule_id == "re_resolution.budget_exhausted"
    notes = {n.layer: n for n in decision.layers}
    assert notes[Layer.ANALYZER].consulted
    assert "said cannot fix: because" in notes[Layer.ANALYZER].detail
    assert not notes[Layer.LEGACY].consulted
    assert "error analyzer is enabled" in notes[Layer.LEGACY].detail
    assert not notes[Layer.RE_RESOLUTION].consulted


def test_layers_off_without_llm_say_so():
    decision = decide(base(status=422, llm_configured=False))
    details = {n.layer: n.detail for n in decision.layers}
    assert details[Layer.ANALYZER] == "off: no LLM is configured"
    assert "no LLM is configured" in details[Layer.RE_RESOLUTION]


def test_terminal_and_quota_name_why_no_layer_runs():
    assert "HTTP 401 is terminal" in decide(base(status=401)).layers[0].detail
    assert "quota" in decide(base(status=402)).layers[0].detail
    assert "retryable:false" in decide(base(status=503, retry_policy=FALSE)).layers[0].detail


def test_decision_records_the_remaining_retry_budgets():
    record = decide(base(status=503, attempt_number=1, tool="t", tool_retries_used=2,
                         max_retries_per_tool=5)).to_dict()
    assert record["budgets"] == {"step_retries_left": 2, "tool_retries_left": 3,
                                 "corrections_left": 2}
    assert decide(base(status=503)).to_dict()["budgets"]["tool_retries_left"] is None


def test_nested_exact_binding_missing_from_replacement_is_restored():
    assessed = assess_correction(
        Layer.RE_RESOLUTION, answered=True, current_parameters={"a": {"b": 1}, "c": "x"},
        proposed_parameters={"c": "y"}, protected_keys={"a.b": "exact_bound"}, schema=None,
        plan_step_ids=(), should_retry=True, protected_paths={"a.b": ("a", "b")})
    assert assessed.proposed_parameters == {"a": {"b": 1}, "c": "y"}
    assert assessed.touched_protected == ()
    assert assessed.changed_keys == ("c",)


def test_proposal_of_boolean_text_equal_after_coercion_is_no_change():
    assessed = assess_correction(
        Layer.LEGACY, answered=True, current_parameters={"flag": True},
        proposed_parameters={"flag": "1"}, protected_keys={},
        schema={"properties": {"flag": {"type": "boolean"}}}, plan_step_ids=(),
        should_retry=True)
    assert assessed.changed_keys == ()
    assert assessed.unchanged_after_coercion == ("flag",)
    assert "after layer-2 coercion" in decide(
        base(status=400, error_analyzer_enabled=False, legacy_callback_set=True,
             retry_policy=TRUE, legacy=assessed, parameter_keys=("flag",))
    ).not_matched[-1].reason


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


# Recorded inputs are the base of re-deciding a store: every field is kept, and reads back equal.
@pytest.mark.parametrize("inputs", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_recorded_inputs_read_back_and_decide_the_same(inputs: DecisionInputs) -> None:
    recorded = json.loads(json.dumps(inputs.to_dict()))
    assert DecisionInputs.from_dict(recorded) == inputs
    assert decide(DecisionInputs.from_dict(recorded)) == decide(inputs)


def test_recorded_inputs_keep_every_field_rules_read():
    inputs = base(status=429, error_text="city not found", retry_after_max_ms=5000.0,
                  backoff=BackoffConfig.from_ms(100, 2000, 3.0, False))
    recorded = inputs.to_dict()
    assert list(recorded) == [item.name for item in fields(DecisionInputs)]
    assert recorded["error_text"] == "city not found"
    assert recorded["parameter_keys"] == ["city", "units"]
    assert recorded["retry_after_max_ms"] == 5000.0
    assert recorded["backoff"] == {"initial_delay_ns": 100_000_000, "max_delay_ns": 2_000_000_000,
                                   "backoff_factor": 3.0, "jitter_enabled": False}


def test_a_decision_reads_back_equal_from_its_record():
    decision = decide(with_verdict(base(status=400), ANALYZER_FIX))
    assert Decision.from_dict(json.loads(json.dumps(decision.to_dict()))) == decision


BAD_RECORDED_INPUTS = [
    ("unknown_key", {"dispatched": True, "max_attempt": 5}, "unknown field 'max_attempt'"),
    ("wrong_type", {"dispatched": True, "max_attempts": "5"},
     "DecisionInputs.max_attempts: expected an integer, got '5'"),
    ("bad_enum", {"dispatched": True, "retry_policy": "maybe"},
     "DecisionInputs.retry_policy: 'maybe' is not one of"),
    ("bad_nested", {"dispatched": True, "backoff": {"initial_delay_ns": 1.5}},
     "DecisionInputs.backoff.initial_delay_ns: expected an integer"),
    ("missing_required", {"status": 503}, "DecisionInputs: "),
]  # fmt: skip


@pytest.mark.parametrize(("data", "message"), [c[1:] for c in BAD_RECORDED_INPUTS],
                         ids=[c[0] for c in BAD_RECORDED_INPUTS])
def test_bad_recorded_inputs_name_the_field(data: dict, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        DecisionInputs.from_dict(data)
    assert message in str(raised.value)
