"""A real OTLP/HTTP (protobuf) receiver on 127.0.0.1 for tests: it decodes what exporters send.

    with OTLPReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        ...  # export, then shut the exporter down (export is synchronous on shutdown)
        assert "orchestrator.execution" in receiver.span_names()

POST /v1/traces and /v1/metrics bodies are gunzipped (or inflated) when the request says so,
decoded with the `opentelemetry.proto` collector messages (protobuf, or OTLP/JSON when the
Content-Type is application/json), kept in arrival order, and answered 200 with the serialized
`Export*ServiceResponse`, as a collector does. Any other path gets 404; with `metrics=False`
/v1/metrics gets 405, as from Phoenix (a tracing-only backend), and `metrics_refusals` counts them.
`trace_statuses=[200, 400]` answers the n-th trace export with the n-th status (200 after the
list; a refused export is kept with its status, and `spans()` leaves it out); `hang=True` keeps
every export and never answers it, as a collector that has stopped responding.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

TRACES_PATH = "/v1/traces"
METRICS_PATH = "/v1/metrics"


@dataclass(frozen=True, slots=True)
class ReceivedExport:
    """One export request as received: its path, lower-cased headers and decoded message."""

    path: str
    headers: dict[str, str]
    message: Any
    status: int = 200


def any_value(value: AnyValue) -> Any:
    """The Python value of an OTLP `AnyValue` (arrays become tuples)."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(any_value(item) for item in value.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind is not None else None


def attributes_of(key_values: Any) -> dict[str, Any]:
    """A repeated OTLP `KeyValue` field as a dict."""
    return {kv.key: any_value(kv.value) for kv in key_values}


def _base64_ids(value: Any) -> Any:
    """OTLP/JSON hex trace/span ids as the base64 that protobuf's JSON parser expects."""
    if isinstance(value, dict):
        return {
            key: base64.b64encode(bytes.fromhex(item)).decode()
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(item, str)
            else _base64_ids(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_base64_ids(item) for item in value]
    return value


def _decode(body: bytes, content_type: str, message: Any) -> Any:
    if "json" in content_type:
        return ParseDict(_base64_ids(json.loads(body)), message)
    return message.FromString(body)


class _Handler(BaseHTTPRequestHandler):
    server: _ReceiverHTTPServer

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        content_type = (self.headers.get("Content-Type") or "").lower()
        if self.path == METRICS_PATH and not self.server.owner.accepts_metrics:
            self.server.owner._refuse()
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == TRACES_PATH:
            message: Any = _decode(
                body, content_type, trace_service_pb2.ExportTraceServiceRequest()
            )
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        elif self.path == METRICS_PATH:
            message = _decode(
                body, content_type, metrics_service_pb2.ExportMetricsServiceRequest()
            )
            reply = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        headers = {key.lower(): value for key, value in self.headers.items()}
        owner = self.server.owner
        status = owner._trace_status() if self.path == TRACES_PATH else 200
        owner._receive(ReceivedExport(self.path, headers, message, status))
        if owner.hang:
            owner._released.wait()
            return
        if status != 200:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        return None


class _ReceiverHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: OTLPReceiver


class OTLPReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1:<free port>; use as a context manager."""

    def __init__(
        self, *, metrics: bool = True, trace_statuses: Iterable[int] = (), hang: bool = False
    ) -> None:
        self.accepts_metrics = metrics
        self.metrics_refusals = 0
        self.hang = hang
        self._trace_statuses = list(trace_statuses)
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._exports: list[ReceivedExport] = []
        self._server = _ReceiverHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:PORT`, the value for `OTEL_EXPORTER_OTLP_ENDPOINT`."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def exports(self) -> list[ReceivedExport]:
        """Every export request received, in arrival order."""
        with self._lock:
            return list(self._exports)

    def wait_for_exports(self, count: int, timeout_s: float) -> bool:
        """Wait until `count` export requests have arrived; False after `timeout_s`."""
        with self._lock:
            return self._arrived.wait_for(lambda: len(self._exports) >= count, timeout_s)

    def trace_exports(self, *, refused: bool = False) -> list[ReceivedExport]:
        """The requests to /v1/traces that were answered 200 (with `refused`, every one)."""
        return [export for export in self.exports if export.path == TRACES_PATH
                and (refused or export.status == 200)]  # fmt: skip

    def metric_exports(self) -> list[ReceivedExport]:
        """The requests to /v1/metrics."""
        return [export for export in self.exports if export.path == METRICS_PATH]

    def spans(self) -> Iterator[tuple[dict[str, Any], Any]]:
        """(resource attributes, span message) for every span received."""
        for export in self.trace_exports():
            for resource_spans in export.message.resource_spans:
                resource = attributes_of(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        yield resource, span

    def span_names(self) -> list[str]:
        """The names of every span received, in arrival order."""
        return [span.name for _, span in self.spans()]

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], float]]:
        """(attributes, value) of every sum or histogram point of metric `name`.

        A histogram point's value is its count.
        """
        points: list[tuple[dict[str, Any], float]] = []
        for export in self.metric_exports():
            for resource_metrics in export.message.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        if metric.name != name:
                            continue
                        if metric.HasField("sum"):
                            for point in metric.sum.data_points:
                                value = (
                                    point.as_int if point.HasField("as_int") else point.as_double
                                )
                                points.append((attributes_of(point.attributes), value))
                        elif metric.HasField("histogram"):
                            for point in metric.histogram.data_points:
                                points.append((attributes_of(point.attributes), point.count))
        return points

    def close(self) -> None:
        """Stop serving (ending hung answers) and release the port."""
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _refuse(self) -> None:
        with self._lock:
            self.metrics_refusals += 1

    def _trace_status(self) -> int:
        with self._lock:
            return self._trace_statuses.pop(0) if self._trace_statuses else 200

    def _receive(self, export: ReceivedExport) -> None:
        with self._lock:
            self._exports.append(export)
            self._arrived.notify_all()
