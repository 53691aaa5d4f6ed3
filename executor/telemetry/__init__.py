"""OpenTelemetry spans, span events and metrics built from the executor's event stream.

`TelemetryRecorder` (`spans`) is a `Recorder`: it turns events into an execution → step →
attempt → LLM call span tree and TruvaG3-named span events (`span_events`, a table for
decisions) and metrics (`metrics`), on the providers it is given (it never sets the global
ones). Span times are the events' own timestamps, so a recorded run can be rebuilt after the
fact (`recorded.build_spans_from_events`) and embedded in a bundle as OTLP/JSON
(`spans_to_otlp_json`). `otlp.telemetry_from_env` builds one that exports over OTLP when the
standard `OTEL_EXPORTER_OTLP_*` variables (read and checked by `settings`) ask for it, and
returns None (importing nothing from OpenTelemetry) otherwise. Spans carry previews only; the
full payloads live in the debug store.
"""

from executor.telemetry.attributes import (
    CONTENT_CHARS,
    DEFAULT_SERVICE_NAME,
    INSTRUMENTATION_SCOPE,
    PREVIEW_CHARS,
    SHORT_PREVIEW_CHARS,
    capped,
    capped_json,
    json_preview,
    preview,
)
from executor.telemetry.ids import ExecutionTraceIds
from executor.telemetry.metrics import COUNTERS, HISTOGRAMS
from executor.telemetry.otlp import (
    SpanPublisher,
    capture_content_from_env,
    propagate_from_env,
    span_publisher_from_env,
    telemetry_from_env,
    with_telemetry,
)
from executor.telemetry.recorded import build_spans_from_events, spans_to_otlp_json
from executor.telemetry.settings import (
    CAPTURE_CONTENT_VARIABLE,
    PROPAGATE_VARIABLE,
    PROTOCOLS,
    SignalSettings,
    TelemetryConfigError,
    TelemetrySettings,
    signal_protocol,
    telemetry_settings_from_env,
)
from executor.telemetry.span_events import DECISION_SPAN_EVENTS
from executor.telemetry.spans import TelemetryRecorder
from executor.tracecontext import attempt_traceparent, span_id_for, trace_id_for_execution

__all__ = [
    "CAPTURE_CONTENT_VARIABLE",
    "CONTENT_CHARS",
    "COUNTERS",
    "DECISION_SPAN_EVENTS",
    "DEFAULT_SERVICE_NAME",
    "HISTOGRAMS",
    "INSTRUMENTATION_SCOPE",
    "PREVIEW_CHARS",
    "PROPAGATE_VARIABLE",
    "PROTOCOLS",
    "SHORT_PREVIEW_CHARS",
    "ExecutionTraceIds",
    "SignalSettings",
    "SpanPublisher",
    "TelemetryConfigError",
    "TelemetryRecorder",
    "TelemetrySettings",
    "attempt_traceparent",
    "build_spans_from_events",
    "capped",
    "capped_json",
    "capture_content_from_env",
    "json_preview",
    "preview",
    "propagate_from_env",
    "signal_protocol",
    "span_id_for",
    "span_publisher_from_env",
    "spans_to_otlp_json",
    "telemetry_from_env",
    "telemetry_settings_from_env",
    "trace_id_for_execution",
    "with_telemetry",
]
