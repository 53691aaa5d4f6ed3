"""Store rows back to the executor events they were folded from, and their OTLP spans."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
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
                decided_event = event_from_dict({
                    "kind": "attempt_decided",
                    **where,
                    "at": decided_at,
                    "dispatched": bool(row["dispatched"]),
                    "parameters": _loads(row["parameters"]) or {},
                    "decision": decision,
                })
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
    from executor.telemetry import build_spans_from_events, spans_to_otlp_json

    spans = build_spans_from_events(events_from_rows(rows))
    return spans_to_otlp_json(spans), len(spans)
