"""Store rows back to the executor events they were folded from, and their OTLP spans.

Longer than ~600 lines on purpose: the events, the plain tracer provider, the direct OTLP/JSON
encoder and the keyed spans of a batch are one pipeline whose output must stay byte-equal to
the SDK's; they read each other's private records.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from executor.eventlog import EventLogError, event_from_dict
from executor.events import (
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
from executor.policy import Action
from executor.wire import RetryPolicy
from store.records import FINISHED_EXECUTION_STATUSES


def _epoch(text: str | None) -> float | None:
    if text is None:
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# An interrupted execution never reported its finish; the store inferred it.
_REPORTED_FINISHES = FINISHED_EXECUTION_STATUSES - {"interrupted"}
# Events at the same instant are replayed in the order the executor reports them.
_EVENT_ORDER = {
    "execution_started": 0,
    "step_started": 1,
    "circuit_state_changed": 2,
    "parameters_coerced": 3,
    "attempt_dispatched": 4,
    "attempt_responded": 5,
    "llm_call": 6,
    "notice": 7,
    "attempt_decided": 8,
    "backoff": 9,
    "step_finished": 10,
    "execution_finished": 11,
}
_BACKOFF_PHASE_ORDER = {"planned": 0, "started": 1, "finished": 2, "cancelled": 2}


def _event_time(event: Event) -> float:
    """When the executor reported the event: an LLM call is reported when it completes."""
    if isinstance(event, LLMCall):
        return event.at + event.latency_ms / 1000.0
    for name in ("at", "started_at", "finished_at"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def events_from_rows(rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[Event]:
    """The executor events that store rows were folded from, in reporting order.

    Enough for `executor.telemetry.build_spans_from_events` to rebuild the spans: times are the
    stored (microsecond) times; an execution that is `interrupted` gets no finish event.
    """
    snapshots = {row["execution_id"]: row for row in rows.get("execution_snapshots", ())}
    events: list[Event] = []
    started = set()
    for row in rows.get("executions", ()):
        started_at = _epoch(row["started_at"])
        if started_at is None:
            continue
        started.add(row["execution_id"])
        snapshot = snapshots.get(row["execution_id"], {})
        events.append(
            ExecutionStarted(
                execution_id=row["execution_id"],
                started_at=started_at,
                query=row["query"] or "",
                plan_path=row["plan_path"],
                plan=_loads(snapshot.get("plan")) or {},
                config=_loads(snapshot.get("config")) or {},
                config_sources=_loads(snapshot.get("config_sources")) or {},
                llm=_loads(snapshot.get("llm")),
                tool_version=row["tool_version"] or "",
                rerun_of=row.get("rerun_of"),
                labels=_loads(row.get("labels")) or {},
            )
        )
        finished_at = _epoch(row["finished_at"])
        if row["status"] in _REPORTED_FINISHES and finished_at is not None:
            events.append(
                ExecutionFinished(
                    execution_id=row["execution_id"],
                    finished_at=finished_at,
                    status=row["status"],
                    stop_reason=row["stop_reason"],
                    incomplete_steps=tuple(row["incomplete_steps"] or ()),
                    llm_calls=row["llm_calls"] or 0,
                    llm_total_tokens=row["llm_total_tokens"] or 0,
                )
            )
    events.extend(_step_events(rows.get("steps", ())))
    events.extend(_attempt_events(rows.get("attempts", ())))
    events.extend(_llm_events(rows.get("llm_calls", ())))
    events.extend(_other_events(rows.get("events", ())))
    events = [event for event in events if getattr(event, "execution_id", None) in started]
    return sorted(
        events,
        key=lambda event: (
            _event_time(event),
            _EVENT_ORDER[event.kind],
            _BACKOFF_PHASE_ORDER.get(getattr(event, "phase", ""), 0),
        ),
    )


def _step_events(step_rows: Iterable[Mapping[str, Any]]) -> Iterable[Event]:
    for row in step_rows:
        started_at = _epoch(row["started_at"])
        if started_at is not None:
            yield StepStarted(
                execution_id=row["execution_id"],
                step_id=row["step_id"],
                started_at=started_at,
                tool=row["tool"] or "",
                capability=row["capability"] or "",
                url=row["url"] or "",
                depends_on=tuple(row["depends_on"] or ()),
                parameters=_loads(row["parameters"]) or {},
                protected_keys=_loads(row["protected_keys"]) or {},
                orchestrator=bool(row["orchestrator"]),
                side_effects=row["side_effects"] or "none",
            )
        finished_at = _epoch(row["finished_at"])
        if (
            row["status"] in ("succeeded", "failed", "rejected", "skipped")
            and finished_at is not None
        ):
            yield StepFinished(
                execution_id=row["execution_id"],
                step_id=row["step_id"],
                finished_at=finished_at,
                status=row["status"],
                dispatch_count=row["dispatch_count"] or 0,
                attempts=row["attempts"] or 0,
                validation_retries=row["validation_retries"] or 0,
                semantic_retries=row["semantic_retries"] or 0,
                final_action=row["final_action"],
                final_rule_id=row["final_rule_id"],
                error=row["error"],
                result=_loads(row["result"]),
                skip_reason=row["skip_reason"],
            )


def _attempt_events(attempt_rows: Iterable[Mapping[str, Any]]) -> Iterable[Event]:
    ordered = sorted(attempt_rows, key=lambda row: (row["execution_id"], row["step_id"], row["n"]))
    # The policy's attempt counter starts at 1 per step and only `retry_same` advances it.
    attempt_number, step = 1, None
    for row in ordered:
        if (row["execution_id"], row["step_id"]) != step:
            attempt_number, step = 1, (row["execution_id"], row["step_id"])
        where = {"execution_id": row["execution_id"], "step_id": row["step_id"], "n": row["n"]}
        started_at = _epoch(row["started_at"])
        if row["dispatched"] and started_at is not None:
            yield AttemptDispatched(
                **where,
                attempt_number=attempt_number,
                at=started_at,
                method=row["method"] or "",
                url=row["url"] or "",
                request_headers=_loads(row["request_headers"]) or {},
                request_body=row["request_body"] or b"",
                parameters=_loads(row["parameters"]) or {},
                correction_layer=row["correction_layer"],
            )
        responded_at = _epoch(row["responded_at"])
        if responded_at is not None:
            yield AttemptResponded(
                **where,
                at=responded_at,
                elapsed_ms=row["elapsed_ms"] or 0.0,
                status=row["http_status"] or 0,
                response_headers=_loads(row["response_headers"]) or {},
                response_body=row["response_body"] or b"",
                transport_error=row["transport_error"],
                transport_error_message=row["transport_error_message"],
                retry_policy=row["retry_policy"] or RetryPolicy.UNSPECIFIED.value,
            )
        decided_at = _epoch(row["decided_at"])
        decision = _loads(row["decision"])
        if decided_at is not None and isinstance(decision, dict):
            try:
                decided_event = event_from_dict(
                    {
                        "kind": "attempt_decided",
                        **where,
                        "at": decided_at,
                        "dispatched": bool(row["dispatched"]),
                        "parameters": _loads(row["parameters"]) or {},
                        "decision": decision,
                    }
                )
            except EventLogError:  # a decision this version cannot read: no decision event
                continue
            yield decided_event
        if row["action"] == Action.RETRY_SAME:
            attempt_number += 1


def _llm_events(llm_rows: Iterable[Mapping[str, Any]]) -> Iterable[Event]:
    for row in llm_rows:
        called_at = _epoch(row["called_at"])
        if called_at is None:
            continue
        yield LLMCall(
            execution_id=row["execution_id"],
            step_id=row["step_id"],
            n=row["n"],
            call_id=row["call_id"],
            site=row["site"] or "",
            at=called_at,
            latency_ms=row["latency_ms"] or 0.0,
            base_url=row["base_url"] or "",
            model=row["model"] or "",
            temperature=row["temperature"] or 0.0,
            max_tokens=row["max_tokens"] or 0,
            messages=tuple(_prompt_messages(row)),
            request_body=row["request_body"] or b"",
            response_status=row["response_status"],
            response_body=row["response_body"] or b"",
            raw_text=row["raw_text"],
            parsed=_loads(row["parsed"]),
            parse_error=row["parse_error"],
            error=row["error"],
            prompt_tokens=row["prompt_tokens"],
            completion_tokens=row["completion_tokens"],
            total_tokens=row["total_tokens"],
            text_recorded=row["request_body"] is not None,
            response_headers=_loads(row["response_headers"]) or {},
        )


def _prompt_messages(row: Mapping[str, Any]) -> list[Any]:
    """The prompt of an LLM call row: from its request bytes, or the prompt never sent."""
    try:
        messages = json.loads(row["request_body"] or b"").get("messages")
    except (ValueError, AttributeError):
        messages = None
    if not isinstance(messages, list):
        messages = _loads(row["unsent_messages"])
    return messages if isinstance(messages, list) else []


def _other_events(event_rows: Iterable[Mapping[str, Any]]) -> Iterable[Event]:
    for row in event_rows:
        at = _epoch(row["occurred_at"])
        attrs = _loads(row["attrs"])
        attrs = attrs if isinstance(attrs, dict) else {}
        where = {"execution_id": row["execution_id"], "step_id": row["step_id"], "n": row["n"]}
        if at is None:
            continue
        if row["kind"] == "coercion":
            yield ParametersCoerced(**where, at=at, coercions=tuple(attrs.get("coercions") or ()))
        elif row["kind"] == "backoff":
            yield BackoffEvent(
                **where,
                at=at,
                phase=row["name"] or "",
                planned_ms=attrs.get("planned_ms") or 0.0,
                source=attrs.get("source") or "",
                actual_ms=attrs.get("actual_ms"),
            )
        elif row["kind"] == "notice":
            yield Notice(
                **where, at=at, name=row["name"] or "", message=row["message"] or "", attrs=attrs
            )
        elif row["kind"] == "circuit":
            yield CircuitStateChanged(
                breaker=str(attrs.get("breaker")),
                at=at,
                from_state=str(attrs.get("from_state")),
                to_state=str(attrs.get("to_state")),
                reason=row["message"] or "",
                execution_id=row["execution_id"],
            )


def spans_document(rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[dict[str, Any], int]:
    """The OTLP/JSON document of the spans rebuilt from `rows`, and how many spans it holds."""
    return spans_document_of(events_from_rows(rows))


def spans_document_of(events: Sequence[Event], resource: Any = None) -> tuple[dict[str, Any], int]:
    """The OTLP/JSON document of the spans of `events` (as `build_spans_from_events` builds
    them), and how many spans it holds.

    The spans are built by `TelemetryRecorder` on `_PlainTracerProvider`, which keeps what the
    OpenTelemetry SDK would keep without its per-attribute machinery; whatever it does not
    handle exactly as the SDK does (see `_PlainSpan`) makes the SDK build the spans instead.
    """
    from executor.telemetry import build_spans_from_events

    spans = _plain_spans(events, resource)
    if spans is None:
        spans = build_spans_from_events(events, resource=resource)
    return otlp_json(spans), len(spans)


# ---------------------------------------------------------------------------------------------
# Spans without the SDK
# ---------------------------------------------------------------------------------------------
# `build_spans_from_events` runs `TelemetryRecorder` on the OpenTelemetry SDK, whose attribute
# cleaning, limits, locks and span processors were most of an export's span cost. The recorder
# only starts spans, sets attributes, adds events, sets an error status and ends them, so a
# provider that records exactly that gives the same finished spans, in the same (end) order;
# tests/unit/test_bundle_spans.py holds the two documents byte-equal. Values, limits and calls
# the SDK would treat specially (drop, truncate, warn about) switch the build back to the SDK.

# The SDK's default span limits (`SpanLimits`); over them it drops, which the SDK path does.
_MAX_ATTRIBUTES = 128
_MAX_EVENTS = 128
# Environment variables the SDK's providers read beyond the resource's; any of them set means
# the SDK builds the spans (limits, samplers, a disabled SDK).
_RESOURCE_VARIABLES = {"OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME"}


class _NotPlain(BaseException):
    """Something the plain provider does not handle as the SDK does.

    A BaseException, so it passes the recorder's `except Exception` (which would log it as a
    telemetry failure) straight to `_plain_spans`.
    """


_PLAIN_SCALARS = frozenset({str, bool, int, float})  # exact types: the SDK keeps them as given
_STRING_TYPE = frozenset({str})


def _plain_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of `attributes` when the SDK would keep each as given (non-empty string keys,
    exact scalars or tuples of exact strings); else _NotPlain."""
    if not attributes:
        return {}
    if len(attributes) > _MAX_ATTRIBUTES or not _STRING_TYPE.issuperset(map(type, attributes)):
        raise _NotPlain
    if "" in attributes:
        raise _NotPlain
    if not _PLAIN_SCALARS.issuperset(map(type, attributes.values())):
        for value in attributes.values():
            kind = type(value)
            if kind not in _PLAIN_SCALARS and (
                kind is not tuple or not all(type(item) is str for item in value)
            ):
                raise _NotPlain
    return dict(attributes)


