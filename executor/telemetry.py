"""OpenTelemetry spans, span events and metrics built from the executor's event stream.

`TelemetryRecorder` is a `Recorder`: it turns events into an execution → step → attempt → LLM
call span tree and TruvaG3-named span events and metrics, on the providers it is given (it never
sets the global ones). Span times are the events' own timestamps, so a recorded run can be
rebuilt after the fact (`build_spans_from_events`) and embedded in a bundle as OTLP/JSON
(`spans_to_otlp_json`). `telemetry_from_env` builds one that exports over OTLP/HTTP when the
standard `OTEL_EXPORTER_OTLP_*` variables ask for it, and returns None (importing nothing from
OpenTelemetry) otherwise. Spans carry previews only; the full payloads live in the debug store.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import random
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

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
    FanoutRecorder,
    LLMCall,
    Notice,
    ParametersCoerced,
    StepFinished,
    StepStarted,
)
from executor.llm import SITE_CORRECTION, SITE_ERROR_ANALYSIS, SITE_SEMANTIC_RETRY
from executor.policy import Decision
from executor.redact import redact_json_value, redact_sensitive_text
from executor.tracecontext import (  # noqa: F401 (re-exported: the ids spans get)
    attempt_traceparent,
    span_id_for,
    trace_id_for_execution,
)

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.trace import Span

_logger = logging.getLogger(__name__)

INSTRUMENTATION_SCOPE = "truva-console.executor"
DEFAULT_SERVICE_NAME = "truva-console"
PREVIEW_CHARS = 500  # TruvaG3 truncateString(…, 500): the first 500 characters, then "..."
SHORT_PREVIEW_CHARS = 200  # TruvaG3's limit for re-resolution analysis and raw responses
MODULE_ORCHESTRATION = {"module": "orchestration"}
GEN_AI_PROVIDER = "openai"  # every LLM call goes through the OpenAI-compatible chat API

SPAN_EXECUTION = "orchestrator.execution"
STEP_SPAN_PREFIX = "orchestrator.step."
TOOL_SPAN_PREFIX = "execute_tool "
LLM_OPERATION = "chat"

DEFAULT_METRIC_EXPORT_INTERVAL_MS = 60_000
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0
ABANDON_JOIN_S = 1.0

_LLM_HISTOGRAMS = {
    SITE_ERROR_ANALYSIS: "orchestration.error_analyzer.llm_latency_ms",
    SITE_SEMANTIC_RETRY: "orchestration.semantic_retry.llm_latency_ms",
}
_LLM_ERROR_COUNTERS = {
    SITE_ERROR_ANALYSIS: "orchestration.error_analyzer.llm_errors",
    SITE_SEMANTIC_RETRY: "orchestration.semantic_retry.llm_errors",
}

COUNTERS: dict[str, str] = {
    "orchestration.error_analysis.retry": "Analyzer corrections applied",
    "orchestration.error_analysis.no_retry": "Analyzer answers that led to no correction",
    "orchestration.semantic_retry.applied": "Layer 4 re-resolutions applied",
    "orchestration.semantic_retry.independent_step": "Layer 4 re-resolutions of independent steps",
    "orchestration.non_retryable_errors": "Stops on an explicit retryable:false",
    "orchestration.type_coercion.applied": "Dispatches whose parameters layer 2 coerced",
    "orchestration.validation_feedback.attempts": "Legacy correction callback consultations",
    "orchestration.validation_feedback.success": "Legacy corrections applied",
    "orchestration.validation_feedback.failed": "Legacy consultations that gave no correction",
    "orchestration.step.skipped": "Steps skipped before they started",
    "orchestration.error_analyzer.llm_errors": "Analyzer LLM calls that failed",
    "orchestration.semantic_retry.llm_errors": "Re-resolver LLM calls that failed",
    "truva.decisions": "Final routing decisions, by action and rule id",
    "truva.dispatches": "HTTP requests sent to tools",
}
HISTOGRAMS: dict[str, tuple[str, str]] = {
    "orchestration.error_analyzer.llm_latency_ms": ("ms", "Analyzer LLM call latency"),
    "orchestration.semantic_retry.llm_latency_ms": ("ms", "Re-resolver LLM call latency"),
    "truva.backoff.wait": ("s", "Backoff waits as actually waited"),
    "gen_ai.client.operation.duration": ("s", "GenAI operation duration"),
    "gen_ai.client.token.usage": ("{token}", "Tokens used per LLM call"),
}


# ---------------------------------------------------------------------------------------------
# Small pure helpers


def preview(text: str | None, limit: int = PREVIEW_CHARS) -> str | None:
    """`text` redacted, then cut like TruvaG3's truncateString: first `limit` chars plus "..."."""
    if text is None:
        return None
    redacted = redact_sensitive_text(text)
    return redacted if len(redacted) <= limit else redacted[:limit] + "..."


def json_preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A JSON value with credentials removed, as compact sorted JSON cut to `limit` chars."""
    text = json.dumps(redact_json_value(value), sort_keys=True, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def _ns(at: float) -> int:
    """Epoch seconds to epoch nanoseconds."""
    return round(at * 1e9)


def _attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """OTel attribute values: None dropped, sequences made homogeneous, others as JSON text."""
    clean: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, str | bool | int | float):
            clean[key] = value
        elif isinstance(value, list | tuple):
            items = [item for item in value if item is not None]
            if all(isinstance(item, str) for item in items):
                clean[key] = tuple(items)
            else:
                clean[key] = tuple(json.dumps(item, default=str) for item in items)
        else:
            clean[key] = json_preview(value)
    return clean


def _server(url: str) -> tuple[str | None, int | None]:
    """`server.address` and `server.port` of a URL (the port defaulted from the scheme)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None, None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.hostname, port


def _body_text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


def _layer_name(decision: Decision) -> str | None:
    return str(decision.layer) if decision.layer else None


