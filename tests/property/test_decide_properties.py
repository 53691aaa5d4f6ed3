"""Properties of `policy.decide()` over generated `DecisionInputs` (SPEC §2.2, rules.md)."""

from __future__ import annotations

import copy
import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from executor.faults import Recovery
from executor.policy import (
    ALL_RULES,
    INTERMEDIATE_ACTIONS,
    PREDISPATCH_RULES,
    RESPONSE_RULES,
    Action,
    Decision,
    DecisionInputs,
    Layer,
    LayerVerdict,
    decide,
)
from executor.wire import RetryPolicy, is_success_status, is_transient_status
from tests.property.strategies import decision_inputs, examples

# SPEC §2.2 and §3.2: the final actions, and the intermediate ones the step loop acts on.
SPEC_FINAL_ACTIONS = {
    "reject_predispatch", "success", "stop_refused", "stop_terminal", "stop_single_dispatch",
    "retry_same", "stop_budget", "stop_protected", "retry_corrected", "stop_no_correction",
    "stop_cancelled", "stop_unsafe_resend", "stop_circuit_open",
}
ASK_ACTIONS = {Action.ASK_ANALYZER, Action.ASK_RESOLVER, Action.ASK_LEGACY}
RULE_ACTION = {rule.rule_id: rule.action for rule in ALL_RULES}
PREDISPATCH_IDS = {rule.rule_id for rule in PREDISPATCH_RULES}
RESPONSE_IDS = {rule.rule_id for rule in RESPONSE_RULES}


def is_non_transient_4xx(status: int | None) -> bool:
    return status is not None and 400 <= status <= 499 and not is_transient_status(status)


def check_invariants(inputs: DecisionInputs, decision: Decision) -> None:
    """What every decision must satisfy, whatever the inputs."""
    assert isinstance(decision.action, Action)
    assert decision.final == (decision.action not in INTERMEDIATE_ACTIONS)
    if decision.final:
        assert str(decision.action) in SPEC_FINAL_ACTIONS
    assert RULE_ACTION[decision.rule_id] is decision.action
    assert decision.rule_id in (RESPONSE_IDS if inputs.dispatched else PREDISPATCH_IDS)
    assert decision.reason and "\n" not in decision.reason
    evaluated = [miss.rule_id for miss in decision.not_matched] + [decision.rule_id]
    table = RESPONSE_RULES if inputs.dispatched else PREDISPATCH_RULES
    assert evaluated == [rule.rule_id for rule in table][: len(evaluated)]
    # seed 003: every final decision but success names one of six recoveries and its impact.
    if decision.final and decision.action is not Action.SUCCESS:
        assert decision.recovery in set(Recovery)
        assert decision.impact and "\n" not in decision.impact
    status = inputs.status
    if not inputs.dispatched:
        assert decision.action in {Action.STOP_CANCELLED, Action.STOP_BUDGET,
                                   Action.STOP_CIRCUIT_OPEN, Action.REJECT_PREDISPATCH,
                                   Action.DISPATCH}
        return
    if decision.action is Action.RETRY_SAME:
        # seed 000 §3: only a transient status is resent unchanged, always after a known wait.
        assert is_transient_status(status or 0)
        assert decision.delay_ms is not None and math.isfinite(decision.delay_ms)
        assert decision.delay_ms >= 0
        assert decision.delay_source in {"backoff", "retry_after_header", "retry_after_details"}
        assert inputs.attempt_number < inputs.max_attempts
        assert not inputs.cancelled and inputs.retry_policy is not RetryPolicy.EXPLICIT_FALSE
        if inputs.remaining_wall_clock_ms is not None:
            assert decision.delay_ms <= inputs.remaining_wall_clock_ms
    else:
        assert decision.delay_ms is None
    if is_non_transient_4xx(status):
        assert decision.action is not Action.RETRY_SAME
    if status in (401, 403, 405):
        # seed 000 §12: never layer 3 or 4, never a correction.
        assert decision.action not in ASK_ACTIONS | {Action.RETRY_CORRECTED}
        assert decision.action in {Action.STOP_CANCELLED, Action.STOP_REFUSED,
                                   Action.STOP_TERMINAL}
    if decision.action in ASK_ACTIONS | {Action.RETRY_CORRECTED}:
        assert is_non_transient_4xx(status) and status not in (401, 403, 405)
        assert not inputs.orchestrator
    if decision.action is Action.RETRY_CORRECTED:
        verdict = {"analyzer": inputs.analyzer, "re_resolution": inputs.resolver,
                   "legacy": inputs.legacy}[str(decision.layer)]
        assert verdict is not None and verdict.acceptable
        assert decision.corrected_parameters == verdict.proposed_parameters
        assert inputs.validation_retries < inputs.max_validation_retries
    if is_success_status(status or 0):
        # seed 003: a 2xx whose body is not a JSON object is a result-parsing failure.
        if inputs.body_is_json_object:
            assert decision.action is Action.SUCCESS
        else:
            assert (decision.action, decision.rule_id) == (Action.STOP_TERMINAL,
                                                           "result.not_json_object")
    elif inputs.cancelled or inputs.transport_error == "cancelled":
        assert decision.action is Action.STOP_CANCELLED
    elif inputs.retry_policy is RetryPolicy.EXPLICIT_FALSE:
        # Explicit refusal precedes status routing, 5xx included.
        assert decision.action is Action.STOP_REFUSED
    elif status is not None and status != 0 and (status < 200 or 300 <= status < 400
                                                 or status > 599):
        # 1xx, 3xx and anything beyond 5xx are unknown outcomes: stop, never retry.
        assert decision.action in {Action.STOP_TERMINAL, Action.STOP_SINGLE_DISPATCH,
                                   Action.STOP_BUDGET}