class _PlainContext:
    __slots__ = ("span_id", "trace_id")
    is_remote = False
    trace_state = None

    def __init__(self, trace_id: int, span_id: int) -> None:
        self.trace_id = trace_id
        self.span_id = span_id


class _PlainEvent:
    __slots__ = ("attributes", "name", "timestamp")
    dropped_attributes = 0

    def __init__(self, name: str, attributes: dict[str, Any], timestamp: int) -> None:
        self.name = name
        self.attributes = attributes
        self.timestamp = timestamp


class _PlainSpan:
    """A finished-span record with the fields `_span_json` reads (as the SDK's `ReadableSpan`)."""

    dropped_attributes = dropped_events = dropped_links = 0
    links = ()

    def __init__(
        self,
        provider: _PlainTracerProvider,
        name: str,
        context: _PlainContext,
        parent: _PlainContext | None,
        kind: Any,
        attributes: dict[str, Any],
        start_time: int,
    ) -> None:
        self._provider = provider
        self.name = name
        self.context = context
        self.parent = parent
        self.kind = kind
        self.attributes = attributes
        self.start_time = start_time
        self.end_time: int | None = None
        self.events: list[_PlainEvent] = []
        self.status = provider.unset_status
        self.resource = provider.resource
        self.instrumentation_scope = provider.scope

    def get_span_context(self) -> _PlainContext:
        return self.context

    def _check_open(self) -> None:
        if self.end_time is not None:  # the SDK warns and ignores calls on an ended span
            raise _NotPlain

    def set_attribute(self, key: str, value: Any) -> None:
        self.set_attributes({key: value})

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        self._check_open()
        for key, value in _plain_attributes(attributes).items():
            self.attributes.pop(key, None)  # a key set again moves last, as in the SDK
            self.attributes[key] = value
        if len(self.attributes) > _MAX_ATTRIBUTES:
            raise _NotPlain

    def add_event(
        self, name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None
    ) -> None:
        self._check_open()
        if timestamp is None or len(self.events) >= _MAX_EVENTS:
            raise _NotPlain
        self.events.append(_PlainEvent(name, _plain_attributes(attributes), timestamp))

    def set_status(self, status: Any, description: str | None = None) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._check_open()
        if description is not None or not isinstance(status, Status):
            raise _NotPlain
        if self.status.status_code is StatusCode.OK or status.status_code is StatusCode.UNSET:
            return  # as the SDK: an OK status stays, UNSET is ignored
        self.status = status

    def end(self, end_time: int | None = None) -> None:
        self._check_open()
        if end_time is None:
            raise _NotPlain
        self.end_time = end_time
        self._provider.finished.append(self)