def _skip_classification(skip_reason: str) -> tuple[str, str, str | None]:
    """(reason, blocking_reason, failed_dependency) metric labels for a skip reason."""
    explicit_one = "skipped due to failed dependency: "
    explicit_many = "skipped due to failed dependencies: "
    templated = "skipped due to failed template dependency: "
    if skip_reason.startswith(explicit_one):
        return "failed_dependency", "explicit_dep", skip_reason[len(explicit_one) :].strip()
    if skip_reason.startswith(explicit_many):
        first = skip_reason[len(explicit_many) :].split(",")[0].strip()
        return "failed_dependency", "explicit_dep", first
    if skip_reason.startswith(templated):
        first = skip_reason[len(templated) :].split(" ")[0].strip()
        return "failed_dependency", "template_induced", first
    if skip_reason.startswith("run cancelled"):
        return "cancelled", "", None
    if skip_reason.startswith("task stopped"):
        return "task_stopped", "", None
    if skip_reason.startswith("no executable steps"):
        return "no_executable_steps", "", None
    return "other", "", None


def _llm_error_type(event: LLMCall) -> str | None:
    """A low-cardinality `error.type` for a failed LLM call; None when it did not fail."""
    if event.error is None:
        return None
    if event.response_status is not None and event.response_status >= 400:
        return str(event.response_status)
    message = event.error.lower()
    if "timed out" in message:
        return "timeout"
    if "connection" in message:
        return "connection_error"
    if event.response_status is not None:
        return "invalid_response"
    return "_OTHER"


def _completion_fields(body: bytes) -> dict[str, Any]:
    """`gen_ai.response.*` attributes read from an OpenAI chat-completions response body."""
    try:
        document = json.loads(body) if body else None
    except ValueError:
        return {}
    if not isinstance(document, dict):
        return {}
    reasons = [
        choice.get("finish_reason")
        for choice in document.get("choices") or []
        if isinstance(choice, dict) and isinstance(choice.get("finish_reason"), str)
    ]
    model, response_id = document.get("model"), document.get("id")
    return {
        "gen_ai.response.model": model if isinstance(model, str) else None,
        "gen_ai.response.id": response_id if isinstance(response_id, str) else None,
        "gen_ai.response.finish_reasons": tuple(reasons) if reasons else None,
    }


CONTENT_CHARS = 8192  # cap of one captured text (a message, tool arguments, a tool result)
WORKFLOW_OPERATION = "invoke_workflow"


def capped(text: str | None, where: str) -> str | None:
    """`text` redacted and cut to CONTENT_CHARS, with a marker naming the store row it came from.

    A cut text ends in `…[truncated: N of M chars; the whole text is in the debug store,
    <where>]`, so nobody mistakes a span attribute for the full prompt or body.
    """
    if text is None:
        return None
    redacted = redact_sensitive_text(text)
    if len(redacted) <= CONTENT_CHARS:
        return redacted
    return (
        f"{redacted[:CONTENT_CHARS]}…[truncated: {CONTENT_CHARS} of {len(redacted)} chars; "
        f"the whole text is in the debug store, {where}]"
    )


def capped_json(value: Any, where: str) -> str:
    """A JSON value with credentials removed, as compact sorted JSON, capped like `capped`."""
    text = json.dumps(redact_json_value(value), sort_keys=True, default=str, ensure_ascii=False)
    return capped(text, where) or ""


def _mime(headers: Mapping[str, str] | None) -> str:
    for key, value in (headers or {}).items():
        if key.lower() == "content-type" and "json" in str(value).lower():
            return "application/json"
    return "text/plain"


def _workflow_name(plan_path: str | None) -> str:
    """`gen_ai.workflow.name`: the plan file's stem, or `plan` for a plan given in memory."""
    if plan_path:
        stem = plan_path.replace("\\", "/").rsplit("/", 1)[-1]
        return stem.removesuffix(".json") or "plan"
    return "plan"


def _capability_descriptions(plan: Any) -> dict[str, str]:
    """`"<tool>.<capability>"` → its non-empty description, from the recorded plan."""
    capabilities = plan.get("capabilities") if isinstance(plan, Mapping) else None
    if not isinstance(capabilities, Mapping):
        return {}
    return {
        str(name): spec["description"]
        for name, spec in capabilities.items()
        if isinstance(spec, Mapping) and isinstance(spec.get("description"), str)
        and spec["description"]
    }


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return None


class ExecutionTraceIds:
    """An id generator whose next trace and span ids can be set, so ids are derivable.

    The recorder sets `trace_id_for_execution(execution_id)` before it starts a root span and
    `span_id_for(...)` before every span; ids nobody set are random, as in `RandomIdGenerator`.
    """

    def __init__(self) -> None:
        self._next_trace_id: int | None = None
        self._next_span_id: int | None = None
        self._lock = threading.Lock()

    def use_next(self, trace_id_hex: str) -> None:
        """The next `generate_trace_id` call returns this id."""
        with self._lock:
            self._next_trace_id = int(trace_id_hex, 16)

    def use_next_span(self, span_id_hex: str) -> None:
        """The next `generate_span_id` call returns this id."""
        with self._lock:
            self._next_span_id = int(span_id_hex, 16)

    def generate_span_id(self) -> int:
        """The id set by `use_next_span`, once; else a random non-zero 64-bit span id."""
        with self._lock:
            chosen, self._next_span_id = self._next_span_id, None
        if chosen is not None:
            return chosen
        span_id = random.getrandbits(64)
        while span_id == 0:
            span_id = random.getrandbits(64)
        return span_id

    def is_trace_id_random(self) -> bool:
        """False: trace ids derived from execution ids are not random (W3C random flag unset)."""
        return False

    def generate_trace_id(self) -> int:
        """The id set by `use_next`, once; else a random non-zero 128-bit trace id."""
        with self._lock:
            chosen, self._next_trace_id = self._next_trace_id, None
        if chosen is not None:
            return chosen
        trace_id = random.getrandbits(128)
        while trace_id == 0:
            trace_id = random.getrandbits(128)
        return trace_id


# ---------------------------------------------------------------------------------------------
# The recorder


@dataclass(slots=True)
class _AttemptTrack:
    """One attempt's span and what the recorder learned about it."""

    span: Span
    n: int
    attempt_number: int | None = None
    status: int | None = None
    response_body: bytes = b""
    transport_error_message: str | None = None
    correction_started_at: float | None = None
    ended: bool = False


