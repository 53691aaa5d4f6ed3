"""`TelemetryRecorder`: executor events to an execution → step → attempt → LLM span tree.

Longer than ~600 lines on purpose: it is one state machine whose handlers all read and update
the same open-span tracks under one lock. What is pure lives beside it: attribute values
(`attributes`), the decision → span-event table (`span_events`), LLM-call spans (`llm_spans`)
and the instruments (`metrics`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from executor import __version__
from executor.events import (
    AttemptDecided,
    AttemptDispatched,
    AttemptResponded,
    BackoffEvent,
    CircuitStateChanged,
    Event,
    ExecutionFinished,
    ExecutionStarted,
    LLMCall,
    Notice,
    ParametersCoerced,
    StepFinished,
    StepStarted,
)
from executor.llm import SITE_CORRECTION
from executor.redact import redact_secrets
from executor.telemetry.attributes import (
    INSTRUMENTATION_SCOPE,
    LLM_OPERATION,
    MODULE_ORCHESTRATION,
    SPAN_EXECUTION,
    STEP_SPAN_PREFIX,
    TOOL_SPAN_PREFIX,
    WORKFLOW_OPERATION,
    body_text,
    capability_descriptions,
    capped,
    capped_json,
    layer_name,
    mime_type,
    otel_attributes,
    preview,
    server_of,
    skip_classification,
    to_ns,
    workflow_name,
)
from executor.telemetry.ids import ExecutionTraceIds
from executor.telemetry.llm_spans import llm_metric_points, llm_span_facts
from executor.telemetry.metrics import Meters
from executor.telemetry.span_events import (
    Emission,
    decision_span_events,
    decision_view,
    layer_span_events,
)
from executor.telemetry.tracks import AttemptTrack, ExecutionTrack, StepTrack
from executor.tracecontext import span_id_for, trace_id_for_execution

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span

_logger = logging.getLogger(__name__)

DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0
ABANDON_JOIN_S = 1.0

class TelemetryRecorder:
    """A `Recorder` that turns executor events into OpenTelemetry spans, span events and metrics.

    Pass the providers explicitly; none is installed globally. `meter_provider=None` records
    no metrics. `exporters` are shut down to stop their retries when `shutdown` runs out of
    time. `record` never raises: a failure is logged and kept in `failures`.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider,
        meter_provider: MeterProvider | None = None,
        exporters: Sequence[Any] = (),
        capture_content: bool = False,
        propagate_trace_context: bool = True,
    ) -> None:
        from opentelemetry import metrics as metrics_api
        from opentelemetry import trace as trace_api

        self._trace = trace_api
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider or metrics_api.NoOpMeterProvider()
        self._exporters = tuple(exporters)
        self.capture_content = capture_content
        self.propagate_trace_context = propagate_trace_context
        self.metrics_gate: Any = None
        self._tracer = tracer_provider.get_tracer(INSTRUMENTATION_SCOPE, __version__)
        meter = self.meter_provider.get_meter(INSTRUMENTATION_SCOPE, __version__)
        self._meters = Meters(meter)
        self._executions: dict[str, ExecutionTrack] = {}
        self._finished_executions: set[str] = set()
        self._lock = threading.RLock()
        self.failures: list[str] = []
        self._handlers = {
            "execution_started": self._on_execution_started,
            "execution_finished": self._on_execution_finished,
            "step_started": self._on_step_started,
            "step_finished": self._on_step_finished,
            "parameters_coerced": self._on_parameters_coerced,
            "attempt_dispatched": self._on_attempt_dispatched,
            "attempt_responded": self._on_attempt_responded,
            "attempt_decided": self._on_attempt_decided,
            "backoff": self._on_backoff,
            "llm_call": self._on_llm_call,
            "notice": self._on_notice,
            "circuit_state_changed": self._on_circuit_state_changed,
        }

    # ----------------------------------------------------------------------------- public

    def record(self, event: Event) -> None:
        """Turn one event into spans, span events and metric points; never raises."""
        handler = self._handlers.get(getattr(event, "kind", ""))
        if handler is None:
            return
        try:
            with self._lock:
                handler(event)
        except Exception as exc:  # telemetry must never disturb the run
            message = f"{type(event).__name__}: {type(exc).__name__}: {exc}"
            self.failures.append(message)
            _logger.warning("telemetry could not record %s", message)

    def end_open_spans(self) -> None:
        """End every span still open (a run that never finished) at its execution's last time."""
        with self._lock:
            for track in list(self._executions.values()):
                self._end_execution(track, track.last_at, interrupted=True)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export what is buffered now; True when both providers flushed."""
        flushed = True
        for provider in (self.tracer_provider, self.meter_provider):
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                flushed = bool(flush(timeout_millis)) and flushed
        return flushed

    def shutdown(self, timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S) -> bool:
        """End open spans and shut both providers down, which exports what remains.

        Both providers shut down concurrently; after `timeout_s` (an unreachable collector) the
        export is abandoned on its daemon threads so a command never hangs on exit. True when
        everything finished in time. A KeyboardInterrupt while waiting abandons the export the
        same way, at once, and is raised again.
        """
        self.end_open_spans()
        stoppers = [
            threading.Thread(target=stop, name="truva-telemetry-shutdown", daemon=True)
            for stop in (
                getattr(self.tracer_provider, "shutdown", None),
                getattr(self.meter_provider, "shutdown", None),
            )
            if stop is not None
        ]
        for thread in stoppers:
            thread.start()
        deadline = time.monotonic() + timeout_s
        try:
            for thread in stoppers:
                thread.join(max(0.0, deadline - time.monotonic()))
        except KeyboardInterrupt:
            self._abandon_export()
            raise
        finished = not any(thread.is_alive() for thread in stoppers)
        if not finished:
            _logger.warning(
                "telemetry export did not finish within %g s; it was abandoned", timeout_s
            )
            self._abandon_export()
            for thread in stoppers:
                thread.join(ABANDON_JOIN_S)
        return finished

    def _abandon_export(self) -> None:
        for exporter in self._exporters:
            exporter.shutdown()  # ends the exporter's retry wait at once

    # ---------------------------------------------------------------------------- helpers

    def _count(self, name: str, attributes: Mapping[str, Any], amount: int = 1) -> None:
        if self._meters.enabled:
            self._meters.count(name, attributes, amount)

    def _observe(self, name: str, value: float, attributes: Mapping[str, Any]) -> None:
        if self._meters.enabled:
            self._meters.observe(name, value, attributes)

    def _start(
        self,
        name: str,
        parent: Span | None,
        at: float,
        attributes: Mapping[str, Any],
        kind: Any = None,
        *,
        key: tuple[Any, ...],
    ) -> Span:
        """Start a span whose id is `span_id_for(*key)`; key[0] is the execution id."""
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        ids = getattr(self.tracer_provider, "id_generator", None)
        if isinstance(ids, ExecutionTraceIds):
            ids.use_next_span(span_id_for(*key))
        return self._tracer.start_span(
            name,
            context=context,
            kind=kind if kind is not None else self._trace.SpanKind.INTERNAL,
            attributes=otel_attributes({**attributes, "session.id": key[0]}),
            start_time=to_ns(at),
        )

    def _content(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """`attributes` when content capture is on, else nothing."""
        return dict(attributes) if self.capture_content else {}

    @staticmethod
    def _event(span: Span, name: str, at: float, attributes: Mapping[str, Any]) -> None:
        span.add_event(name, otel_attributes(attributes), timestamp=to_ns(at))

    def _fail(self, span: Span, description: str | None) -> None:
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description))

    @staticmethod
    def _end(span: Span, start_at: float, end_at: float) -> None:
        span.end(end_time=to_ns(max(start_at, end_at)))

    def _execution(self, execution_id: str | None, at: float) -> ExecutionTrack | None:
        """The execution's track; one is opened when events arrive without ExecutionStarted."""
        if execution_id is None or execution_id in self._finished_executions:
            return None
        track = self._executions.get(execution_id)
        if track is None:
            track = self._open_execution(execution_id, at, {"truva.execution.id": execution_id}, 0)
        track.last_at = max(track.last_at, at)
        return track

    def _open_execution(
        self, execution_id: str, at: float, attributes: Mapping[str, Any], step_count: int
    ) -> ExecutionTrack:
        ids = getattr(self.tracer_provider, "id_generator", None)
        if isinstance(ids, ExecutionTraceIds):
            ids.use_next(trace_id_for_execution(execution_id))
        span = self._start(
            SPAN_EXECUTION,
            None,
            at,
            {
                "gen_ai.operation.name": WORKFLOW_OPERATION,
                "openinference.span.kind": "CHAIN",
                **attributes,
            },
            key=(execution_id, "execution"),
        )
        track = ExecutionTrack(span, execution_id, at, step_count, at)
        self._executions[execution_id] = track
        return track

    def _step(self, execution_id: str, step_id: str | None, at: float) -> StepTrack | None:
        track = self._execution(execution_id, at)
        if track is None or step_id is None:
            return None
        return track.steps.get(step_id)

    def _attempt(
        self, execution_id: str, step_id: str | None, n: int | None, at: float
    ) -> AttemptTrack | None:
        step = self._step(execution_id, step_id, at)
        if step is None or n is None:
            return None
        return step.attempts.get(n)

    def _innermost_open_span(
        self, execution_id: str, step_id: str | None, n: int | None, at: float
    ) -> Span | None:
        """The open attempt span, else the open step span, else the root span."""
        attempt = self._attempt(execution_id, step_id, n, at)
        if attempt is not None and not attempt.ended:
            return attempt.span
        step = self._step(execution_id, step_id, at)
        if step is not None and not step.ended:
            return step.span
        track = self._execution(execution_id, at)
        return track.span if track is not None else None

    # -------------------------------------------------------------------------- execution

    def _on_execution_started(self, event: ExecutionStarted) -> None:
        if (
            event.execution_id in self._executions
            or event.execution_id in self._finished_executions
        ):
            return
        steps = event.plan.get("steps") if isinstance(event.plan, dict) else None
        step_count = len(steps) if isinstance(steps, list) else 0
        llm = event.llm or {}
        track = self._open_execution(
            event.execution_id,
            event.started_at,
            {
                "gen_ai.workflow.name": workflow_name(event.plan_path),
                **self._content({"input.value": capped(event.query, "executions.query")}),
                "truva.execution.id": event.execution_id,
                "truva.query": preview(event.query),
                "truva.plan.path": event.plan_path,
                "truva.plan.step_count": step_count,
                "truva.tool_version": event.tool_version,
                "truva.llm.model": llm.get("model") if isinstance(llm.get("model"), str) else None,
            },
            step_count,
        )
        track.descriptions = capability_descriptions(event.plan)
        self._event(
            track.span,
            "plan_execution_started",
            event.started_at,
            {
                "request_id": event.execution_id,
                "plan_id": event.execution_id,
                "step_count": step_count,
            },
        )

    def _on_execution_finished(self, event: ExecutionFinished) -> None:
        track = self._execution(event.execution_id, event.finished_at)
        if track is None:
            return
        failed_steps = sum(1 for status in track.step_statuses.values() if status != "succeeded")
        total_steps = max(track.step_count, len(track.step_statuses))
        track.span.set_attributes(
            otel_attributes(
                {
                    "truva.execution.status": event.status,
                    "truva.stop_reason": preview(event.stop_reason),
                    "truva.incomplete_steps": tuple(event.incomplete_steps),
                    "truva.llm.calls": event.llm_calls,
                    "truva.llm.total_tokens": event.llm_total_tokens,
                    **self._content(
                        {
                            "output.value": json.dumps(
                                {
                                    "status": event.status,
                                    "incomplete_steps": list(event.incomplete_steps),
                                }
                            ),
                            "output.mime_type": "application/json",
                        }
                    ),
                }
            )
        )
        self._event(
            track.span,
            "plan_execution_completed",
            event.finished_at,
            {
                "success": event.status == "succeeded",
                "status": event.status,
                "failed_steps": failed_steps,
                "total_steps": total_steps,
                "duration_ms": round((event.finished_at - track.started_at) * 1000.0, 3),
            },
        )
        if event.status != "succeeded":
            incomplete = ", ".join(event.incomplete_steps) or "none"
            self._fail(track.span, f"execution {event.status}; incomplete steps: {incomplete}")
        self._end_execution(track, event.finished_at, interrupted=False)

    def _end_execution(self, track: ExecutionTrack, at: float, *, interrupted: bool) -> None:
        for step in track.steps.values():
            self._end_step(step, at, interrupted=interrupted)
        if interrupted:
            track.span.set_attribute("truva.interrupted", True)
            self._fail(track.span, "the run ended without an execution_finished event")
        self._end(track.span, track.started_at, at)
        del self._executions[track.execution_id]
        self._finished_executions.add(track.execution_id)

    def _end_step(self, step: StepTrack, at: float, *, interrupted: bool) -> None:
        for attempt in step.attempts.values():
            if not attempt.ended:
                attempt.span.set_attribute("truva.interrupted", True)
                attempt.ended = True
                attempt.span.end(end_time=to_ns(at))
        if not step.ended:
            if interrupted:
                step.span.set_attribute("truva.interrupted", True)
            step.ended = True
            self._end(step.span, step.started_at, at)

    def _on_circuit_state_changed(self, event: CircuitStateChanged) -> None:
        if event.execution_id is None:
            tracks = list(self._executions.values())
        else:
            track = self._execution(event.execution_id, event.at)
            tracks = [track] if track is not None else []
        for track in tracks:
            self._event(
                track.span,
                "circuit_breaker.state_changed",
                event.at,
                {
                    "breaker": event.breaker,
                    "from_state": event.from_state,
                    "to_state": event.to_state,
                    "reason": preview(event.reason),
                },
            )

    # ------------------------------------------------------------------------------- steps

    def _on_step_started(self, event: StepStarted) -> None:
        track = self._execution(event.execution_id, event.started_at)
        if track is None:
            return
        span = self._start(
            STEP_SPAN_PREFIX + event.step_id,
            track.span,
            event.started_at,
            {
                "openinference.span.kind": "CHAIN",
                "truva.step.id": event.step_id,
                "truva.step.tool": event.tool,
                "truva.step.capability": event.capability,
                "truva.step.depends_on": tuple(event.depends_on),
                "truva.step.protected_keys": tuple(sorted(event.protected_keys)),
                "truva.capability.orchestrator": event.orchestrator,
                "truva.capability.side_effects": event.side_effects,
                **self._content(
                    {
                        "input.value": capped_json(
                            event.parameters, f"steps of execution {event.execution_id}"
                        ),
                        "input.mime_type": "application/json",
                    }
                ),
            },
            key=(event.execution_id, "step", event.step_id),
        )
        track.steps[event.step_id] = StepTrack(
            span,
            event.step_id,
            event.started_at,
            event.tool,
            event.capability,
            tuple(event.depends_on),
            execution_id=event.execution_id,
            description=track.descriptions.get(f"{event.tool}.{event.capability}") or None,
        )
        self._event(
            span,
            "step_execution_started",
            event.started_at,
            {
                "step_id": event.step_id,
                "agent_name": event.tool,
                "capability": event.capability,
            },
        )

    def _on_step_finished(self, event: StepFinished) -> None:
        track = self._execution(event.execution_id, event.finished_at)
        if track is None:
            return
        track.step_statuses[event.step_id] = event.status
        step = track.steps.get(event.step_id)
        if step is None and event.status == "skipped":
            self._record_skip(track, event)
            return
        if step is None:
            span = self._start(
                STEP_SPAN_PREFIX + event.step_id,
                track.span,
                event.finished_at,
                {"openinference.span.kind": "CHAIN", "truva.step.id": event.step_id},
                key=(event.execution_id, "step", event.step_id),
            )
            step = StepTrack(
                span, event.step_id, event.finished_at, "", "", execution_id=event.execution_id
            )
            track.steps[event.step_id] = step
        duration_ms = round((event.finished_at - step.started_at) * 1000.0, 3)
        step.span.set_attributes(
            otel_attributes(
                {
                    "truva.step.success": event.status == "succeeded",
                    "truva.step.attempts": event.attempts,
                    "truva.step.duration": round(event.finished_at - step.started_at, 6),
                    "truva.step.error": preview(event.error),
                    **self._content(
                        {
                            "output.value": json.dumps(
                                {
                                    "status": event.status,
                                    "final_action": event.final_action,
                                    "final_rule_id": event.final_rule_id,
                                }
                            ),
                            "output.mime_type": "application/json",
                        }
                    ),
                    "truva.step.status": event.status,
                    "truva.dispatch_count": event.dispatch_count,
                    "truva.validation_retries": event.validation_retries,
                    "truva.semantic_retries": event.semantic_retries,
                    "truva.final_action": event.final_action,
                    "truva.final_rule_id": event.final_rule_id,
                    "truva.skip_reason": preview(event.skip_reason),
                }
            )
        )
        self._event(
            step.span,
            "step_execution_completed",
            event.finished_at,
            {
                "step_id": event.step_id,
                "success": event.status == "succeeded",
                "status": event.status,
                "attempts": event.attempts,
                "duration_ms": duration_ms,
            },
        )
        if event.status != "succeeded":
            self._fail(step.span, preview(event.error) or event.status)
        self._end_step(step, event.finished_at, interrupted=False)

    def _record_skip(self, track: ExecutionTrack, event: StepFinished) -> None:
        reason_text = event.skip_reason or event.error or ""
        reason, blocking_reason, failed_dependency = skip_classification(reason_text)
        name = (
            "executor.step.skipped_dependency"
            if reason == "failed_dependency"
            else "truva.step.skipped"
        )
        self._event(
            track.span,
            name,
            event.finished_at,
            {
                "step_id": event.step_id,
                "reason": preview(reason_text),
                "blocking_reason": blocking_reason or None,
                "failed_dependency": failed_dependency,
            },
        )
        self._count(
            "orchestration.step.skipped",
            {**MODULE_ORCHESTRATION, "reason": reason, "blocking_reason": blocking_reason},
        )

    def _on_parameters_coerced(self, event: ParametersCoerced) -> None:
        step = self._step(event.execution_id, event.step_id, event.at)
        if step is None:
            return
        lines = [
            preview(str(c.get("log_line") or c.get("key")))
            for c in event.coercions
            if isinstance(c, Mapping)
        ]
        keys = [str(c.get("key")) for c in event.coercions if isinstance(c, Mapping)]
        self._event(
            step.span,
            "type_coercion_applied",
            event.at,
            {
                "step_id": event.step_id,
                "capability": step.capability,
                "attempt": event.n,
                "coerced_count": len(event.coercions),
                "coerced_keys": keys,
                "coercions": lines,
            },
        )
        self._count(
            "orchestration.type_coercion.applied",
            {**MODULE_ORCHESTRATION, "capability": step.capability},
        )

    # ---------------------------------------------------------------------------- attempts

    def _open_attempt(
        self, step: StepTrack, n: int, at: float, attributes: Mapping[str, Any]
    ) -> AttemptTrack:
        tool_name = f"{step.tool}.{step.capability}"
        span = self._start(
            TOOL_SPAN_PREFIX + tool_name,
            step.span,
            at,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool_name,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": f"{step.execution_id}:{step.step_id}:{n}",
                "gen_ai.tool.description": step.description,
                "openinference.span.kind": "TOOL",
                "tool.name": tool_name,
                "tool.description": step.description,
                "truva.step.id": step.step_id,
                "truva.attempt.n": n,
                **attributes,
            },
            key=(step.execution_id, "attempt", step.step_id, n),
        )
        attempt = AttemptTrack(span, n)
        step.attempts[n] = attempt
        return attempt

    def _on_attempt_dispatched(self, event: AttemptDispatched) -> None:
        step = self._step(event.execution_id, event.step_id, event.at)
        if step is None:
            return
        address, port = server_of(event.url)
        where = f"attempts {event.execution_id}:{event.step_id}:{event.n}"
        arguments = capped_json(event.parameters, where) if self.capture_content else None
        attempt = self._open_attempt(
            step,
            event.n,
            event.at,
            {
                "truva.attempt.number": event.attempt_number,
                "truva.dispatched": True,
                "truva.correction_layer": event.correction_layer,
                "http.request.method": event.method,
                "url.full": redact_secrets(event.url),
                "server.address": address,
                "server.port": port,
                "http.request.resend_count": step.dispatches or None,
                **self._content(
                    {
                        "gen_ai.tool.call.arguments": arguments,
                        "input.value": arguments,
                        "input.mime_type": "application/json",
                    }
                ),
            },
        )
        attempt.attempt_number = event.attempt_number
        attempt.correction_layer = event.correction_layer
        step.dispatches += 1
        self._count("truva.dispatches", {"tool": step.tool, "capability": step.capability})

    def _on_attempt_responded(self, event: AttemptResponded) -> None:
        attempt = self._attempt(event.execution_id, event.step_id, event.n, event.at)
        if attempt is None:
            return
        attempt.status = event.status
        attempt.response_body = event.response_body
        attempt.transport_error_message = event.transport_error_message
        error_type = None
        if event.status == 0:
            error_type = event.transport_error or "_OTHER"
        elif not 200 <= event.status < 300:
            error_type = str(event.status)
        where = f"attempts {event.execution_id}:{event.step_id}:{event.n}"
        result = capped(body_text(event.response_body), where) if self.capture_content else None
        attempt.span.set_attributes(
            otel_attributes(
                {
                    "http.response.status_code": event.status or None,
                    "error.type": error_type,
                    "truva.retry_policy": event.retry_policy,
                    "truva.http.duration": round(event.elapsed_ms / 1000.0, 6),
                    "truva.transport_error": event.transport_error,
                    "truva.transport_error.message": preview(event.transport_error_message),
                    "truva.response.size": len(event.response_body),
                    **self._content(
                        {
                            "gen_ai.tool.call.result": result,
                            "output.value": result,
                            "output.mime_type": mime_type(event.response_headers),
                        }
                    ),
                }
            )
        )

    def _on_attempt_decided(self, event: AttemptDecided) -> None:
        step = self._step(event.execution_id, event.step_id, event.at)
        if step is None:
            return
        decision = event.decision
        action = str(decision.action)
        attempt = step.attempts.get(event.n)
        if attempt is None:
            inputs = decision.inputs
            attempt = self._open_attempt(
                step,
                event.n,
                event.at,
                {
                    "truva.attempt.number": inputs.get("attempt_number"),
                    "truva.dispatched": event.dispatched,
                },
            )
            if not event.dispatched:
                attempt.span.set_attribute("error.type", action)
        delay_ms = decision.delay_ms
        attempt.span.set_attributes(
            otel_attributes(
                {
                    "truva.decision.action": action,
                    "truva.decision.rule_id": decision.rule_id,
                    "truva.decision.reason": preview(decision.reason),
                    "truva.decision.layer": layer_name(decision),
                    "truva.delay": round(delay_ms / 1000.0, 6)
                    if action == "retry_same" and isinstance(delay_ms, int | float)
                    else None,
                    "truva.delay_source": decision.delay_source
                    if action == "retry_same"
                    else None,
                }
            )
        )
        self._emit(attempt.span, decision_span_events(decision_view(step, attempt, event)))
        if action != "success":
            self._fail(attempt.span, preview(decision.reason))
        if action == "retry_corrected":
            step.corrections_applied += 1
        self._count("truva.decisions", {"action": action, "rule_id": decision.rule_id})
        if not attempt.ended:
            attempt.ended = True
            self._end(attempt.span, event.at, event.at)

    def _emit(self, span: Span, emissions: Iterable[Emission]) -> None:
        """Add each emission's span event to `span` and its increment to the counters."""
        for emission in emissions:
            if emission.event is not None:
                self._event(span, emission.event, emission.at, emission.attributes)
            if emission.counter is not None:
                self._count(emission.counter, emission.labels)

    def _on_backoff(self, event: BackoffEvent) -> None:
        step = self._step(event.execution_id, event.step_id, event.at)
        if step is None:
            return
        attempt = step.attempts.get(event.n)
        attempt_number = attempt.attempt_number if attempt is not None else None
        if event.phase == "started":
            self._event(
                step.span,
                "step.retry.backoff",
                event.at,
                {
                    "request_id": event.execution_id,
                    "step_id": event.step_id,
                    "agent_name": step.tool,
                    "attempt": attempt_number or event.n,
                    "delay_ms": round(event.planned_ms, 4),
                    "strategy": "exponential" if event.source == "backoff" else event.source,
                    "truva.delay_source": event.source,
                },
            )
        elif event.phase in ("finished", "cancelled"):
            waited = event.actual_ms if event.actual_ms is not None else event.planned_ms
            self._observe(
                "truva.backoff.wait",
                waited / 1000.0,
                {"source": event.source, "outcome": event.phase},
            )
            if event.phase == "cancelled":
                self._event(
                    step.span,
                    "truva.backoff.cancelled",
                    event.at,
                    {
                        "step_id": event.step_id,
                        "attempt": attempt_number or event.n,
                        "planned_ms": round(event.planned_ms, 4),
                        "actual_ms": round(waited, 4),
                        "source": event.source,
                    },
                )

    def _on_notice(self, event: Notice) -> None:
        span = self._innermost_open_span(event.execution_id, event.step_id, event.n, event.at)
        if span is None:
            return
        self._event(
            span,
            f"truva.{event.name}",
            event.at,
            {
                **{f"truva.{key}": value for key, value in (event.attrs or {}).items()},
                "truva.step.id": event.step_id,
                "truva.attempt.n": event.n,
                "message": preview(event.message),
            },
        )

    # ------------------------------------------------------------------------------- LLM

    def _on_llm_call(self, event: LLMCall) -> None:
        track = self._execution(event.execution_id, event.at)
        if track is None:
            return
        step = track.steps.get(event.step_id)
        attempt = step.attempts.get(event.n) if step is not None else None
        parent = (
            attempt.span if attempt is not None else step.span if step is not None else track.span
        )
        end_at = event.at + event.latency_ms / 1000.0
        track.last_at = max(track.last_at, end_at)
        facts = llm_span_facts(event, capture_content=self.capture_content)
        span = self._start(
            f"{LLM_OPERATION} {event.model}",
            parent,
            event.at,
            facts.attributes,
            kind=self._trace.SpanKind.CLIENT,
            key=(event.execution_id, "llm", event.call_id),
        )
        if facts.error_type is not None:
            self._fail(span, preview(event.error))
        self._end(span, event.at, end_at)
        if attempt is not None and event.site == SITE_CORRECTION:
            attempt.correction_started_at = attempt.correction_started_at or event.at
        capability = step.capability if step is not None else ""
        if self._meters.enabled:
            self._meters.record(
                llm_metric_points(event, capability, facts.error_type, facts.address)
            )
        events_span = self._innermost_open_span(event.execution_id, event.step_id, event.n, end_at)
        if step is not None and events_span is not None:
            self._emit(events_span, layer_span_events(event, step, attempt, end_at))