class _PlainTracer:
    def __init__(self, provider: _PlainTracerProvider) -> None:
        self._provider = provider

    def start_span(
        self,
        name: str,
        context: Any = None,
        kind: Any = None,
        attributes: Mapping[str, Any] | None = None,
        links: Any = None,
        start_time: int | None = None,
        **_: Any,
    ) -> _PlainSpan:
        from opentelemetry import trace as trace_api

        provider = self._provider
        if links or start_time is None:
            raise _NotPlain
        # No context: the current one, which `_plain_spans` checked holds no span.
        parent = trace_api.get_current_span(context)
        if isinstance(parent, _PlainSpan):
            parent_context: _PlainContext | None = parent.context
            trace_id = parent.context.trace_id
        elif parent is trace_api.INVALID_SPAN:
            parent_context, trace_id = None, provider.id_generator.generate_trace_id()
        else:
            raise _NotPlain
        span_context = _PlainContext(trace_id, provider.id_generator.generate_span_id())
        kind = kind if kind is not None else trace_api.SpanKind.INTERNAL
        return _PlainSpan(
            provider,
            name,
            span_context,
            parent_context,
            kind,
            _plain_attributes(attributes),
            start_time,
        )


class _PlainTracerProvider:
    """Just enough of a `TracerProvider` for `TelemetryRecorder`; spans kept as they end."""

    def __init__(self, resource: Any) -> None:
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import Span, Status

        from executor import __version__
        from executor.telemetry.attributes import INSTRUMENTATION_SCOPE
        from executor.telemetry.ids import ExecutionTraceIds

        # A span, for `set_span_in_context` and `get_current_span` (which check the type).
        Span.register(_PlainSpan)
        self.resource = resource
        self.scope = InstrumentationScope(INSTRUMENTATION_SCOPE, __version__, None, None)
        self.id_generator = ExecutionTraceIds()
        self.unset_status = Status()
        self.finished: list[_PlainSpan] = []
        self.tracer = _PlainTracer(self)

    def get_tracer(self, name: str, version: str | None = None, *_: Any, **__: Any) -> Any:
        if name != self.scope.name or version != self.scope.version:
            raise _NotPlain
        return self.tracer