@settings(max_examples=examples(2000))
@given(inputs=decision_inputs())
def test_every_decision_is_a_spec_action_with_a_rule_and_a_reason(
    inputs: DecisionInputs,
) -> None:
    check_invariants(inputs, decide(inputs))


@settings(max_examples=examples(700))
@given(inputs=decision_inputs(status=st.sampled_from([401, 403, 405]), dispatched=True))
def test_401_403_405_never_consult_a_layer(inputs: DecisionInputs) -> None:
    check_invariants(inputs, decide(inputs))


@settings(max_examples=examples(700))
@given(inputs=decision_inputs(
    status=st.one_of(st.integers(400, 499).filter(lambda s: s not in (408, 429)),
                     st.sampled_from([0, 408, 429, 500, 503, 599])),
    dispatched=True,
))
def test_4xx_and_transient_statuses_route_as_the_table_says(inputs: DecisionInputs) -> None:
    check_invariants(inputs, decide(inputs))


@settings(max_examples=examples(700))
@given(inputs=decision_inputs())
def test_decide_is_pure_and_deterministic(inputs: DecisionInputs) -> None:
    before = copy.deepcopy(inputs)
    first = decide(inputs)
    second = decide(copy.deepcopy(inputs))
    assert inputs == before
    assert first == second
    assert first.to_dict() == second.to_dict()


# Minimal reproducer: a status the step loop never asks a layer about, with a verdict present.
LEGACY_VERDICT_ON_100 = DecisionInputs(
    dispatched=True, status=100, parameter_keys=("a",),
    legacy=LayerVerdict(Layer.LEGACY, answered=True, should_retry=True,
                        proposed_parameters={"a": 1}, changed_keys=("a",)),
)


@settings(max_examples=examples(300))
@given(inputs=decision_inputs(
    status=st.one_of(st.integers(100, 199), st.integers(300, 399), st.integers(600, 999)),
    dispatched=True, inconsistent_verdicts=True,
))
@example(inputs=LEGACY_VERDICT_ON_100)
def test_a_layer_verdict_never_applies_outside_a_correctable_4xx(inputs: DecisionInputs) -> None:
    check_invariants(inputs, decide(inputs))


def test_402_quota_never_reaches_an_llm_layer() -> None:
    inputs = DecisionInputs(dispatched=True, status=402, llm_configured=True,
                            parameter_keys=("amount",))
    decision = decide(inputs)
    assert (decision.action, decision.rule_id) == (Action.STOP_TERMINAL, "terminal.quota")
    assert "no LLM layer" in decision.reason