@dataclass(slots=True)
class _StepTrack:
    """One step's span and its attempts."""

    span: Span
    step_id: str
    started_at: float
    tool: str
    capability: str
    depends_on: tuple[str, ...] = ()
    execution_id: str = ""
    description: str | None = None
    dispatches: int = 0
    corrections_applied: int = 0
    attempts: dict[int, _AttemptTrack] = field(default_factory=dict)
    ended: bool = False


@dataclass(slots=True)
class _ExecutionTrack:
    """One execution's root span and its steps."""

    span: Span
    execution_id: str
    started_at: float
    step_count: int
    last_at: float
    steps: dict[str, _StepTrack] = field(default_factory=dict)
    step_statuses: dict[str, str] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)


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
        self._counters = {
            name: meter.create_counter(name, unit="1", description=text)
            for name, text in COUNTERS.items()
        }
        self._histograms = {
            name: meter.create_histogram(name, unit=unit, description=text)
            for name, (unit, text) in HISTOGRAMS.items()
        }
        self._executions: dict[str, _ExecutionTrack] = {}
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
        everything finished in time.
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
        for thread in stoppers:
            thread.join(max(0.0, deadline - time.monotonic()))
        finished = not any(thread.is_alive() for thread in stoppers)
        if not finished:
            _logger.warning(
                "telemetry export did not finish within %g s; it was abandoned", timeout_s
            )
            for exporter in self._exporters:
                exporter.shutdown()  # ends the exporter's retry wait at once
            for thread in stoppers:
                thread.join(ABANDON_JOIN_S)
        return finished

    # ---------------------------------------------------------------------------- helpers

    def _count(self, name: str, attributes: Mapping[str, Any], amount: int = 1) -> None:
        self._counters[name].add(amount, _attributes(attributes))

    def _observe(self, name: str, value: float, attributes: Mapping[str, Any]) -> None:
        self._histograms[name].record(value, _attributes(attributes))

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
            attributes=_attributes({**attributes, "session.id": key[0]}),
            start_time=_ns(at),
        )

    def _content(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """`attributes` when content capture is on, else nothing."""
        return dict(attributes) if self.capture_content else {}

    @staticmethod
    def _event(span: Span, name: str, at: float, attributes: Mapping[str, Any]) -> None:
        span.add_event(name, _attributes(attributes), timestamp=_ns(at))

    def _fail(self, span: Span, description: str | None) -> None:
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description))

    @staticmethod
    def _end(span: Span, start_at: float, end_at: float) -> None:
        span.end(end_time=_ns(max(start_at, end_at)))

    def _execution(self, execution_id: str | None, at: float) -> _ExecutionTrack | None:
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
    ) -> _ExecutionTrack:
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
        track = _ExecutionTrack(span, execution_id, at, step_count, at)
        self._executions[execution_id] = track
        return track

    def _step(self, execution_id: str, step_id: str | None, at: float) -> _StepTrack | None:
        track = self._execution(execution_id, at)
        if track is None or step_id is None:
            return None
        return track.steps.get(step_id)

    def _attempt(
        self, execution_id: str, step_id: str | None, n: int | None, at: float
    ) -> _AttemptTrack | None:
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
                "gen_ai.workflow.name": _workflow_name(event.plan_path),
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
        track.descriptions = _capability_descriptions(event.plan)
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
            _attributes(
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

    def _end_execution(self, track: _ExecutionTrack, at: float, *, interrupted: bool) -> None:
        for step in track.steps.values():
            self._end_step(step, at, interrupted=interrupted)
        if interrupted:
            track.span.set_attribute("truva.interrupted", True)
            self._fail(track.span, "the run ended without an execution_finished event")
        self._end(track.span, track.started_at, at)
        del self._executions[track.execution_id]
        self._finished_executions.add(track.execution_id)

    def _end_step(self, step: _StepTrack, at: float, *, interrupted: bool) -> None:
        for attempt in step.attempts.values():
            if not attempt.ended:
                attempt.span.set_attribute("truva.interrupted", True)
                attempt.ended = True
                attempt.span.end(end_time=_ns(at))
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
        track.steps[event.step_id] = _StepTrack(
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
            step = _StepTrack(
                span, event.step_id, event.finished_at, "", "", execution_id=event.execution_id
            )
            track.steps[event.step_id] = step
        duration_ms = round((event.finished_at - step.started_at) * 1000.0, 3)
        step.span.set_attributes(
            _attributes(
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

    def _record_skip(self, track: _ExecutionTrack, event: StepFinished) -> None:
        reason_text = event.skip_reason or event.error or ""
        reason, blocking_reason, failed_dependency = _skip_classification(reason_text)
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
        self, step: _StepTrack, n: int, at: float, attributes: Mapping[str, Any]
    ) -> _AttemptTrack:
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
        attempt = _AttemptTrack(span, n)
        step.attempts[n] = attempt
        return attempt

    def _on_attempt_dispatched(self, event: AttemptDispatched) -> None:
        step = self._step(event.execution_id, event.step_id, event.at)
        if step is None:
            return
        address, port = _server(event.url)
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
                "url.full": redact_sensitive_text(event.url),
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
        result = capped(_body_text(event.response_body), where) if self.capture_content else None
        attempt.span.set_attributes(
            _attributes(
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
                            "output.mime_type": _mime(event.response_headers),
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
            _attributes(
                {
                    "truva.decision.action": action,
                    "truva.decision.rule_id": decision.rule_id,
                    "truva.decision.reason": preview(decision.reason),
                    "truva.decision.layer": _layer_name(decision),
                    "truva.delay": round(delay_ms / 1000.0, 6)
                    if action == "retry_same" and isinstance(delay_ms, int | float)
                    else None,
                    "truva.delay_source": decision.delay_source
                    if action == "retry_same"
                    else None,
                }
            )
        )
        self._decision_events(step, attempt, event)
        if action != "success":
            self._fail(attempt.span, preview(decision.reason))
        if action == "retry_corrected":
            step.corrections_applied += 1
        self._count("truva.decisions", {"action": action, "rule_id": decision.rule_id})
        if not attempt.ended:
            attempt.ended = True
            self._end(attempt.span, event.at, event.at)

    def _decision_events(
        self, step: _StepTrack, attempt: _AttemptTrack, event: AttemptDecided
    ) -> None:
        """The TruvaG3 span events and counters a final decision implies."""
        decision = event.decision
        inputs = decision.inputs
        action = str(decision.action)
        layer = _layer_name(decision)
        applied = action == "retry_corrected"
        at = event.at
        capability = step.capability
        status = attempt.status if attempt.status is not None else inputs.get("status")
        labels = {**MODULE_ORCHESTRATION, "capability": capability}
        error_response = preview(_body_text(attempt.response_body))
        error_message = (
            preview(attempt.transport_error_message)
            if status == 0
            else f"component returned status {status}"
        )
        corrected = decision.corrected_parameters

        analyzer = inputs.get("analyzer")
        # A "cannot fix" answer was reported with the LLM call; here only yes-answers remain.
        if (
            isinstance(analyzer, Mapping)
            and analyzer.get("answered")
            and analyzer.get("should_retry")
        ):
            if applied and layer == "analyzer":
                changes = analyzer.get("changes") or {}
                self._event(
                    attempt.span,
                    "llm_error_analysis_retry",
                    at,
                    {
                        "step_id": step.step_id,
                        "capability": capability,
                        "http_status": status,
                        "reason": preview(analyzer.get("explanation")),
                        "error_message": error_message,
                        "error_response": error_response,
                        "suggested_changes": json_preview(changes),
                        "suggested_changes_count": len(changes)
                        if isinstance(changes, Mapping)
                        else 0,
                    },
                )
                self._count("orchestration.error_analysis.retry", {**labels, "http_status": status})
            else:
                self._analysis_no_retry(step, attempt.span, at, status, decision.reason)

        if applied and layer == "re_resolution":
            resolver = inputs.get("resolver") or {}
            independent = not inputs.get("has_dependencies", bool(step.depends_on))
            self._event(
                attempt.span,
                "semantic_retry_applied",
                at,
                {
                    "step_id": step.step_id,
                    "capability": capability,
                    "analysis": preview(resolver.get("explanation")),
                    "corrected_params": json_preview(corrected or {}),
                    "independent_step": independent,
                },
            )
            self._count("orchestration.semantic_retry.applied", labels)
            if independent:
                self._count("orchestration.semantic_retry.independent_step", labels)

        if isinstance(inputs.get("legacy"), Mapping):
            self._event(
                attempt.span,
                "validation_feedback_started",
                attempt.correction_started_at or at,
                {
                    "step_id": step.step_id,
                    "capability": capability,
                    "error_type": "type_mismatch",
                    "error_message": error_message,
                    "error_response": error_response,
                },
            )
            self._count("orchestration.validation_feedback.attempts", labels)
            if applied and layer == "legacy":
                self._event(
                    attempt.span,
                    "validation_feedback_success",
                    at,
                    {
                        "step_id": step.step_id,
                        "retries_used": int(inputs.get("validation_retries") or 0) + 1,
                        "corrected_params": json_preview(corrected or {}),
                    },
                )
                self._count("orchestration.validation_feedback.success", labels)
            else:
                self._event(
                    attempt.span,
                    "validation_feedback_failed",
                    at,
                    {"step_id": step.step_id, "reason": "llm_correction_failed"},
                )
                self._count(
                    "orchestration.validation_feedback.failed",
                    {**labels, "reason": "llm_correction_failed"},
                )

        if action == "stop_refused":
            self._event(
                attempt.span,
                "non_retryable_error_detected",
                at,
                {
                    "step_id": step.step_id,
                    "capability": capability,
                    "attempt": attempt.attempt_number or inputs.get("attempt_number"),
                },
            )
            self._count("orchestration.non_retryable_errors", labels)

    def _analysis_no_retry(
        self, step: _StepTrack, span: Span, at: float, status: int | None, reason: Any
    ) -> None:
        """TruvaG3's `llm_error_analysis_no_retry`: the analyzer's answer led to no correction."""
        self._event(
            span,
            "llm_error_analysis_no_retry",
            at,
            {"step_id": step.step_id, "reason": preview(str(reason or ""))},
        )
        self._count(
            "orchestration.error_analysis.no_retry",
            {**MODULE_ORCHESTRATION, "capability": step.capability, "http_status": status},
        )

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
        address, port = _server(event.base_url)
        error_type = _llm_error_type(event)
        parsed = event.parsed if isinstance(event.parsed, Mapping) else {}
        should_retry = parsed.get("should_retry")
        completion = _completion_fields(event.response_body)
        span = self._start(
            f"{LLM_OPERATION} {event.model}",
            parent,
            event.at,
            {
                "gen_ai.operation.name": LLM_OPERATION,
                "gen_ai.provider.name": GEN_AI_PROVIDER,
                "gen_ai.request.model": event.model,
                "gen_ai.request.temperature": float(event.temperature),
                "gen_ai.request.max_tokens": event.max_tokens,
                "gen_ai.usage.input_tokens": event.prompt_tokens,
                "gen_ai.usage.output_tokens": event.completion_tokens,
                **completion,
                "openinference.span.kind": "LLM",
                "llm.provider": GEN_AI_PROVIDER,
                "llm.system": GEN_AI_PROVIDER,
                "llm.model_name": event.model,
                "llm.invocation_parameters": json.dumps(
                    {"temperature": float(event.temperature), "max_tokens": event.max_tokens}
                ),
                "llm.token_count.prompt": event.prompt_tokens,
                "llm.token_count.completion": event.completion_tokens,
                "llm.token_count.total": event.total_tokens,
                **(self._message_content(event, completion) if self.capture_content else {}),
                "server.address": address,
                "server.port": port,
                "http.response.status_code": event.response_status,
                "error.type": error_type,
                "truva.llm.site": event.site,
                "truva.llm.call_id": event.call_id,
                "truva.llm.duration": round(event.latency_ms / 1000.0, 6),
                "truva.llm.total_tokens": event.total_tokens,
                "truva.llm.prompt_preview": preview(_last_user_text(event.messages)),
                "truva.llm.response_preview": preview(event.raw_text),
                "truva.llm.parse_error": preview(event.parse_error),
                "truva.llm.error": preview(event.error),
                "truva.llm.should_retry": should_retry if isinstance(should_retry, bool) else None,
                "truva.step.id": event.step_id,
                "truva.attempt.n": event.n,
            },
            kind=self._trace.SpanKind.CLIENT,
            key=(event.execution_id, "llm", event.call_id),
        )
        if error_type is not None:
            self._fail(span, preview(event.error))
        self._end(span, event.at, end_at)
        if attempt is not None and event.site == SITE_CORRECTION:
            attempt.correction_started_at = attempt.correction_started_at or event.at
        self._llm_metrics(event, step, error_type, address)
        events_span = self._innermost_open_span(event.execution_id, event.step_id, event.n, end_at)
        if step is not None and events_span is not None:
            self._layer_events(event, step, attempt, events_span, end_at)

    @staticmethod
    def _message_content(event: LLMCall, completion: Mapping[str, Any]) -> dict[str, Any]:
        """GenAI and OpenInference message attributes: redacted, each text capped."""
        where = f"llm_calls {event.call_id}"
        system_parts: list[dict[str, Any]] = []
        inputs: list[dict[str, Any]] = []
        plain: list[dict[str, Any]] = []
        attributes: dict[str, Any] = {}
        for index, message in enumerate(event.messages):
            role = str(message.get("role") or "user")
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content, default=str)
            text = capped(text, where)
            if role == "system":
                system_parts.append({"type": "text", "content": text})
            else:
                inputs.append({"role": role, "parts": [{"type": "text", "content": text}]})
            plain.append({"role": role, "content": text})
            attributes[f"llm.input_messages.{index}.message.role"] = role
            attributes[f"llm.input_messages.{index}.message.content"] = text
        if system_parts:
            attributes["gen_ai.system_instructions"] = json.dumps(system_parts, ensure_ascii=False)
        attributes["gen_ai.input.messages"] = json.dumps(inputs, ensure_ascii=False)
        attributes["input.value"] = json.dumps(plain, ensure_ascii=False)
        attributes["input.mime_type"] = "application/json"
        if event.raw_text is not None:
            answer = capped(event.raw_text, where)
            reasons = completion.get("gen_ai.response.finish_reasons") or ("stop",)
            attributes["gen_ai.output.messages"] = json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": answer}],
                        "finish_reason": reasons[0],
                    }
                ],
                ensure_ascii=False,
            )
            attributes["llm.output_messages.0.message.role"] = "assistant"
            attributes["llm.output_messages.0.message.content"] = answer
            attributes["output.value"] = answer
            attributes["output.mime_type"] = "text/plain"
        return attributes

    def _llm_metrics(
        self, event: LLMCall, step: _StepTrack | None, error_type: str | None, address: str | None
    ) -> None:
        capability = step.capability if step is not None else ""
        labels = {**MODULE_ORCHESTRATION, "capability": capability}
        if event.site in _LLM_HISTOGRAMS:
            self._observe(_LLM_HISTOGRAMS[event.site], event.latency_ms, labels)
            if error_type is not None:
                self._count(_LLM_ERROR_COUNTERS[event.site], labels)
        gen_ai = {
            "gen_ai.operation.name": LLM_OPERATION,
            "gen_ai.provider.name": GEN_AI_PROVIDER,
            "gen_ai.request.model": event.model,
            "server.address": address,
        }
        self._observe(
            "gen_ai.client.operation.duration",
            event.latency_ms / 1000.0,
            {**gen_ai, "error.type": error_type},
        )
        for token_type, tokens in (
            ("input", event.prompt_tokens),
            ("output", event.completion_tokens),
        ):
            if tokens is not None:
                self._observe(
                    "gen_ai.client.token.usage", tokens, {**gen_ai, "gen_ai.token.type": token_type}
                )

    def _layer_events(
        self,
        event: LLMCall,
        step: _StepTrack,
        attempt: _AttemptTrack | None,
        span: Span,
        end_at: float,
    ) -> None:
        """TruvaG3's analyzer and re-resolver span events around one LLM call."""
        status = attempt.status if attempt is not None else None
        duration_ms = round(event.latency_ms, 3)
        parsed = event.parsed if isinstance(event.parsed, Mapping) else {}
        if event.site == SITE_ERROR_ANALYSIS:
            self._event(
                span,
                "error_analyzer.llm_call_start",
                event.at,
                {"capability": step.capability, "http_status": status},
            )
            if event.error is not None:
                self._event(
                    span,
                    "error_analyzer.llm_call_failed",
                    end_at,
                    {"error": preview(event.error), "capability": step.capability},
                )
                return
            self._event(
                span,
                "error_analyzer.llm_call_completed",
                end_at,
                {"duration_ms": duration_ms, "capability": step.capability},
            )
            if event.parse_error is not None:
                self._event(
                    span,
                    "error_analyzer.parse_failed",
                    end_at,
                    {"error": preview(event.parse_error)},
                )
                return
            changes = parsed.get("suggested_changes")
            self._event(
                span,
                "error_analyzer.analysis_complete",
                end_at,
                {
                    "should_retry": bool(parsed.get("should_retry")),
                    "reason": preview(str(parsed.get("reason") or "")),
                    "suggested_changes_count": len(changes) if isinstance(changes, Mapping) else 0,
                    "total_duration_ms": duration_ms,
                },
            )
            if parsed.get("should_retry") is False:
                self._analysis_no_retry(step, span, end_at, status, parsed.get("reason"))
        elif event.site == SITE_SEMANTIC_RETRY:
            self._event(
                span,
                "contextual_re_resolution.start",
                event.at,
                {
                    "step_id": step.step_id,
                    "capability": step.capability,
                    "retry_count": step.corrections_applied,
                    "http_status": status,
                    "source_data_keys": list(step.depends_on),
                    "model": event.model,
                },
            )
            if event.error is not None:
                self._event(
                    span,
                    "contextual_re_resolution.error",
                    end_at,
                    {"error": preview(event.error), "duration_ms": duration_ms},
                )
            elif event.parse_error is not None:
                self._event(
                    span,
                    "contextual_re_resolution.parse_error",
                    end_at,
                    {
                        "error": preview(event.parse_error),
                        "response": preview(event.raw_text or "", SHORT_PREVIEW_CHARS),
                    },
                )
            else:
                corrected = parsed.get("corrected_parameters")
                self._event(
                    span,
                    "contextual_re_resolution.complete",
                    end_at,
                    {
                        "should_retry": bool(parsed.get("should_retry")),
                        "analysis": preview(str(parsed.get("analysis") or ""), SHORT_PREVIEW_CHARS),
                        "corrected_params_count": len(corrected)
                        if isinstance(corrected, Mapping)
                        else 0,
                        "duration_ms": duration_ms,
                    },
                )