def default_resource() -> Any:
    """The resource of a bundle's spans (`build_spans_from_events`'s default).

    Without the SDK's `service.instance.id`, a new random UUID in each process (unless
    OTEL_RESOURCE_ATTRIBUTES sets one): two exports of the same executions write the same
    `spans.otlp.json`, as docs/bundles.md says.
    """
    import os

    from opentelemetry.sdk.resources import Resource

    from executor import __version__
    from executor.telemetry.attributes import DEFAULT_SERVICE_NAME

    resource = Resource.create(
        {"service.name": DEFAULT_SERVICE_NAME, "service.version": __version__}
    )
    if "service.instance.id" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        return resource
    attributes = {k: v for k, v in resource.attributes.items() if k != "service.instance.id"}
    return Resource(attributes, resource.schema_url)


def plain_spans_possible() -> bool:
    """Whether the SDK would build spans as the plain provider does in this process."""
    import os

    from opentelemetry import trace as trace_api

    if any(name.startswith("OTEL_") and name not in _RESOURCE_VARIABLES for name in os.environ):
        return False
    # Inside a current span the SDK would parent the root spans on the caller's span.
    return trace_api.get_current_span() is trace_api.INVALID_SPAN


def _plain_spans(events: Sequence[Event], resource: Any) -> list[_PlainSpan] | None:
    """The spans of `events` built on `_PlainTracerProvider`, or None where the SDK must."""
    from executor.telemetry import TelemetryRecorder

    if not plain_spans_possible():
        return None
    resource = resource or default_resource()
    provider = _PlainTracerProvider(resource)
    recorder = TelemetryRecorder(tracer_provider=provider)  # type: ignore[arg-type]
    try:
        for event in events:
            recorder.record(event)
        recorder.end_open_spans()
    except _NotPlain:
        return None
    if recorder.failures:
        return None  # the recorder swallowed an error: the SDK build decides what comes out
    return list(provider.finished)


