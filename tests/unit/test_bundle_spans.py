"""The bundle's OTLP/JSON spans are built without protobuf, and equal protobuf's document."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from console.samples import sample_trace_files
from executor.eventlog import read_event_log
from executor.telemetry import build_spans_from_events, spans_to_otlp_json
from store.bundle.spans import otlp_json
from tests.support.events_factory import realistic_execution, small_execution


def compact(document: dict[str, Any]) -> str:
    """The bytes a bundle writes (key order included)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def hand_made_spans(attributes: dict[str, Any]) -> list[Any]:
    """Spans of every kind and status, with links, events and the given attributes."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "t", "n": 3, "ratio": 0.5}, "https://schema/r")
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("scope-a", "1.2", schema_url="https://schema/s")
    other = provider.get_tracer("scope-b")
    with tracer.start_as_current_span("root", kind=SpanKind.SERVER, attributes=attributes) as root:
        root.add_event("e1", {"k": "v", "i": 1})
        root.add_event("", {}, timestamp=5)
        root.set_status(Status(StatusCode.ERROR, "broken"))
        for kind in (SpanKind.CLIENT, SpanKind.PRODUCER, SpanKind.CONSUMER, SpanKind.INTERNAL):
            with other.start_as_current_span(
                "", kind=kind, links=[Link(root.get_span_context(), {"why": "x"})]
            ) as child:
                child.set_status(Status(StatusCode.OK))
    provider.shutdown()
    return list(exporter.get_finished_spans())


EDGE_ATTRIBUTES = {
    "": "empty key",
    "text": "",
    "zero": 0,
    "false": False,
    "true": True,
    "negative": -(2**63),
    "big": 2**63 - 1,
    "float": 1.0,
    "zero_float": 0.0,
    "nan": math.nan,
    "inf": math.inf,
    "minus_inf": -math.inf,
    "strings": ("a", "", "ü"),
    "ints": (1, 0, -2),
    "floats": (0.25,),
    "bools": (False, True),
    "empty": (),
    "unicode": "prompt ✓ \u2028 \x00",
}


@pytest.mark.parametrize(
    "name",
    ["realistic", "small", "samples", "hand_made"],
)
def test_the_direct_otlp_json_is_protobufs_document_byte_for_byte(name):
    if name == "realistic":
        spans = build_spans_from_events(realistic_execution("exec-direct"))
    elif name == "small":
        spans = build_spans_from_events(small_execution("exec-small"))
    elif name == "samples":
        events = [event for path in sample_trace_files() for event in read_event_log(path)]
        spans = build_spans_from_events(events)
    else:
        spans = hand_made_spans(EDGE_ATTRIBUTES)
    assert spans
    assert compact(otlp_json(spans)) == compact(spans_to_otlp_json(spans))


def test_values_the_direct_encoder_does_not_know_fall_back_to_protobuf():
    spans = hand_made_spans({"bytes": b"\x00\x01", "huge": 2**64})
    assert compact(otlp_json(spans)) == compact(spans_to_otlp_json(spans))


def test_no_spans_is_the_empty_document():
    assert otlp_json([]) == spans_to_otlp_json([]) == {"resourceSpans": []}


@pytest.mark.parametrize(
    "document",
    [
        {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"},
                                                            "spans": [{"a": [1, "é"]}] * 3}]}]},
        {"resourceSpans": 5},
        {1: 2, "k": [[[[[[[1.5]]]]]]]},
        {"a": ("x\u2028", None, True)},
        [],
    ],
)  # fmt: skip
def test_the_spans_member_is_written_in_pieces_that_join_to_the_compact_document(document):
    from store.bundle.export import _json_pieces

    pieces = list(_json_pieces(document, 6))
    assert "".join(pieces) == compact(document)


# ---------------------------------------------------------------------------------------------
# Spans built on the plain tracer provider equal the SDK's
# ---------------------------------------------------------------------------------------------

FIXED_RESOURCE = Resource.create({"service.name": "truva-console", "service.version": "t"})


def _interrupted() -> list[Any]:
    return [e for e in realistic_execution("exec-cut") if e.kind != "execution_finished"]


def _with_notices(count: int) -> list[Any]:
    """The small execution with `count` notices on its root span before it finishes."""
    from executor.events import Notice

    events = small_execution("exec-notices")
    at = events[0].started_at
    notices = [
        Notice(execution_id="exec-notices", step_id=None, n=None, at=at + i * 1e-6,
               name="note", message=f"notice {i}", attrs={"i": i})
        for i in range(count)
    ]  # fmt: skip
    return [events[0], *notices, *events[1:]]


def _plain_cases() -> dict[str, Any]:
    from tests.support.events_factory import exhausted_execution

    return {
        "realistic": lambda: realistic_execution("exec-plain"),
        "small": lambda: small_execution("exec-small"),
        "exhausted": lambda: exhausted_execution("exec-exhausted"),
        "interrupted": _interrupted,
        "samples": lambda: [e for p in sample_trace_files() for e in read_event_log(p)],
        "many_notices": lambda: _with_notices(40),
    }


@pytest.mark.parametrize("name", sorted(_plain_cases()))
def test_the_plain_provider_builds_the_sdks_spans_byte_for_byte(name):
    from store.bundle.spans import _plain_spans, spans_document_of

    events = _plain_cases()[name]()
    assert _plain_spans(events, FIXED_RESOURCE) is not None  # the plain path did the build
    document, count = spans_document_of(events, FIXED_RESOURCE)
    sdk_spans = build_spans_from_events(events, resource=FIXED_RESOURCE)
    assert count == len(sdk_spans) > 0
    assert compact(document) == compact(spans_to_otlp_json(sdk_spans))


@pytest.mark.parametrize(
    "case",
    ["over_128_events_on_a_span", "an_otel_limit_variable", "inside_a_current_span"],
)
def test_what_the_plain_provider_does_not_handle_is_built_by_the_sdk(case, monkeypatch, caplog):
    from opentelemetry import trace as trace_api

    from store.bundle.spans import _plain_spans, spans_document_of

    events = _with_notices(130) if case == "over_128_events_on_a_span" else small_execution("e")
    if case == "an_otel_limit_variable":
        monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "3")
    with contextlib.ExitStack() as stack:
        if case == "inside_a_current_span":
            caller = hand_made_spans({})[0]
            stack.enter_context(trace_api.use_span(trace_api.NonRecordingSpan(caller.context)))
        assert _plain_spans(events, FIXED_RESOURCE) is None
        document, _count = spans_document_of(events, FIXED_RESOURCE)
        sdk_spans = build_spans_from_events(events, resource=FIXED_RESOURCE)
    assert compact(document) == compact(spans_to_otlp_json(sdk_spans))
    assert not [r for r in caplog.records if r.name.startswith("executor.telemetry")]
    if case == "over_128_events_on_a_span":
        assert '"droppedEventsCount":' in compact(document)
    if case == "an_otel_limit_variable":
        assert '"droppedAttributesCount":' in compact(document)


# ---------------------------------------------------------------------------------------------
# A plain span's line written as text equals its `_span_json` through `json.dumps`
# ---------------------------------------------------------------------------------------------

PLAIN_EDGE_ATTRIBUTES = {
    key: value
    for key, value in EDGE_ATTRIBUTES.items()
    if key
    and (type(value) is not tuple or all(type(item) is str for item in value))
    and (type(value) is not float or math.isfinite(value))
}


def _plain_span_cases() -> dict[str, Any]:
    """Plain spans of every shape `_plain_span_text` meets, and values it leaves to JSON."""
    from opentelemetry import trace as trace_api

    from store.bundle.spans import _PlainTracerProvider

    def build(
        attributes: dict[str, Any],
        *,
        name: str = "span ✓",
        child: bool = False,
        status: Any = None,
        event_attributes: Any = None,
        event_name: str = "e",
    ) -> Any:
        provider = _PlainTracerProvider(FIXED_RESOURCE)
        root = provider.tracer.start_span(name, attributes=attributes, start_time=7)
        span = root
        if child:
            context = trace_api.set_span_in_context(root)
            span = provider.tracer.start_span(
                "", context=context, kind=SpanKind.CLIENT, attributes={}, start_time=8
            )
        if event_attributes is not None:
            span.add_event(event_name, event_attributes, timestamp=9)
            span.add_event("", {}, timestamp=10)
        if status is not None:
            span.set_status(status)
        span.end(end_time=11)
        return span

    return {
        "edge_values": lambda: build(PLAIN_EDGE_ATTRIBUTES),
        "no_attributes": lambda: build({}, name=""),
        "child_with_events": lambda: build({"a": 1}, child=True, event_attributes={"k": "v"}),
        "event_without_name": lambda: build({}, event_attributes={"x": ("é",)}, event_name=""),
        "error_status": lambda: build({"s": "x"}, status=Status(StatusCode.ERROR, 'broke "n"')),
        "error_without_description": lambda: build({}, status=Status(StatusCode.ERROR)),
        "ok_status": lambda: build({}, status=Status(StatusCode.OK)),
        "non_finite": lambda: build({"nan": math.nan, "inf": -math.inf}),
        "huge_int": lambda: build({"huge": 2**63}),
    }


@pytest.mark.parametrize("name", sorted(_plain_span_cases()))
def test_a_plain_spans_text_line_is_its_json_document_byte_for_byte(name):
    from store.bundle.spans import SpansNeedSdk, _NotDirect, _span_json, _span_line

    span = _plain_span_cases()[name]()
    try:
        expected = compact(_span_json(span)).encode("utf-8")
    except _NotDirect:
        with pytest.raises(SpansNeedSdk):
            _span_line(span)
    else:
        assert _span_line(span) == expected


def test_values_outside_the_text_encoder_are_left_to_the_json_document():
    from store.bundle.spans import _plain_span_text

    cases = _plain_span_cases()
    for name in ("non_finite", "huge_int"):
        assert _plain_span_text(cases[name]()) is None, name
    assert _plain_span_text(cases["edge_values"]()) is not None