# ---------------------------------------------------------------------------------------------
# Construction from the environment, and spans for a recorded execution


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


PROTOCOLS = ("grpc", "http/protobuf", "http/json")
DEFAULT_PROTOCOL = "http/protobuf"
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
PROPAGATE_VARIABLE = "TRUVA_PROPAGATE_TRACE_CONTEXT"
# Answers that mean "this endpoint has no such signal", not "try again later".
_NO_SIGNAL_HTTP_STATUSES = ("404", "405", "501")


class TelemetryConfigError(ValueError):
    """An OTEL_* variable has a value this program cannot honour (one line, names the variable)."""


def _setting(env: Mapping[str, str], signal: str, name: str) -> tuple[str, str] | None:
    """(variable, value) of `OTEL_EXPORTER_OTLP_<SIGNAL>_<NAME>`, else of the general variable."""
    for variable in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
        value = env.get(variable, "").strip()
        if value:
            return variable, value
    return None


def signal_protocol(env: Mapping[str, str], signal: str) -> str:
    """`grpc`, `http/protobuf` or `http/json` for `signal` (traces|metrics), per-signal first.

    Raises TelemetryConfigError for any other value, naming the variable and the value.
    """
    found = _setting(env, signal, "PROTOCOL")
    if found is None:
        return DEFAULT_PROTOCOL
    variable, value = found
    if value.lower() not in PROTOCOLS:
        raise TelemetryConfigError(
            f"{variable}={value!r}: expected one of {', '.join(PROTOCOLS)}; nothing was exported"
        )
    return value.lower()