# ---------------------------------------------------------------------------------------------
# OTLP/JSON straight from the spans
# ---------------------------------------------------------------------------------------------
# `executor.telemetry.spans_to_otlp_json` encodes the spans to protobuf and converts the
# message with protobuf's generic `MessageToDict`, which dominated an export's cost. Below is
# the same document built directly: the same fields in protobuf's field order, defaults left
# out as proto3 JSON leaves them, 64-bit integers as decimal text, ids as hex. A value the
# direct encoder does not know (bytes, maps, integers beyond 64 bits) falls back to the
# protobuf path for the whole document; tests/unit/test_bundle_spans.py holds them equal.

_INT64 = (-(2**63), 2**63 - 1)
_SPAN_KINDS = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}
_FLAGS_HAS_IS_REMOTE, _FLAGS_IS_REMOTE = 0x100, 0x200
_NON_FINITE_DOUBLES = {math.inf: "Infinity", -math.inf: "-Infinity"}


class _NotDirect(Exception):
    """A value the direct encoder leaves to protobuf."""


def _any_value(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, str):
        return {"stringValue": str(value)}
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise _NotDirect
        return {"intValue": str(int(value))}
    if isinstance(value, float):
        if math.isnan(value):
            return {"doubleValue": "NaN"}
        return {"doubleValue": _NON_FINITE_DOUBLES.get(value, float(value))}
    if isinstance(value, list | tuple):
        values = [_any_value(item) for item in value]
        return {"arrayValue": {"values": values} if values else {}}
    raise _NotDirect


