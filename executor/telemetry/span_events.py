"""TruvaG3's span events and counters, as data: what a final decision or an LLM call implies.

A final decision maps to span events and counters through `DECISION_SPAN_EVENTS`, a table of
rows evaluated in order (every row whose condition holds fires, unlike the policy's
first-match rules); each row names its TruvaG3 source. The functions here are pure: they
return `Emission`s, which the recorder adds to the attempt's span and the meters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from executor.events import AttemptDecided, LLMCall
from executor.llm import SITE_ERROR_ANALYSIS, SITE_SEMANTIC_RETRY
from executor.policy import Action, Layer
from executor.telemetry.attributes import (
    MODULE_ORCHESTRATION,
    SHORT_PREVIEW_CHARS,
    body_text,
    json_preview,
    preview,
)
from executor.telemetry.tracks import AttemptTrack, StepTrack


@dataclass(frozen=True, slots=True)
class Emission:
    """One span event (`event` None: none) and one counter increment (`counter` None: none)."""

    event: str | None
    at: float
    attributes: Mapping[str, Any] = field(default_factory=dict)
    counter: str | None = None
    labels: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DecisionView:
    """What the decision rows read: the final decision, its attempt and its step."""

    step_id: str
    capability: str
    at: float
    correction_started_at: float
    action: str
    layer: str | None
    status: int | None
    inputs: Mapping[str, Any]
    reason: str
    corrected: Mapping[str, Any] | None
    error_message: str | None
    error_response: str | None
    attempt_number: int | None
    independent: bool
    correction_layer: str | None = None  # the layer whose correction the attempt sent

    @property
    def applied(self) -> bool:
        """A correction was accepted: the attempt is resent with corrected parameters."""
        return self.action == Action.RETRY_CORRECTED

    def applied_by(self, layer: Layer) -> bool:
        """The correction of `layer` was accepted."""
        return self.applied and self.layer == layer

    def verdict(self, slot: str) -> Mapping[str, Any] | None:
        """The recorded verdict of one layer (`analyzer`, `resolver`, `legacy`), if consulted."""
        verdict = self.inputs.get(slot)
        return verdict if isinstance(verdict, Mapping) else None

    @property
    def analyzer_said_yes(self) -> bool:
        """Layer 3 answered "should retry" (a "cannot fix" is reported with its LLM call)."""
        analyzer = self.verdict("analyzer")
        return bool(analyzer and analyzer.get("answered") and analyzer.get("should_retry"))

    @property
    def labels(self) -> dict[str, Any]:
        """The labels every orchestration counter of a step carries."""
        return {**MODULE_ORCHESTRATION, "capability": self.capability}


def decision_view(step: StepTrack, attempt: AttemptTrack, event: AttemptDecided) -> DecisionView:
    """The view of one final decision that the rows of `DECISION_SPAN_EVENTS` read."""
    decision = event.decision
    inputs = decision.inputs
    status = attempt.status if attempt.status is not None else inputs.get("status")
    return DecisionView(
        step_id=step.step_id,
        capability=step.capability,
        at=event.at,
        correction_started_at=attempt.correction_started_at or event.at,
        action=str(decision.action),
        layer=str(decision.layer) if decision.layer else None,
        status=status,
        inputs=inputs,
        reason=decision.reason,
        corrected=decision.corrected_parameters,
        error_message=(
            preview(attempt.transport_error_message)
            if status == 0
            else f"component returned status {status}"
        ),
        error_response=preview(body_text(attempt.response_body)),
        attempt_number=attempt.attempt_number or inputs.get("attempt_number"),
        independent=not inputs.get("has_dependencies", bool(step.depends_on)),
        correction_layer=attempt.correction_layer,
    )


@dataclass(frozen=True, slots=True)
class SpanEventRow:
    """One row: when `when(view)` holds, add span event `event` and increment `counter`."""

    event: str | None
    counter: str | None
    source: str
    when: Callable[[DecisionView], bool]
    attributes: Callable[[DecisionView], Mapping[str, Any]] = lambda view: {}
    labels: Callable[[DecisionView], Mapping[str, Any]] = lambda view: view.labels
    at: Callable[[DecisionView], float] = lambda view: view.at


def _analysis_retry(view: DecisionView) -> dict[str, Any]:
    analyzer = view.verdict("analyzer") or {}
    changes = analyzer.get("changes") or {}
    return {
        "step_id": view.step_id,
        "capability": view.capability,
        "http_status": view.status,
        "reason": preview(analyzer.get("explanation")),
        "error_message": view.error_message,
        "error_response": view.error_response,
        "suggested_changes": json_preview(changes),
        "suggested_changes_count": len(changes) if isinstance(changes, Mapping) else 0,
    }


def _semantic_retry_applied(view: DecisionView) -> dict[str, Any]:
    resolver = view.verdict("resolver") or {}
    return {
        "step_id": view.step_id,
        "capability": view.capability,
        "analysis": preview(resolver.get("explanation")),
        "corrected_params": json_preview(view.corrected or {}),
        "independent_step": view.independent,
    }


def _feedback_started(view: DecisionView) -> dict[str, Any]:
    return {
        "step_id": view.step_id,
        "capability": view.capability,
        "error_type": "type_mismatch",
        "error_message": view.error_message,
        "error_response": view.error_response,
    }


def _feedback_success(view: DecisionView) -> dict[str, Any]:
    return {
        "step_id": view.step_id,
        "retries_used": int(view.inputs.get("validation_retries") or 0) + 1,
        "corrected_params": json_preview(view.corrected or {}),
    }


def _with_status(view: DecisionView) -> dict[str, Any]:
    return {**view.labels, "http_status": view.status}


DECISION_SPAN_EVENTS: tuple[SpanEventRow, ...] = (
    SpanEventRow("llm_error_analysis_retry", "orchestration.error_analysis.retry",
                 "TruvaG3 error analyzer: a yes-answer whose correction was applied",
                 lambda view: view.analyzer_said_yes and view.applied_by(Layer.ANALYZER),
                 _analysis_retry, _with_status),
    SpanEventRow("llm_error_analysis_no_retry", "orchestration.error_analysis.no_retry",
                 "TruvaG3 error analyzer: a yes-answer that led to no correction",
                 lambda view: view.analyzer_said_yes and not view.applied_by(Layer.ANALYZER),
                 lambda view: _no_retry_attributes(view.step_id, view.reason), _with_status),
    SpanEventRow("semantic_retry_applied", "orchestration.semantic_retry.applied",
                 "TruvaG3 layer 4: a re-resolution was applied",
                 lambda view: view.applied_by(Layer.RE_RESOLUTION), _semantic_retry_applied),
    # seed 001 "Observability": success ÷ attempts is the semantic retry success rate.
    SpanEventRow(None, "orchestration.semantic_retry.attempts",
                 "TruvaG3 layer 4: the re-resolver was consulted",
                 lambda view: view.verdict("resolver") is not None),
    SpanEventRow(None, "orchestration.semantic_retry.success",
                 "TruvaG3 layer 4: an attempt sending a re-resolution succeeded",
                 lambda view: view.action == Action.SUCCESS
                 and view.correction_layer == Layer.RE_RESOLUTION),
    SpanEventRow(None, "orchestration.semantic_retry.independent_step",
                 "TruvaG3 layer 4: a re-resolution applied to a step with no dependencies",
                 lambda view: view.applied_by(Layer.RE_RESOLUTION) and view.independent),
    SpanEventRow("validation_feedback_started", "orchestration.validation_feedback.attempts",
                 "TruvaG3 validation feedback: the legacy callback was consulted",
                 lambda view: view.verdict("legacy") is not None, _feedback_started,
                 at=lambda view: view.correction_started_at),
    SpanEventRow("validation_feedback_success", "orchestration.validation_feedback.success",
                 "TruvaG3 validation feedback: its correction was applied",
                 lambda view: view.verdict("legacy") is not None
                 and view.applied_by(Layer.LEGACY), _feedback_success),
    SpanEventRow("validation_feedback_failed", "orchestration.validation_feedback.failed",
                 "TruvaG3 validation feedback: consulted, no correction applied",
                 lambda view: view.verdict("legacy") is not None
                 and not view.applied_by(Layer.LEGACY),
                 lambda view: {"step_id": view.step_id, "reason": "llm_correction_failed"},
                 lambda view: {**view.labels, "reason": "llm_correction_failed"}),
    SpanEventRow("non_retryable_error_detected", "orchestration.non_retryable_errors",
                 "TruvaG3 routing: an explicit retryable:false stops the step",
                 lambda view: view.action == Action.STOP_REFUSED,
                 lambda view: {"step_id": view.step_id, "capability": view.capability,
                               "attempt": view.attempt_number}),
)  # fmt: skip


def decision_span_events(view: DecisionView) -> list[Emission]:
    """The span events and counters of one final decision: every matching row, in order."""
    return [
        Emission(row.event, row.at(view), row.attributes(view), row.counter, row.labels(view))
        for row in DECISION_SPAN_EVENTS
        if row.when(view)
    ]


def _no_retry_attributes(step_id: str, reason: Any) -> dict[str, Any]:
    return {"step_id": step_id, "reason": preview(str(reason or ""))}


def analysis_no_retry(
    step: StepTrack, at: float, status: int | None, reason: Any
) -> Emission:
    """TruvaG3's `llm_error_analysis_no_retry`: the analyzer's answer led to no correction."""
    return Emission(
        "llm_error_analysis_no_retry",
        at,
        _no_retry_attributes(step.step_id, reason),
        "orchestration.error_analysis.no_retry",
        {**MODULE_ORCHESTRATION, "capability": step.capability, "http_status": status},
    )


def layer_span_events(
    event: LLMCall, step: StepTrack, attempt: AttemptTrack | None, end_at: float
) -> list[Emission]:
    """TruvaG3's analyzer and re-resolver span events around one LLM call."""
    call = _LayerCall(
        event, step, end_at,
        status=attempt.status if attempt is not None else None,
        duration_ms=round(event.latency_ms, 3),
        parsed=event.parsed if isinstance(event.parsed, Mapping) else {},
    )  # fmt: skip
    if event.site == SITE_ERROR_ANALYSIS:
        return _analyzer_events(call)
    if event.site == SITE_SEMANTIC_RETRY:
        return _resolver_events(call)
    return []