def _signal_endpoint(
    env: Mapping[str, str], signal: str, protocol: str = DEFAULT_PROTOCOL
) -> str | None:
    """The OTLP URL for `signal`: per-signal verbatim, else the base (+ `/v1/<signal>` for HTTP)."""
    specific = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    if specific:
        return specific
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if not base:
        return None
    return base if protocol == "grpc" else f"{base.removesuffix('/')}/v1/{signal}"


def _exporter_options(env: Mapping[str, str], signal: str, protocol: str) -> dict[str, Any]:
    """Headers, timeout, compression and TLS files for one signal, per-signal variables first."""
    from opentelemetry.util.re import parse_env_headers

    def setting(name: str) -> str | None:
        found = _setting(env, signal, name)
        return found[1] if found is not None else None

    options: dict[str, Any] = {}
    if (headers := setting("HEADERS")) is not None:
        options["headers"] = parse_env_headers(headers, liberal=True)
    if (timeout := setting("TIMEOUT")) is not None:
        try:
            options["timeout"] = float(timeout)
        except ValueError:
            _logger.warning("OTEL_EXPORTER_OTLP_TIMEOUT: expected seconds, got %r", timeout)
    if (compression := setting("COMPRESSION")) is not None:
        if protocol == "grpc":
            from grpc import Compression

            choices = {
                "gzip": Compression.Gzip,
                "deflate": Compression.Deflate,
                "none": Compression.NoCompression,
            }
        else:
            from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression

            choices = {
                "gzip": HttpCompression.Gzip,
                "deflate": HttpCompression.Deflate,
                "none": HttpCompression.NoCompression,
            }
        if compression.lower() in choices:
            options["compression"] = choices[compression.lower()]
        else:
            _logger.warning(
                "OTEL_EXPORTER_OTLP_COMPRESSION: expected gzip, deflate or none, got %r",
                compression,
            )
    if protocol != "grpc":
        # The gRPC exporter reads the certificate variables from the process environment.
        for name, option in (
            ("CERTIFICATE", "certificate_file"),
            ("CLIENT_KEY", "client_key_file"),
            ("CLIENT_CERTIFICATE", "client_certificate_file"),
        ):
            if (value := setting(name)) is not None:
                options[option] = value
    return options


