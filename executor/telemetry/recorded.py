"""Spans of a recorded execution, rebuilt in memory, and their OTLP/JSON form."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from executor import __version__
from executor.events import (
    Event,
)
from executor.telemetry.attributes import DEFAULT_SERVICE_NAME
from executor.telemetry.ids import ExecutionTraceIds
from executor.telemetry.spans import TelemetryRecorder

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

_logger = logging.getLogger(__name__)


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


def hex_ids(value: Any) -> Any:
    """Replace base64 trace/span ids (protobuf JSON) with lowercase hex (OTLP JSON), in place."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _ID_FIELDS and isinstance(item, str):
                value[key] = base64.b64decode(item).hex()
            else:
                hex_ids(item)
    elif isinstance(value, list):
        for item in value:
            hex_ids(item)
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
    return hex_ids(document)
