"""A real OTLP/gRPC receiver on 127.0.0.1 for tests: the collector's trace and metrics services.

    with OTLPGrpcReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
               "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        ...
        assert "orchestrator.execution" in receiver.span_names()

A grpcio server with the `opentelemetry.proto` TraceService (and, unless `metrics=False`, the
MetricsService) servicers: every request is kept in arrival order and answered with an empty
`Export*ServiceResponse`. Without the metrics service a metrics export gets UNIMPLEMENTED, as
from a tracing-only backend.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any, Self

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tests.support.otlp_receiver import attributes_of


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, owner: OTLPGrpcReceiver) -> None:
        self.owner = owner

    def Export(self, request: Any, context: Any) -> Any:
        self.owner._receive("traces", request, context.invocation_metadata())
        return trace_service_pb2.ExportTraceServiceResponse()


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, owner: OTLPGrpcReceiver) -> None:
        self.owner = owner

    def Export(self, request: Any, context: Any) -> Any:
        self.owner._receive("metrics", request, context.invocation_metadata())
        return metrics_service_pb2.ExportMetricsServiceResponse()


class OTLPGrpcReceiver:
    """An OTLP/gRPC receiver on 127.0.0.1:<free port>; use as a context manager."""

    def __init__(self, *, metrics: bool = True) -> None:
        self._lock = threading.Lock()
        self._exports: list[tuple[str, Any, dict[str, str]]] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(self), self._server)
        if metrics:
            metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(
                _Metrics(self), self._server
            )
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:PORT`, the value for `OTEL_EXPORTER_OTLP_ENDPOINT` with grpc."""
        return f"http://127.0.0.1:{self.port}"

    def exports(self, signal: str) -> list[tuple[Any, dict[str, str]]]:
        """(request, metadata) of every export of `signal` (traces|metrics), in arrival order."""
        with self._lock:
            return [(message, meta) for kind, message, meta in self._exports if kind == signal]

    def spans(self) -> Iterator[tuple[dict[str, Any], Any]]:
        """(resource attributes, span message) for every span received."""
        for message, _ in self.exports("traces"):
            for resource_spans in message.resource_spans:
                resource = attributes_of(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        yield resource, span

    def span_names(self) -> list[str]:
        return [span.name for _, span in self.spans()]

    def close(self) -> None:
        self._server.stop(grace=None).wait(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _receive(self, signal: str, message: Any, metadata: Any) -> None:
        with self._lock:
            self._exports.append((signal, message, {item.key: item.value for item in metadata}))