def _json_body(message: Any) -> bytes:
    """An OTLP protobuf message in the OTLP/JSON encoding (hex ids, lowerCamelCase)."""
    from google.protobuf.json_format import MessageToDict

    document = _hex_ids(MessageToDict(message, use_integers_for_enums=True))
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def _span_exporter(protocol: str, endpoint: str, options: Mapping[str, Any]) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter(endpoint=endpoint, **options)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if protocol == "http/json":
        return _json_exporter_classes()[0](endpoint=endpoint, **options)
    return OTLPSpanExporter(endpoint=endpoint, **options)


def _metric_exporter(protocol: str, endpoint: str, options: Mapping[str, Any]) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )

        return GrpcMetricExporter(endpoint=endpoint, **options)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    if protocol == "http/json":
        return _json_exporter_classes()[1](endpoint=endpoint, **options)
    return OTLPMetricExporter(endpoint=endpoint, **options)


@functools.cache
def _json_exporter_classes() -> tuple[type, type]:
    """The OTLP/HTTP JSON span and metric exporters (defined on first use: lazy imports)."""
    from opentelemetry.exporter.otlp.proto.common._internal.metrics_encoder import encode_metrics
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics.export import MetricExportResult
    from opentelemetry.sdk.trace.export import SpanExportResult

    class JsonSpanExporter(OTLPSpanExporter):
        """OTLP/HTTP with the JSON encoding (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`)."""

        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            self._client._headers["Content-Type"] = "application/json"  # pinned 1.45.2

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            if self._shutdown:
                return SpanExportResult.FAILURE
            result = self._client.export(_json_body(encode_spans(spans)))
            return SpanExportResult.SUCCESS if result.success else SpanExportResult.FAILURE

    class JsonMetricExporter(OTLPMetricExporter):
        """OTLP/HTTP metrics with the JSON encoding."""

        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            self._client._headers["Content-Type"] = "application/json"  # pinned 1.45.2

        def export(
            self, metrics_data: Any, timeout_millis: float | None = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            if self._shutdown:
                return MetricExportResult.FAILURE
            result = self._client.export(_json_body(encode_metrics(metrics_data)))
            return MetricExportResult.SUCCESS if result.success else MetricExportResult.FAILURE

    return JsonSpanExporter, JsonMetricExporter


class _NoMetricsEndpointGate:
    """Turns "this endpoint has no metrics service" into one warning and stops metric exports.

    A tracing-only backend (Phoenix answers HTTP 405 on /v1/metrics; a gRPC server without the
    metrics service answers UNIMPLEMENTED) would otherwise get an error line per export. While
    the gated exporter exports, `_GATE_FILTER` on the metric exporters' loggers hands this
    gate the lines logged on that thread; the gate recognises that first failure line, drops
    it, prints one warning naming `OTEL_METRICS_EXPORTER=none`, and every later export of its
    exporter is skipped.
    """

    def __init__(self, endpoint: str, warn: Any) -> None:
        self.endpoint = endpoint
        self.closed_by: str | None = None
        self._warn = warn

    def keep(self, record: logging.LogRecord) -> bool:
        """False for the exporter's "no metrics here" line (and its repeats), which it reports."""
        message = record.getMessage()
        if self.closed_by is not None and "metrics" in message:
            return False
        answer = None
        if message.startswith("Failed to export metrics batch code: "):
            code = message.removeprefix("Failed to export metrics batch code: ")[:3]
            answer = f"HTTP {code}" if code in _NO_SIGNAL_HTTP_STATUSES else None
        elif message.startswith("Failed to export metrics") and "UNIMPLEMENTED" in message:
            answer = "gRPC UNIMPLEMENTED"
        if answer is None:
            return True
        self.closed_by = answer
        self._warn(
            f"the OTLP endpoint {self.endpoint} does not accept metrics ({answer}); metrics are "
            "not exported for the rest of this command — set OTEL_METRICS_EXPORTER=none "
            "(or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT to a collector that takes metrics)"
        )
        return False


class _GateFilter(logging.Filter):
    """Routes the metric exporters' log lines to the gate whose export is running on this thread."""

    LOGGERS = (
        "opentelemetry.exporter.otlp.proto.http.metric_exporter",
        "opentelemetry.exporter.otlp.proto.grpc.exporter",
    )

    def __init__(self) -> None:
        super().__init__()
        self.exporting = threading.local()
        self._attached = False
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        gate = getattr(self.exporting, "gate", None)
        return True if gate is None else gate.keep(record)

    def attach(self) -> None:
        with self._lock:
            if not self._attached:
                for name in self.LOGGERS:
                    logging.getLogger(name).addFilter(self)
                self._attached = True


_GATE_FILTER = _GateFilter()


def _gated_metric_exporter(exporter: Any, gate: _NoMetricsEndpointGate) -> Any:
    """`exporter`, whose `export` reports through `gate` and does nothing once it has closed."""
    from opentelemetry.sdk.metrics.export import MetricExportResult

    export = exporter.export
    _GATE_FILTER.attach()

    def gated(metrics_data: Any, timeout_millis: float | None = 10_000, **kwargs: Any) -> Any:
        if gate.closed_by is not None:
            return MetricExportResult.SUCCESS
        _GATE_FILTER.exporting.gate = gate
        try:
            return export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        finally:
            _GATE_FILTER.exporting.gate = None

    exporter.export = gated
    return exporter


def _warn_stderr(message: str) -> None:
    print(f"truva-console: {message}", file=sys.stderr, flush=True)


def _resource(env: Mapping[str, str], service_name: str) -> Any:
    from opentelemetry.sdk.resources import Resource

    attributes: dict[str, Any] = {}
    for pair in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, separator, value = pair.partition("=")
        if separator and key.strip():
            attributes[key.strip()] = value.strip()
    attributes["service.name"] = env.get("OTEL_SERVICE_NAME", "").strip() or service_name
    attributes["service.version"] = __version__
    return Resource.create(attributes)


def _exporter_kind(env: Mapping[str, str], variable: str) -> str:
    value = env.get(variable, "").strip().lower()
    if value in ("", "otlp", "none"):
        return value or "otlp"
    raise TelemetryConfigError(
        f"{variable}={env.get(variable)!r}: expected otlp or none; nothing was exported"
    )


def capture_content_from_env(env: Mapping[str, str] = os.environ) -> bool:
    """`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (off by default)."""
    return _truthy(env.get(CAPTURE_CONTENT_VARIABLE))


def propagate_from_env(env: Mapping[str, str] = os.environ) -> bool:
    """`TRUVA_PROPAGATE_TRACE_CONTEXT`: on unless set to false/0/no/off."""
    value = env.get(PROPAGATE_VARIABLE, "").strip().lower()
    return value not in ("false", "0", "no", "off")


def telemetry_from_env(
    env: Mapping[str, str] = os.environ,
    service_name: str = DEFAULT_SERVICE_NAME,
    *,
    warn: Any = _warn_stderr,
) -> TelemetryRecorder | None:
    """A recorder exporting over OTLP when the environment names an endpoint.

    None, with nothing imported from OpenTelemetry, unless `OTEL_EXPORTER_OTLP_ENDPOINT`,
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` is set, or
    when `OTEL_SDK_DISABLED=true`. The protocol is `OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]PROTOCOL`
    (`grpc`, `http/protobuf` (default), `http/json`). Honours the standard `OTEL_EXPORTER_OTLP_*`
    headers, timeout, compression and certificate variables (per-signal first),
    `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_METRIC_EXPORT_INTERVAL`,
    `OTEL_TRACES_EXPORTER` / `OTEL_METRICS_EXPORTER=none`, content capture
    (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`) and `TRUVA_PROPAGATE_TRACE_CONTEXT`.
    Raises TelemetryConfigError for a value it cannot honour. Call `shutdown()` on the result.
    """
    if _truthy(env.get("OTEL_SDK_DISABLED")):
        return None
    traces_on = _exporter_kind(env, "OTEL_TRACES_EXPORTER") != "none"
    metrics_on = _exporter_kind(env, "OTEL_METRICS_EXPORTER") != "none"
    traces_protocol = signal_protocol(env, "traces")
    metrics_protocol = signal_protocol(env, "metrics")
    traces_url = _signal_endpoint(env, "traces", traces_protocol) if traces_on else None
    metrics_url = _signal_endpoint(env, "metrics", metrics_protocol) if metrics_on else None
    if traces_url is None and metrics_url is None:
        return None

    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

    resource = _resource(env, service_name)
    tracer_provider = SdkTracerProvider(
        resource=resource, id_generator=ExecutionTraceIds(), shutdown_on_exit=False
    )
    exporters: list[Any] = []
    if traces_url is not None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        exporter = _span_exporter(
            traces_protocol, traces_url, _exporter_options(env, "traces", traces_protocol)
        )
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        exporters.append(exporter)
    readers = []
    gate = None
    if metrics_url is not None:
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        interval_text = env.get("OTEL_METRIC_EXPORT_INTERVAL", "").strip()
        interval_ms = (
            float(interval_text) if interval_text.isdigit() else DEFAULT_METRIC_EXPORT_INTERVAL_MS
        )
        gate = _NoMetricsEndpointGate(metrics_url, warn)
        metric_exporter = _gated_metric_exporter(
            _metric_exporter(
                metrics_protocol, metrics_url, _exporter_options(env, "metrics", metrics_protocol)
            ),
            gate,
        )
        readers.append(
            PeriodicExportingMetricReader(metric_exporter, export_interval_millis=interval_ms)
        )
        exporters.append(metric_exporter)
    meter_provider = SdkMeterProvider(
        resource=resource, metric_readers=readers, shutdown_on_exit=False
    )
    recorder = TelemetryRecorder(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        exporters=exporters,
        capture_content=capture_content_from_env(env),
        propagate_trace_context=propagate_from_env(env),
    )
    recorder.metrics_gate = gate
    return recorder

@dataclass(slots=True)
class SpanPublisher:
    """A span exporter built from the environment, for sending recorded spans (`publish`)."""

    exporter: Any
    endpoint: str
    protocol: str
    resource: Any
    capture_content: bool

    def spans(self, events: Iterable[Event]) -> list[ReadableSpan]:
        """The spans of recorded events, with the live ids and this publisher's resource."""
        return build_spans_from_events(
            events, capture_content=self.capture_content, resource=self.resource
        )

    def send(self, spans: Sequence[ReadableSpan]) -> bool:
        """Export `spans` in one request; True when the endpoint took them."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        return not spans or self.exporter.export(spans) is SpanExportResult.SUCCESS

    def publish(self, events: Iterable[Event]) -> tuple[bool, int]:
        """Rebuild the spans of recorded events and send them: (delivered, span count)."""
        spans = self.spans(events)
        return self.send(spans), len(spans)

    def shutdown(self) -> None:
        self.exporter.shutdown()


def span_publisher_from_env(
    env: Mapping[str, str] = os.environ, service_name: str = DEFAULT_SERVICE_NAME
) -> SpanPublisher | None:
    """A `SpanPublisher` for the traces endpoint the environment names, or None without one.

    The same variables as `telemetry_from_env` (protocol, headers, TLS, service name, content
    capture); raises TelemetryConfigError for a value it cannot honour.
    """
    if _truthy(env.get("OTEL_SDK_DISABLED")):
        return None
    if _exporter_kind(env, "OTEL_TRACES_EXPORTER") == "none":
        return None
    protocol = signal_protocol(env, "traces")
    endpoint = _signal_endpoint(env, "traces", protocol)
    if endpoint is None:
        return None
    exporter = _span_exporter(protocol, endpoint, _exporter_options(env, "traces", protocol))
    return SpanPublisher(
        exporter, endpoint, protocol, _resource(env, service_name), capture_content_from_env(env)
    )


@contextmanager
def with_telemetry(
    *recorders: Any, env: Mapping[str, str] = os.environ
) -> Iterator[FanoutRecorder]:
    """`recorders` (None entries dropped) plus the OTLP telemetry `env` configures, for a command.

    The one wiring every recording command uses (`run`, `rerun`, `replay`, `demo record`):
    raises TelemetryConfigError before anything runs when an OTEL_* value cannot be honoured;
    on exit shuts the telemetry down, which exports what remains (bounded, see `shutdown`).
    """
    telemetry = telemetry_from_env(env)
    chosen = [recorder for recorder in (*recorders, telemetry) if recorder is not None]
    try:
        yield FanoutRecorder(*chosen)
    finally:
        if telemetry is not None:
            telemetry.shutdown()


def build_spans_from_events(
    events: Iterable[Event],
    service_name: str = DEFAULT_SERVICE_NAME,
    *,
    capture_content: bool = False,
    resource: Any = None,
) -> list[ReadableSpan]:
    """The finished spans of recorded events, built in memory (for bundles, `publish`, the console).

    Spans left open by an unfinished run are ended at their execution's last event time and
    marked `truva.interrupted`. Trace ids are `trace_id_for_execution(execution_id)` and span
    ids `span_id_for(...)`, the ids a live export of the same run gave them.
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = SdkTracerProvider(
        resource=resource
        or Resource.create({"service.name": service_name, "service.version": __version__}),
        id_generator=ExecutionTraceIds(),
        shutdown_on_exit=False,
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    recorder = TelemetryRecorder(tracer_provider=provider, capture_content=capture_content)
    for event in events:
        recorder.record(event)
    recorder.end_open_spans()
    spans = list(exporter.get_finished_spans())
    provider.shutdown()
    return spans


_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(value: Any) -> Any:
    """Replace base64 trace/span ids (protobuf JSON) with lowercase hex (OTLP JSON), in place."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _ID_FIELDS and isinstance(item, str):
                value[key] = base64.b64decode(item).hex()
            else:
                _hex_ids(item)
    elif isinstance(value, list):
        for item in value:
            _hex_ids(item)
    return value


def spans_to_otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Finished spans as an OTLP/JSON `ExportTraceServiceRequest` document.

    As the OTLP JSON encoding specifies: lowerCamelCase field names, trace and span ids as hex,
    64-bit integers (times in nanoseconds, int attribute values) as decimal strings, enums as
    integers. `{"resourceSpans": []}` for no spans.
    """
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    if not spans:
        return {"resourceSpans": []}
    document = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return _hex_ids(document)