@dataclass(frozen=True, slots=True)
class _LayerCall:
    """One layer's LLM call as its span events read it."""

    event: LLMCall
    step: StepTrack
    end_at: float
    status: int | None
    duration_ms: float
    parsed: Mapping[str, Any]


def _analyzer_events(call: _LayerCall) -> list[Emission]:
    event, step, end_at, status = call.event, call.step, call.end_at, call.status
    duration_ms, parsed = call.duration_ms, call.parsed
    emitted = [
        Emission("error_analyzer.llm_call_start", event.at,
                 {"capability": step.capability, "http_status": status}),
    ]  # fmt: skip
    if event.error is not None:
        emitted.append(Emission("error_analyzer.llm_call_failed", end_at,
                                {"error": preview(event.error), "capability": step.capability}))
        return emitted
    emitted.append(Emission("error_analyzer.llm_call_completed", end_at,
                            {"duration_ms": duration_ms, "capability": step.capability}))
    if event.parse_error is not None:
        emitted.append(Emission("error_analyzer.parse_failed", end_at,
                                {"error": preview(event.parse_error)}))
        return emitted
    changes = parsed.get("suggested_changes")
    emitted.append(Emission("error_analyzer.analysis_complete", end_at, {
        "should_retry": bool(parsed.get("should_retry")),
        "reason": preview(str(parsed.get("reason") or "")),
        "suggested_changes_count": len(changes) if isinstance(changes, Mapping) else 0,
        "total_duration_ms": duration_ms,
    }))
    if parsed.get("should_retry") is False:
        emitted.append(analysis_no_retry(step, end_at, status, parsed.get("reason")))
    return emitted


