"""OTLP export configured from the standard `OTEL_*` variables: exporters, recorder, publisher."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor import __version__
from executor.events import (
    Event,
    FanoutRecorder,
)
from executor.telemetry.attributes import DEFAULT_SERVICE_NAME
from executor.telemetry.ids import ExecutionTraceIds
from executor.telemetry.recorded import build_spans_from_events, hex_ids
from executor.telemetry.settings import (
    SignalSettings,
    TelemetrySettings,
    telemetry_settings_from_env,
)
from executor.telemetry.spans import TelemetryRecorder

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

_logger = logging.getLogger(__name__)

# Answers that mean "this endpoint has no such signal", not "try again later".
_NO_SIGNAL_HTTP_STATUSES = ("404", "405", "501")


def _exporter_options(settings: SignalSettings) -> dict[str, Any]:
    """Headers, timeout, compression and TLS files for one signal, as exporter arguments."""
    options: dict[str, Any] = {}
    if settings.headers is not None:
        options["headers"] = dict(settings.headers)
    if settings.timeout_s is not None:
        options["timeout"] = settings.timeout_s
    if settings.compression is not None:
        if settings.protocol == "grpc":
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
        options["compression"] = choices[settings.compression]
    if settings.protocol != "grpc":
        # The gRPC exporter reads the certificate variables from the process environment.
        options.update(settings.tls_files)
    return options


def _json_body(message: Any) -> bytes:
    """An OTLP protobuf message in the OTLP/JSON encoding (hex ids, lowerCamelCase)."""
    from google.protobuf.json_format import MessageToDict

    document = hex_ids(MessageToDict(message, use_integers_for_enums=True))
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


# An OTLP/HTTP answer is a small message (an empty ExportTraceServiceResponse, a partial-success
# count, or an error text); the exporters only log it. What an endpoint sends past this is not
# read: an endless answer would otherwise be read into memory until the process died.
OTLP_RESPONSE_BYTES_READ = 64 * 1024


def bounded_session() -> Any:
    """A `requests` session for the OTLP/HTTP exporters that reads at most
    `OTLP_RESPONSE_BYTES_READ` bytes of each answer, decoded (its connection is dropped when
    more was sent, kept for the next export otherwise)."""
    import requests

    class BoundedSession(requests.Session):
        def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> Any:
            kwargs["stream"] = True
            response = super().request(method, url, *args, **kwargs)
            try:
                body = response.raw.read(OTLP_RESPONSE_BYTES_READ + 1, decode_content=True)
            except Exception:
                response.close()
                raise
            if len(body) > OTLP_RESPONSE_BYTES_READ:
                response.close()
                body = body[:OTLP_RESPONSE_BYTES_READ]
            else:
                response.raw.release_conn()
            response._content = body
            return response

    return BoundedSession()


def _span_exporter(protocol: str, endpoint: str, options: Mapping[str, Any]) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter(endpoint=endpoint, **options)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    options = {"session": bounded_session(), **options}
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

    options = {"session": bounded_session(), **options}
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
        from executor.redact import redact_secrets, redact_sensitive_text

        shown = redact_sensitive_text(redact_secrets(self.endpoint))  # a password, never
        self._warn(
            f"the OTLP endpoint {shown} does not accept metrics ({answer}); metrics are "
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


def _resource(settings: TelemetrySettings, service_name: str) -> Any:
    from opentelemetry.sdk.resources import Resource

    attributes: dict[str, Any] = dict(settings.resource_attributes)
    attributes["service.name"] = settings.service_name or service_name
    attributes["service.version"] = __version__
    return Resource.create(attributes)


def capture_content_from_env(env: Mapping[str, str] = os.environ) -> bool:
    """`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`: `true`, `SPAN_ONLY` or
    `SPAN_AND_EVENT` (off by default); raises TelemetryConfigError for an unknown value."""
    return telemetry_settings_from_env(env).capture_content


def propagate_from_env(env: Mapping[str, str] = os.environ) -> bool:
    """`TRUVA_PROPAGATE_TRACE_CONTEXT`: on unless set to false/0/no/off."""
    return telemetry_settings_from_env(env).propagate_trace_context


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
    Raises TelemetryConfigError (`telemetry_settings_from_env`) for a value it cannot honour,
    before anything is built. Call `shutdown()` on the result.
    """
    settings = telemetry_settings_from_env(env)
    if not settings.exports:
        return None

    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

    resource = _resource(settings, service_name)
    tracer_provider = SdkTracerProvider(
        resource=resource, id_generator=ExecutionTraceIds(), shutdown_on_exit=False
    )
    exporters: list[Any] = []
    traces = settings.traces
    if traces.url is not None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        exporter = _span_exporter(traces.protocol, traces.url, _exporter_options(traces))
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        exporters.append(exporter)
    readers = []
    gate = None
    metrics = settings.metrics
    if metrics.url is not None:
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        gate = _NoMetricsEndpointGate(metrics.url, warn)
        metric_exporter = _gated_metric_exporter(
            _metric_exporter(metrics.protocol, metrics.url, _exporter_options(metrics)), gate
        )
        readers.append(
            PeriodicExportingMetricReader(
                metric_exporter, export_interval_millis=settings.metric_export_interval_ms
            )
        )
        exporters.append(metric_exporter)
    meter_provider = SdkMeterProvider(
        resource=resource, metric_readers=readers, shutdown_on_exit=False
    )
    recorder = TelemetryRecorder(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        exporters=exporters,
        capture_content=settings.capture_content,
        propagate_trace_context=settings.propagate_trace_context,
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

    @property
    def shown_endpoint(self) -> str:
        """The endpoint as it may be printed: a password in its userinfo (sent as Basic auth)
        or a credential in its query redacted."""
        from executor.redact import redact_secrets, redact_sensitive_text

        return redact_sensitive_text(redact_secrets(self.endpoint))

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
    """A `SpanPublisher` for the traces endpoint the environment names, or None without one
    (or with traces switched off: `telemetry_settings_from_env(env).traces.switched_off_by`).

    The same variables as `telemetry_from_env` (protocol, headers, TLS, service name, content
    capture); raises TelemetryConfigError for a value it cannot honour.
    """
    settings = telemetry_settings_from_env(env)
    traces = settings.traces
    if traces.url is None:
        return None
    exporter = _span_exporter(traces.protocol, traces.url, _exporter_options(traces))
    return SpanPublisher(
        exporter, traces.url, traces.protocol, _resource(settings, service_name),
        settings.capture_content,
    )  # fmt: skip


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


