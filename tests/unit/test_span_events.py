"""The decision → span-event/counter table: which rows fire for which final decision."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from executor.policy import Action, Layer
from executor.telemetry import COUNTERS, DECISION_SPAN_EVENTS
from executor.telemetry.span_events import DecisionView, decision_span_events

YES = {"answered": True, "should_retry": True, "explanation": "Paris is PAR",
       "changes": {"city_code": "PAR"}}
LEGACY = {"answered": True, "should_retry": True, "explanation": "typed"}

BASE = DecisionView(
    step_id="step-1", capability="hotels", at=10.0, correction_started_at=9.5,
    action=str(Action.SUCCESS), layer=None, status=400, inputs={}, reason="r",
    corrected=None, error_message="component returned status 400", error_response="{}",
    attempt_number=1, independent=True,
)  # fmt: skip


def view(**fields: Any) -> DecisionView:
    return replace(BASE, **fields)


CORRECTED = str(Action.RETRY_CORRECTED)

# name, view, the (span event, counter) pairs emitted in order
CASES: list[tuple[str, DecisionView, list[tuple[str | None, str | None]]]] = [
    ("success_emits_nothing", view(), []),
    ("analyzer_correction_applied", view(action=CORRECTED, layer=str(Layer.ANALYZER),
                                         inputs={"analyzer": YES}),
     [("llm_error_analysis_retry", "orchestration.error_analysis.retry")]),
    ("analyzer_yes_not_applied", view(action=str(Action.STOP_PROTECTED),
                                      inputs={"analyzer": YES}),
     [("llm_error_analysis_no_retry", "orchestration.error_analysis.no_retry")]),
    ("analyzer_cannot_fix_is_reported_with_its_llm_call",
     view(action=str(Action.STOP_NO_CORRECTION),
          inputs={"analyzer": {**YES, "should_retry": False}}), []),
    ("re_resolution_of_an_independent_step",
     view(action=CORRECTED, layer=str(Layer.RE_RESOLUTION), inputs={"resolver": YES}),
     [("semantic_retry_applied", "orchestration.semantic_retry.applied"),
      (None, "orchestration.semantic_retry.attempts"),
      (None, "orchestration.semantic_retry.independent_step")]),
    # seed 001's success rate: success ÷ attempts (both were missing, an outside check found).
    ("re_resolver_consulted_without_a_correction",
     view(action=str(Action.STOP_NO_CORRECTION), inputs={"resolver": {**YES,
                                                                        "should_retry": False}}),
     [(None, "orchestration.semantic_retry.attempts")]),
    ("an_attempt_sending_a_re_resolution_succeeds",
     view(correction_layer=str(Layer.RE_RESOLUTION), status=200),
     [(None, "orchestration.semantic_retry.success")]),
    ("an_attempt_sending_an_analyzer_correction_succeeds",
     view(correction_layer=str(Layer.ANALYZER), status=200), []),
    ("re_resolution_of_a_dependent_step",
     view(action=CORRECTED, layer=str(Layer.RE_RESOLUTION), independent=False),
     [("semantic_retry_applied", "orchestration.semantic_retry.applied")]),
    ("legacy_correction_applied", view(action=CORRECTED, layer=str(Layer.LEGACY),
                                       inputs={"legacy": LEGACY}),
     [("validation_feedback_started", "orchestration.validation_feedback.attempts"),
      ("validation_feedback_success", "orchestration.validation_feedback.success")]),
    ("legacy_consulted_without_correction",
     view(action=str(Action.STOP_NO_CORRECTION), inputs={"legacy": LEGACY}),
     [("validation_feedback_started", "orchestration.validation_feedback.attempts"),
      ("validation_feedback_failed", "orchestration.validation_feedback.failed")]),
    ("explicit_false", view(action=str(Action.STOP_REFUSED)),
     [("non_retryable_error_detected", "orchestration.non_retryable_errors")]),
]  # fmt: skip


@pytest.mark.parametrize(("decided", "emitted"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_decision_span_events(decided: DecisionView, emitted: list) -> None:
    assert [(e.event, e.counter) for e in decision_span_events(decided)] == emitted


def test_every_row_is_exercised_and_counts_a_declared_counter():
    fired = {(e.event, e.counter) for _, decided, _ in CASES
             for e in decision_span_events(decided)}
    assert {(row.event, row.counter) for row in DECISION_SPAN_EVENTS} == fired
    assert {row.counter for row in DECISION_SPAN_EVENTS} <= set(COUNTERS)


def test_feedback_started_is_stamped_when_the_correction_call_began():
    (started, _) = decision_span_events(view(action=str(Action.STOP_NO_CORRECTION),
                                             inputs={"legacy": LEGACY}))
    assert started.at == 9.5
    assert started.attributes["error_type"] == "type_mismatch"