def _attributes_json(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not attributes:
        return []
    result = []
    append = result.append
    for key, value in attributes.items():
        if type(key) is not str:
            raise _NotDirect
        kind = type(value)  # the common exact types first; the rest as `_any_value` says
        if kind is str:
            encoded: dict[str, Any] = {"stringValue": value}
        elif kind is int and _INT64[0] <= value <= _INT64[1]:
            encoded = {"intValue": str(value)}
        elif kind is bool:
            encoded = {"boolValue": value}
        else:
            encoded = _any_value(value)
        append({"key": key, "value": encoded} if key else {"value": encoded})
    return result


def _put(target: dict[str, Any], name: str, value: Any) -> None:
    """Set a field unless it holds its proto3 default (as protobuf's JSON leaves it out)."""
    if value:
        target[name] = value


def _flags(context: Any) -> int:
    return _FLAGS_HAS_IS_REMOTE | (_FLAGS_IS_REMOTE if context and context.is_remote else 0)


def _span_json(span: Any) -> dict[str, Any]:
    context = span.get_span_context()
    result: dict[str, Any] = {
        "traceId": f"{context.trace_id:032x}",
        "spanId": f"{context.span_id:016x}",
    }
    if context.trace_state is not None:
        _put(result, "traceState", ",".join(f"{k}={v}" for k, v in context.trace_state.items()))
    if span.parent:
        result["parentSpanId"] = f"{span.parent.span_id:016x}"
    _put(result, "name", span.name)
    result["kind"] = _SPAN_KINDS[span.kind.name]
    _put(result, "startTimeUnixNano", str(span.start_time) if span.start_time else None)
    _put(result, "endTimeUnixNano", str(span.end_time) if span.end_time else None)
    _put(result, "attributes", _attributes_json(span.attributes))
    _put(result, "droppedAttributesCount", span.dropped_attributes)
    events = []
    for event in span.events:
        encoded: dict[str, Any] = {}
        _put(encoded, "timeUnixNano", str(event.timestamp) if event.timestamp else None)
        _put(encoded, "name", event.name)
        _put(encoded, "attributes", _attributes_json(event.attributes))
        _put(encoded, "droppedAttributesCount", event.dropped_attributes)
        events.append(encoded)
    _put(result, "events", events)
    _put(result, "droppedEventsCount", span.dropped_events)
    links = []
    for link in span.links:
        encoded = {
            "traceId": f"{link.context.trace_id:032x}",
            "spanId": f"{link.context.span_id:016x}",
        }
        _put(encoded, "attributes", _attributes_json(link.attributes))
        _put(encoded, "droppedAttributesCount", link.dropped_attributes)
        encoded["flags"] = _flags(link.context)
        links.append(encoded)
    _put(result, "links", links)
    _put(result, "droppedLinksCount", span.dropped_links)
    if span.status is not None:
        status: dict[str, Any] = {}
        _put(status, "message", span.status.description)
        _put(status, "code", span.status.status_code.value)
        result["status"] = status
    result["flags"] = _flags(span.parent)
    return result


def _resource_spans_json(resource: Any, scopes: Mapping[Any, list[Any]]) -> dict[str, Any]:
    """One `resourceSpans` entry: `resource` and its scopes with their encoded spans."""
    scope_spans = []
    for scope, encoded in scopes.items():
        scope_json: dict[str, Any] = {}
        if scope is not None:
            _put(scope_json, "name", scope.name)
            _put(scope_json, "version", scope.version)
            _put(scope_json, "attributes", _attributes_json(scope.attributes))
        item: dict[str, Any] = {"scope": scope_json, "spans": encoded}
        _put(item, "schemaUrl", scope.schema_url if scope is not None else None)
        scope_spans.append(item)
    resource_json: dict[str, Any] = {}
    _put(resource_json, "attributes", _attributes_json(resource.attributes))
    entry: dict[str, Any] = {"resource": resource_json, "scopeSpans": scope_spans}
    _put(entry, "schemaUrl", resource.schema_url)
    return entry


def _direct_otlp_json(spans: Sequence[Any]) -> dict[str, Any]:
    grouped: dict[Any, dict[Any, list[dict[str, Any]]]] = {}
    for span in spans:
        scopes = grouped.setdefault(span.resource, {})
        scopes.setdefault(span.instrumentation_scope or None, []).append(_span_json(span))
    return {
        "resourceSpans": [
            _resource_spans_json(resource, scopes) for resource, scopes in grouped.items()
        ]
    }


def otlp_json(spans: Sequence[Any]) -> dict[str, Any]:
    """`executor.telemetry.spans_to_otlp_json(spans)`, built without protobuf where it can be."""
    if not spans:
        return {"resourceSpans": []}
    try:
        return _direct_otlp_json(spans)
    except _NotDirect:
        from executor.telemetry import spans_to_otlp_json

        return spans_to_otlp_json(spans)


# ---------------------------------------------------------------------------------------------
# Spans in pieces: a document over many executions, built a few executions at a time
# ---------------------------------------------------------------------------------------------
# `TelemetryRecorder` keeps each execution's spans on its own tracks (events without an
# execution are dropped by `events_from_rows`), so the document of a whole selection is the
# spans of its parts merged in the order the whole would have ended them: by the reporting
# order of the event that ended each (time, kind, phase, then execution id and place, as the
# stable sort of `events_from_rows` breaks ties), and the spans `end_open_spans` ends last,
# in the order their executions opened. `SpanKey` is that place; the document's bytes are
# those of `spans_document` over all the rows (tests/unit/test_bundle_spans.py).

SpanKey = tuple[Any, ...]
SPANS_MARKER = "\x00spans"


class SpansNeedSdk(Exception):
    """Spans the plain provider or the direct encoder would not build as the SDK does; the
    caller builds the whole document with `spans_document` instead."""


def _span_line(span: _PlainSpan) -> bytes:
    """The span's compact JSON; its attributes and events are let go (an ended span is never
    changed: the plain provider refuses it), though the recorder's tracks keep the span."""
    line = _plain_span_text(span)
    if line is None:  # a value the text encoder leaves to `_span_json`
        try:
            encoded = _span_json(span)
        except _NotDirect:
            raise SpansNeedSdk from None
        line = json.dumps(encoded, ensure_ascii=False, separators=(",", ":"))
    span.attributes, span.events = {}, []
    return line.encode("utf-8")


# `json.dumps(_span_json(span), ensure_ascii=False, separators=(",", ":"))` of a plain span,
# written as text: the same fields in the same order, each string through the encoder
# `json.dumps` uses, each attribute key's opening text made once. Anything outside the plain
# provider's usual values (an integer beyond 64 bits, a non-finite or subclassed value, a time
# that is not an int) gives None, and the line is built through `_span_json`.
_json_string = json.encoder.encode_basestring  # json.dumps's string form with ensure_ascii off
_ATTRIBUTE_OPENINGS: dict[str, str] = {}
_ATTRIBUTE_OPENINGS_KEPT = 4096  # keys are few; a run of odd ones is not kept


class _NotText(Exception):
    """A value the text encoder leaves to `_span_json`."""


def _attribute_opening(key: str) -> str:
    """`{"key":<key>,"value":{` of one attribute (keys are checked by `_plain_attributes`)."""
    if len(_ATTRIBUTE_OPENINGS) >= _ATTRIBUTE_OPENINGS_KEPT:
        _ATTRIBUTE_OPENINGS.clear()
    opening = _ATTRIBUTE_OPENINGS[key] = '{"key":' + _json_string(key) + ',"value":{'
    return opening


def _attributes_text(attributes: Mapping[str, Any]) -> str:
    """`_attributes_json(attributes)` as compact JSON, without its brackets."""
    openings = _ATTRIBUTE_OPENINGS
    parts = []
    add = parts.append
    for key, value in attributes.items():
        opening = openings.get(key) or _attribute_opening(key)
        kind = type(value)
        if kind is str:
            add(opening + '"stringValue":' + _json_string(value) + "}}")
        elif kind is int:
            if not _INT64[0] <= value <= _INT64[1]:
                raise _NotText
            add(f'{opening}"intValue":"{value}"}}}}')
        elif kind is bool:
            add(opening + ('"boolValue":true}}' if value else '"boolValue":false}}'))
        elif kind is float:
            if not math.isfinite(value):
                raise _NotText
            add(f'{opening}"doubleValue":{float.__repr__(value)}}}}}')
        elif kind is tuple and all(type(item) is str for item in value):
            if value:
                items = ",".join('{"stringValue":' + _json_string(item) + "}" for item in value)
                add(opening + '"arrayValue":{"values":[' + items + "]}}}")
            else:
                add(opening + '"arrayValue":{}}}')
        else:
            raise _NotText
    return ",".join(parts)


def _plain_span_text(span: _PlainSpan) -> str | None:
    """The compact JSON text of `_span_json(span)`, or None where that must build it."""
    context, parent, status = span.context, span.parent, span.status
    if (
        type(span) is not _PlainSpan
        or context.trace_state is not None
        or span.links
        or span.dropped_attributes
        or span.dropped_events
        or span.dropped_links
        or type(span.start_time) is not int
        or type(span.end_time) is not int
        or (parent is not None and parent.is_remote)
        or type(span.name) is not str
    ):
        return None
    pieces = ['{"traceId":"', f"{context.trace_id:032x}", '","spanId":"', f"{context.span_id:016x}"]
    append = pieces.append
    if parent:
        append(f'","parentSpanId":"{parent.span_id:016x}"')
    else:
        append('"')
    if span.name:
        append(',"name":')
        append(_json_string(span.name))
    append(f',"kind":{_SPAN_KINDS[span.kind.name]}')
    if span.start_time:
        append(f',"startTimeUnixNano":"{span.start_time}"')
    if span.end_time:
        append(f',"endTimeUnixNano":"{span.end_time}"')
    try:
        if span.attributes:
            append(',"attributes":[' + _attributes_text(span.attributes) + "]")
        if span.events:
            events = []
            for event in span.events:
                if type(event.timestamp) is not int or type(event.name) is not str:
                    return None
                fields = []
                if event.timestamp:
                    fields.append(f'"timeUnixNano":"{event.timestamp}"')
                if event.name:
                    fields.append('"name":' + _json_string(event.name))
                if event.attributes:
                    fields.append('"attributes":[' + _attributes_text(event.attributes) + "]")
                events.append("{" + ",".join(fields) + "}")
            append(',"events":[' + ",".join(events) + "]")
    except _NotText:
        return None
    description, code = status.description, status.status_code.value
    if type(code) is not int or (description is not None and type(description) is not str):
        return None
    if description and code:
        append(f',"status":{{"message":{_json_string(description)},"code":{code}}}')
    elif description:
        append(f',"status":{{"message":{_json_string(description)}}}')
    elif code:
        append(f',"status":{{"code":{code}}}')
    else:
        append(',"status":{}')
    append(f',"flags":{_FLAGS_HAS_IS_REMOTE}}}')
    return "".join(pieces)


def keyed_span_lines(events: list[Event | None], resource: Any) -> Iterator[tuple[SpanKey, bytes]]:
    """The spans of `events` (`events_from_rows` of whole executions) as compact JSON, each
    with its key; each event is let go (its place set to None) once recorded.

    Sorted by key, the lines of every part of a selection are the `spans` array of
    `spans_document` over the whole selection, with `resource` as its resource; see
    `span_document_frame`. Raises SpansNeedSdk where that document needs the SDK.
    """
    from executor.telemetry import TelemetryRecorder
    from executor.tracecontext import trace_id_for_execution

    if not plain_spans_possible():
        raise SpansNeedSdk
    provider = _PlainTracerProvider(resource)
    recorder = TelemetryRecorder(tracer_provider=provider)  # type: ignore[arg-type]
    finished = provider.finished
    open_tracks = recorder._executions  # the open executions, in the order they opened
    opened_at: dict[str, SpanKey] = {}
    try:
        for index, event in enumerate(events):
            if event is None:
                continue
            events[index] = None
            recorder.record(event)
            execution_id = getattr(event, "execution_id", None)
            key = (
                0,
                _event_time(event),
                _EVENT_ORDER[event.kind],
                _BACKOFF_PHASE_ORDER.get(getattr(event, "phase", ""), 0),
                execution_id,
                index,
            )
            if execution_id not in opened_at and execution_id in open_tracks:
                opened_at[execution_id] = key
            for sub, span in enumerate(finished):
                yield (*key, sub), _span_line(span)
            finished.clear()
        open_keys = {
            int(trace_id_for_execution(execution_id), 16): opened_at[execution_id]
            for execution_id in open_tracks
        }
        recorder.end_open_spans()
    except _NotPlain:
        raise SpansNeedSdk from None
    if recorder.failures:
        raise SpansNeedSdk  # the recorder swallowed an error: the SDK build decides
    for sub, span in enumerate(finished):
        opened = open_keys.get(span.context.trace_id)
        if opened is None:
            raise SpansNeedSdk
        yield (1, *opened, sub), _span_line(span)


def span_document_frame(resource: Any) -> dict[str, Any]:
    """The spans document with `resource` whose one span is `SPANS_MARKER`: where the sorted
    `keyed_span_lines` go, comma-separated. Raises SpansNeedSdk."""
    scope = _PlainTracerProvider(resource).scope
    try:
        return {"resourceSpans": [_resource_spans_json(resource, {scope: [SPANS_MARKER]})]}
    except _NotDirect:
        raise SpansNeedSdk from None