def _resolver_events(call: _LayerCall) -> list[Emission]:
    event, step, end_at, status = call.event, call.step, call.end_at, call.status
    duration_ms, parsed = call.duration_ms, call.parsed
    emitted = [Emission("contextual_re_resolution.start", event.at, {
        "step_id": step.step_id,
        "capability": step.capability,
        "retry_count": step.corrections_applied,
        "http_status": status,
        "source_data_keys": list(step.depends_on),
        "model": event.model,
    })]
    if event.error is not None:
        emitted.append(Emission("contextual_re_resolution.error", end_at,
                                {"error": preview(event.error), "duration_ms": duration_ms}))
    elif event.parse_error is not None:
        emitted.append(Emission("contextual_re_resolution.parse_error", end_at, {
            "error": preview(event.parse_error),
            "response": preview(event.raw_text or "", SHORT_PREVIEW_CHARS),
        }))
    else:
        corrected = parsed.get("corrected_parameters")
        emitted.append(Emission("contextual_re_resolution.complete", end_at, {
            "should_retry": bool(parsed.get("should_retry")),
            "analysis": preview(str(parsed.get("analysis") or ""), SHORT_PREVIEW_CHARS),
            "corrected_params_count": len(corrected) if isinstance(corrected, Mapping) else 0,
            "duration_ms": duration_ms,
        }))
    return emitted
