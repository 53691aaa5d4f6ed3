"""Executor events to store rows: segment encoding, set-based upserts, spool ingest, liveness.

Events travel as Arrow segments (one row per event: its JSON payload plus the exact request and
response bytes). Ingest decodes a batch of segments, folds the events into one row per key per
table (an attempt joins its dispatch, response and decision), and upserts each table with one
`INSERT ... SELECT ... ON CONFLICT` from an Arrow table, all in one transaction.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import logging
import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from executor.eventlog import event_fields
from executor.redact import Place, RedactionLevel, redact
from store.connection import StorePaths, first_line
from store.errors import StoreAccessError, StoreOpenError
from store.spool import (
    WriterIdentity,
    dead_writers,
    orphaned_leases,
    read_segment,
    ready_segments,
    reap_writer,
    remove_files,
    seal_orphaned_journals,
    set_aside_segment,
)

log = logging.getLogger(__name__)

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

SEGMENT_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("kind", pa.string()),
        ("execution_id", pa.string()),
        ("payload", pa.large_string()),
        ("request_body", pa.large_binary()),
        ("response_body", pa.large_binary()),
    ]
)
_BYTES_FIELDS = ("request_body", "response_body")
# One event as a segment row: seq, kind, execution id, JSON payload, request and response body.
SegmentRecord = tuple[int, str, str | None, str | None, bytes | None, bytes | None]
# Event fields holding a URL, whose userinfo and credential query parameters are redacted.
_URL_FIELDS = ("url", "base_url")
# Failure texts can quote a URL or a credential (`request failed: … api_key=…`).
_ERROR_TEXT_FIELDS = ("transport_error_message", "error")
# At most this many segment bytes go into one ingest transaction.
_MAX_INGEST_BYTES = 256 * 1024 * 1024

_JSON = pa.large_string()
_TEXT = pa.string()
_TIME = pa.float64()  # epoch seconds in staging; stored as TIMESTAMP (columns named *_at)
_BLOB = pa.large_binary()
_TEXT_LIST = pa.list_(pa.string())

_EXECUTIONS = pa.schema(
    [
        ("execution_id", _TEXT),
        ("status", _TEXT),
        ("started_at", _TIME),
        ("finished_at", _TIME),
        ("query", _TEXT),
        ("plan_path", _TEXT),
        ("stop_reason", _TEXT),
        ("incomplete_steps", _TEXT_LIST),
        ("llm_calls", pa.int32()),
        ("llm_total_tokens", pa.int64()),
        ("tool_version", _TEXT),
        ("writer_pid", pa.int32()),
        ("writer_host", _TEXT),
        ("writer_token", _TEXT),
        ("rerun_of", _TEXT),
    ]
)
_SNAPSHOTS = pa.schema(
    [
        ("execution_id", _TEXT),
        ("plan", _JSON),
        ("config", _JSON),
        ("config_sources", _JSON),
        ("llm", _JSON),
    ]
)
_STEPS = pa.schema(
    [
        ("execution_id", _TEXT),
        ("step_id", _TEXT),
        ("tool", _TEXT),
        ("capability", _TEXT),
        ("url", _TEXT),
        ("depends_on", _TEXT_LIST),
        ("parameters", _JSON),
        ("protected_keys", _JSON),
        ("orchestrator", pa.bool_()),
        ("side_effects", _TEXT),
        ("status", _TEXT),
        ("dispatch_count", pa.int32()),
        ("attempts", pa.int32()),
        ("validation_retries", pa.int32()),
        ("semantic_retries", pa.int32()),
        ("final_action", _TEXT),
        ("final_rule_id", _TEXT),
        ("error", _TEXT),
        ("result", _JSON),
        ("skip_reason", _TEXT),
        ("started_at", _TIME),
        ("finished_at", _TIME),
    ]
)
_ATTEMPTS = pa.schema(
    [
        ("execution_id", _TEXT),
        ("step_id", _TEXT),
        ("n", pa.int32()),
        ("attempt_number", pa.int32()),
        ("dispatched", pa.bool_()),
        ("parameters", _JSON),
        ("correction_layer", _TEXT),
        ("method", _TEXT),
        ("url", _TEXT),
        ("request_headers", _JSON),
        ("request_body", _BLOB),
        ("request_size", pa.int64()),
        ("status", pa.int32()),
        ("response_headers", _JSON),
        ("response_body", _BLOB),
        ("response_size", pa.int64()),
        ("transport_error", _TEXT),
        ("transport_error_message", _TEXT),
        ("elapsed_ms", pa.float64()),
        ("retry_policy", _TEXT),
        ("action", _TEXT),
        ("rule_id", _TEXT),
        ("reason", _TEXT),
        ("decision", _JSON),
        ("decision_layer", _TEXT),
        ("corrected_parameters", _JSON),
        ("delay_ms", pa.float64()),
        ("delay_source", _TEXT),
        ("started_at", _TIME),
        ("responded_at", _TIME),
        ("decided_at", _TIME),
        ("recovery", _TEXT),
        ("impact", _TEXT),
    ]
)
_LLM_CALLS = pa.schema(
    [
        ("call_id", _TEXT),
        ("execution_id", _TEXT),
        ("step_id", _TEXT),
        ("n", pa.int32()),
        ("site", _TEXT),
        ("model", _TEXT),
        ("base_url", _TEXT),
        ("temperature", pa.float64()),
        ("max_tokens", pa.int32()),
        ("messages", _JSON),
        ("request_body", _BLOB),
        ("request_size", pa.int64()),
        ("response_status", pa.int32()),
        ("response_body", _BLOB),
        ("response_size", pa.int64()),
        ("raw_text", pa.large_string()),
        ("parsed", _JSON),
        ("parse_error", _TEXT),
        ("error", _TEXT),
        ("prompt_tokens", pa.int32()),
        ("completion_tokens", pa.int32()),
        ("total_tokens", pa.int32()),
        ("latency_ms", pa.float64()),
        ("called_at", _TIME),
    ]
)
_EVENTS = pa.schema(
    [
        ("execution_id", _TEXT),
        ("step_id", _TEXT),
        ("n", pa.int32()),
        ("seq", pa.int64()),
        ("writer_token", _TEXT),
        ("occurred_at", _TIME),
        ("kind", _TEXT),
        ("name", _TEXT),
        ("message", _TEXT),
        ("attrs", _JSON),
    ]
)


# ---------------------------------------------------------------------------------------------
# Encoding (recorder side)
# ---------------------------------------------------------------------------------------------


def json_text(value: Any) -> str | None:
    """`value` as JSON text that DuckDB accepts; None for None.

    Bytes become base64 text, NaN and infinities null, lone surrogates (not Unicode) U+FFFD,
    and any other unknown value its str().
    """
    if value is None:
        return None
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=_json_default)
    except ValueError:
        text = json.dumps(_finite(value), ensure_ascii=False, default=_json_default)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _LONE_SURROGATE.sub("\ufffd", text)
    return text


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def _finite(value: Any) -> Any:
    """A copy of a JSON-able value with NaN and infinities replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8", "surrogatepass")


def _event_fields(event: Any) -> dict[str, Any]:
    """The event's fields by name, as the policy's AT_REST level keeps them: headers, URLs,
    failure texts, LLM settings and the plan's credentials redacted; bodies untouched."""
    values = event_fields(event, omit=_BYTES_FIELDS)
    at_rest = RedactionLevel.AT_REST
    for place, names in ((Place.URL, _URL_FIELDS), (Place.ERROR_TEXT, _ERROR_TEXT_FIELDS)):
        for name in names:
            if isinstance(values.get(name), str):
                values[name] = redact(at_rest, place, values[name])
    for header_field in ("request_headers", "response_headers"):
        headers = values.get(header_field)
        if isinstance(headers, dict):
            values[header_field] = redact(
                at_rest, Place.HEADERS, {str(k): str(v) for k, v in headers.items()}
            )
    if values.get("llm") is not None:
        values["llm"] = redact(at_rest, Place.LLM_SETTINGS, values["llm"])
    if isinstance(values.get("plan"), dict):
        values["plan"] = redact(at_rest, Place.PLAN, values["plan"])
    return values


def encode_records(events: Sequence[Any], first_seq: int) -> list[SegmentRecord]:
    """One segment record per event, numbered from `first_seq`: (seq, kind, execution id,
    JSON payload, request body, response body)."""
    records = []
    for offset, event in enumerate(events):
        kind = str(getattr(event, "kind", type(event).__name__))
        try:
            payload = json_text(_event_fields(event))
            request_body = _as_bytes(getattr(event, "request_body", None))
            response_body = _as_bytes(getattr(event, "response_body", None))
        except Exception as error:  # an event that cannot be encoded is kept as a notice
            payload = json_text(
                {"message": f"event {type(event).__name__} could not be encoded: {error!r}"}
            )
            kind, request_body, response_body = "unencodable_event", None, None
        execution_id = getattr(event, "execution_id", None)
        records.append(
            (first_seq + offset, kind, execution_id, payload, request_body, response_body)
        )
    return records


def encode_events(events: Sequence[Any], first_seq: int, writer: WriterIdentity) -> pa.Table:
    """One segment table for `events`, numbered from `first_seq`, tagged with the writer."""
    return records_table(encode_records(events, first_seq), writer)


def records_table(records: Sequence[SegmentRecord], writer: WriterIdentity | None) -> pa.Table:
    """The segment table of `records`, tagged with the writer when known."""
    columns = list(zip(*records, strict=True)) if records else [()] * len(SEGMENT_SCHEMA)
    arrays = [
        pa.array(column, type=item.type)
        for column, item in zip(columns, SEGMENT_SCHEMA, strict=True)
    ]
    table = pa.Table.from_arrays(arrays, schema=SEGMENT_SCHEMA)
    if writer is None:
        return table
    return table.replace_schema_metadata(writer.to_metadata())


# ---------------------------------------------------------------------------------------------
# Folding events into rows
# ---------------------------------------------------------------------------------------------


def _merge(target: dict[str, Any], updates: dict[str, Any]) -> None:
    """Set each non-None value of `updates` on `target` (later events win)."""
    for key, value in updates.items():
        if value is not None:
            target[key] = value


def _size(body: bytes | None) -> int | None:
    return None if body is None else len(body)


@dataclass(slots=True)
class _Rows:
    """Rows for each table, keyed so that events about the same row fold together."""

    executions: dict[str, dict[str, Any]] = field(default_factory=dict)
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)
    steps: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    attempts: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    llm_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)

    def execution(self, execution_id: str) -> dict[str, Any]:
        return self.executions.setdefault(execution_id, {"execution_id": execution_id})

    def step(self, execution_id: str, step_id: str) -> dict[str, Any]:
        key = (execution_id, step_id)
        return self.steps.setdefault(key, {"execution_id": execution_id, "step_id": step_id})

    def attempt(self, execution_id: str, step_id: str, n: int) -> dict[str, Any]:
        key = (execution_id, step_id, n)
        return self.attempts.setdefault(
            key, {"execution_id": execution_id, "step_id": step_id, "n": n}
        )

    def add(self, kind: str, seq: int, data: dict[str, Any], writer: WriterIdentity | None) -> None:
        """Fold one decoded event into the rows."""
        folder = _FOLDERS.get(kind, _fold_other)
        folder(self, seq, data, writer)


def _fold_execution_started(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    execution_id = data["execution_id"]
    _merge(
        rows.execution(execution_id),
        {
            "status": "running",
            "started_at": data.get("started_at"),
            "query": data.get("query"),
            "plan_path": data.get("plan_path"),
            "tool_version": data.get("tool_version"),
            "writer_pid": writer.pid if writer else None,
            "writer_host": writer.host if writer else None,
            "writer_token": writer.token if writer else None,
            "rerun_of": data.get("rerun_of"),
        },
    )
    rows.snapshots[execution_id] = {
        "execution_id": execution_id,
        "plan": json_text(data.get("plan")),
        "config": json_text(data.get("config")),
        "config_sources": json_text(data.get("config_sources")),
        "llm": json_text(data.get("llm")),
    }


def _fold_execution_finished(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    _merge(
        rows.execution(data["execution_id"]),
        {
            "status": data.get("status"),
            "finished_at": data.get("finished_at"),
            "stop_reason": data.get("stop_reason"),
            "incomplete_steps": list(data.get("incomplete_steps") or []),
            "llm_calls": data.get("llm_calls"),
            "llm_total_tokens": data.get("llm_total_tokens"),
        },
    )


def _fold_step_started(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    _merge(
        rows.step(data["execution_id"], data["step_id"]),
        {
            "status": "running",
            "started_at": data.get("started_at"),
            "tool": data.get("tool"),
            "capability": data.get("capability"),
            "url": data.get("url"),
            "depends_on": list(data.get("depends_on") or []),
            "parameters": json_text(data.get("parameters")),
            "protected_keys": json_text(data.get("protected_keys")),
            "orchestrator": data.get("orchestrator"),
            "side_effects": data.get("side_effects"),
        },
    )


def _fold_step_finished(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    _merge(
        rows.step(data["execution_id"], data["step_id"]),
        {
            "status": data.get("status"),
            "finished_at": data.get("finished_at"),
            "dispatch_count": data.get("dispatch_count"),
            "attempts": data.get("attempts"),
            "validation_retries": data.get("validation_retries"),
            "semantic_retries": data.get("semantic_retries"),
            "final_action": data.get("final_action"),
            "final_rule_id": data.get("final_rule_id"),
            "error": data.get("error"),
            "result": json_text(data.get("result")),
            "skip_reason": data.get("skip_reason"),
        },
    )


def _fold_attempt_dispatched(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    body = data.get("request_body")
    _merge(
        rows.attempt(data["execution_id"], data["step_id"], data["n"]),
        {
            "attempt_number": data.get("attempt_number"),
            "dispatched": True,
            "parameters": json_text(data.get("parameters")),
            "correction_layer": data.get("correction_layer"),
            "method": data.get("method"),
            "url": data.get("url"),
            "request_headers": json_text(data.get("request_headers")),
            "request_body": body,
            "request_size": _size(body),
            "started_at": data.get("at"),
        },
    )


def _fold_attempt_responded(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    body = data.get("response_body")
    _merge(
        rows.attempt(data["execution_id"], data["step_id"], data["n"]),
        {
            "status": data.get("status"),
            "response_headers": json_text(data.get("response_headers")),
            "response_body": body,
            "response_size": _size(body),
            "transport_error": data.get("transport_error"),
            "transport_error_message": data.get("transport_error_message"),
            "elapsed_ms": data.get("elapsed_ms"),
            "retry_policy": data.get("retry_policy"),
            "responded_at": data.get("at"),
        },
    )


def _fold_attempt_decided(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    decision = data.get("decision") or {}
    inputs = decision.get("inputs") or {}
    dispatched = bool(data.get("dispatched"))
    row = rows.attempt(data["execution_id"], data["step_id"], data["n"])
    _merge(
        row,
        {
            "dispatched": dispatched,
            # A dispatched attempt keeps the parameters it was sent with.
            "parameters": None if dispatched else json_text(data.get("parameters")),
            "attempt_number": None if dispatched else inputs.get("attempt_number"),
            "action": decision.get("action"),
            "rule_id": decision.get("rule_id"),
            "reason": decision.get("reason"),
            "decision": json_text(decision),
            "decision_layer": _none_if_text_none(decision.get("layer")),
            "corrected_parameters": json_text(decision.get("corrected_parameters")),
            "delay_ms": decision.get("delay_ms"),
            "delay_source": decision.get("delay_source"),
            "decided_at": data.get("at"),
            "recovery": decision.get("recovery"),
            "impact": decision.get("impact"),
        },
    )
    if not dispatched:
        row.setdefault("started_at", data.get("at"))


def _none_if_text_none(value: Any) -> Any:
    """`Decision.to_dict()` writes a missing layer as the text "None"."""
    return None if value in (None, "None", "") else value


def _fold_llm_call(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    request_body = data.get("request_body")
    response_body = data.get("response_body")
    # llm_debug_enabled false: the text was not recorded, so its columns stay NULL.
    text_recorded = data.get("text_recorded", True) is not False
    if not text_recorded:
        request_body = response_body = None
    rows.llm_calls[data["call_id"]] = {
        "call_id": data["call_id"],
        "execution_id": data.get("execution_id"),
        "step_id": data.get("step_id"),
        "n": data.get("n"),
        "site": data.get("site"),
        "model": data.get("model"),
        "base_url": data.get("base_url"),
        "temperature": data.get("temperature"),
        "max_tokens": data.get("max_tokens"),
        "messages": json_text(data.get("messages")) if text_recorded else None,
        "request_body": request_body,
        "request_size": _size(request_body),
        "response_status": data.get("response_status"),
        "response_body": response_body,
        "response_size": _size(response_body),
        "raw_text": _valid_text(data.get("raw_text")) if text_recorded else None,
        "parsed": json_text(data.get("parsed")),
        "parse_error": data.get("parse_error"),
        "error": data.get("error"),
        "prompt_tokens": data.get("prompt_tokens"),
        "completion_tokens": data.get("completion_tokens"),
        "total_tokens": data.get("total_tokens"),
        "latency_ms": data.get("latency_ms"),
        "called_at": data.get("at"),
    }


def _valid_text(value: str | None) -> str | None:
    """Text that encodes as UTF-8 (lone surrogates become escapes); the body has the exact bytes."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _event_row(
    seq: int,
    data: dict[str, Any],
    writer: WriterIdentity | None,
    *,
    kind: str,
    name: str,
    message: str,
    attrs: dict[str, Any],
) -> dict[str, Any]:
    return {
        "execution_id": data.get("execution_id"),
        "step_id": data.get("step_id"),
        "n": data.get("n"),
        "seq": seq,
        "writer_token": writer.token if writer else None,
        "occurred_at": data.get("at"),
        "kind": kind,
        "name": name,
        "message": message,
        "attrs": json_text(attrs),
    }


def _fold_parameters_coerced(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    coercions = list(data.get("coercions") or [])
    keys = ", ".join(str(item.get("key", "?")) for item in coercions if isinstance(item, dict))
    rows.events.append(
        _event_row(
            seq,
            data,
            writer,
            kind="coercion",
            name="parameters_coerced",
            message=f"schema coercion changed {keys or 'parameters'}",
            attrs={"coercions": coercions},
        )
    )


def _fold_backoff(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    phase = str(data.get("phase"))
    planned_ms = data.get("planned_ms")
    actual_ms = data.get("actual_ms")
    source = data.get("source")
    message = f"backoff {phase}: planned {planned_ms} ms ({source})"
    if actual_ms is not None:
        message += f", waited {actual_ms} ms"
    rows.events.append(
        _event_row(
            seq,
            data,
            writer,
            kind="backoff",
            name=phase,
            message=message,
            attrs={"planned_ms": planned_ms, "actual_ms": actual_ms, "source": source},
        )
    )


def _fold_notice(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    rows.events.append(
        _event_row(
            seq,
            data,
            writer,
            kind="notice",
            name=str(data.get("name")),
            message=str(data.get("message") or ""),
            attrs=dict(data.get("attrs") or {}),
        )
    )


def _fold_circuit(
    rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    from_state, to_state = data.get("from_state"), data.get("to_state")
    rows.events.append(
        _event_row(
            seq,
            data,
            writer,
            kind="circuit",
            name=f"{from_state}->{to_state}",
            message=str(data.get("reason") or ""),
            attrs={"breaker": data.get("breaker"), "from_state": from_state, "to_state": to_state},
        )
    )


def _fold_other(rows: _Rows, seq: int, data: dict[str, Any], writer: WriterIdentity | None) -> None:
    kind = str(data.get("_kind", "unknown"))
    rows.events.append(
        _event_row(
            seq,
            data,
            writer,
            kind=kind,
            name=kind,
            message=str(data.get("message") or ""),
            attrs={
                key: value
                for key, value in data.items()
                if key not in _BYTES_FIELDS and key != "_kind"
            },
        )
    )


_FOLDERS = {
    "execution_started": _fold_execution_started,
    "execution_finished": _fold_execution_finished,
    "step_started": _fold_step_started,
    "step_finished": _fold_step_finished,
    "attempt_dispatched": _fold_attempt_dispatched,
    "attempt_responded": _fold_attempt_responded,
    "attempt_decided": _fold_attempt_decided,
    "llm_call": _fold_llm_call,
    "parameters_coerced": _fold_parameters_coerced,
    "backoff": _fold_backoff,
    "notice": _fold_notice,
    "circuit_state_changed": _fold_circuit,
}


def fold_segments(tables: Iterable[pa.Table]) -> _Rows:
    """Decode segment tables in order and fold their events into rows."""
    rows = _Rows()
    for table in tables:
        writer = WriterIdentity.from_metadata(table.schema.metadata)
        for record in table.to_pylist():
            data = json.loads(record["payload"]) if record["payload"] else {}
            data["_kind"] = record["kind"]
            data.setdefault("execution_id", record["execution_id"])
            for body_field in _BYTES_FIELDS:
                if record[body_field] is not None:
                    data[body_field] = record[body_field]
            rows.add(record["kind"], record["seq"], data, writer)
    return rows


# ---------------------------------------------------------------------------------------------
# Writing rows
# ---------------------------------------------------------------------------------------------


def _select_expression(column: str) -> str:
    if column.endswith("_at"):
        return f"make_timestamp(CAST(round({column} * 1000000) AS BIGINT)) AS {column}"
    return column


@dataclass(frozen=True, slots=True)
class _StagedInsert:
    """One `INSERT ... SELECT` of a table's rows, from an Arrow table built before the write."""

    table_name: str
    sql: str
    staging: pa.Table


def _stage_table(
    table_name: str,
    schema: pa.Schema,
    rows: Iterable[dict[str, Any]],
    *,
    key: tuple[str, ...] = (),
    on_conflict: str = "",
    overrides: dict[str, str] | None = None,
) -> _StagedInsert | None:
    """The insert of `rows` into `table_name` as one statement; None for no rows.

    `on_conflict` is "" (plain insert), "ignore", or "merge" (non-null new values win).
    """
    row_list = list(rows)
    if not row_list:
        return None
    staging = pa.Table.from_pylist(row_list, schema=schema)
    columns = schema.names
    sql = (
        f"INSERT INTO {table_name} ({', '.join(columns)}) "
        f"SELECT {', '.join(_select_expression(c) for c in columns)} FROM staging_{table_name}"
    )
    if on_conflict == "ignore":
        sql += " ON CONFLICT DO NOTHING"
    elif on_conflict == "merge":
        overrides = overrides or {}
        assignments = [
            f"{c} = {overrides.get(c, f'COALESCE(excluded.{c}, {c})')}"
            for c in columns
            if c not in key
        ]
        sql += f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {', '.join(assignments)}"
    return _StagedInsert(table_name, sql, staging)


def _run_staged(conn: duckdb.DuckDBPyConnection, insert: _StagedInsert) -> None:
    view_name = f"staging_{insert.table_name}"
    conn.register(view_name, insert.staging)
    try:
        conn.execute(insert.sql)
    finally:
        # An aborted transaction refuses the unregister; the next register replaces the view.
        with contextlib.suppress(duckdb.Error):
            conn.unregister(view_name)


_UNPLANNED_STEPS = """
SELECT execution_id, step_id FROM steps
WHERE tool IS NULL AND list_contains($execution_ids, execution_id)
"""

_FILL_STEPS_FROM_PLAN = """
UPDATE steps SET
    tool = planned.tool,
    capability = planned.capability,
    depends_on = planned.depends_on,
    parameters = coalesce(steps.parameters, planned.parameters)
FROM staging_planned_steps AS planned
WHERE steps.tool IS NULL
    AND steps.execution_id = planned.execution_id
    AND steps.step_id = planned.step_id
"""

_PLANNED_STEPS = pa.schema(
    [
        ("execution_id", _TEXT),
        ("step_id", _TEXT),
        ("tool", _TEXT),
        ("capability", _TEXT),
        ("depends_on", _TEXT_LIST),
        ("parameters", _JSON),
    ]
)


def _fill_steps_from_plan(conn: duckdb.DuckDBPyConnection, execution_ids: Sequence[str]) -> None:
    """Give steps that never started (skipped) their tool, capability and bindings from the plan.

    Only the plans of executions with such steps are read, so a long plan is not re-parsed on
    every ingest.
    """
    wanted: dict[str, set[str]] = {}
    for execution_id, step_id in conn.execute(
        _UNPLANNED_STEPS, {"execution_ids": list(execution_ids)}
    ).fetchall():
        wanted.setdefault(execution_id, set()).add(step_id)
    if not wanted:
        return
    planned = _planned_steps(conn, wanted)
    if planned:
        staging = pa.Table.from_pylist(planned, schema=_PLANNED_STEPS)
        _run_staged(conn, _StagedInsert("planned_steps", _FILL_STEPS_FROM_PLAN, staging))


def _planned_steps(
    conn: duckdb.DuckDBPyConnection, wanted: dict[str, set[str]]
) -> list[dict[str, Any]]:
    """The plan entries of the `wanted` steps, by execution, read from the plan snapshots."""
    planned = []
    for execution_id, plan_text in conn.execute(
        "SELECT execution_id, CAST(plan AS VARCHAR) FROM execution_snapshots "
        "WHERE list_contains($ids, execution_id)",
        {"ids": sorted(wanted)},
    ).fetchall():
        try:
            steps = json.loads(plan_text or "{}").get("steps") or []
        except (ValueError, AttributeError):
            continue
        for step in steps:
            if not isinstance(step, dict) or step.get("id") not in wanted[execution_id]:
                continue
            depends_on = step.get("depends_on") or []
            planned.append(
                {
                    "execution_id": execution_id,
                    "step_id": step["id"],
                    "tool": _text_or_none(step.get("tool")),
                    "capability": _text_or_none(step.get("capability")),
                    "depends_on": [str(item) for item in depends_on]
                    if isinstance(depends_on, list)
                    else [],
                    "parameters": json_text(step.get("parameters")),
                }
            )
    return planned


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True, slots=True)
class StagedRows:
    """Folded rows ready to write: every Arrow table built, so writing runs only SQL."""

    inserts: tuple[_StagedInsert, ...]
    step_execution_ids: tuple[str, ...]


class SegmentDecodeError(Exception):
    """A batch of segments holds events that cannot be decoded into rows; the batch is at fault."""


def stage_rows(rows: _Rows) -> StagedRows:
    """Build the Arrow tables that `write_staged` inserts into every table."""
    inserts = (
        _stage_table(
            "executions",
            _EXECUTIONS,
            rows.executions.values(),
            key=("execution_id",),
            on_conflict="merge",
            # A finish states its stop reason and incomplete steps, even when they are empty.
            overrides={
                "stop_reason": "CASE WHEN excluded.finished_at IS NOT NULL "
                "THEN excluded.stop_reason ELSE stop_reason END",
            },
        ),
        _stage_table(
            "execution_snapshots", _SNAPSHOTS, rows.snapshots.values(), on_conflict="ignore"
        ),
        _stage_table(
            "steps",
            _STEPS,
            rows.steps.values(),
            key=("execution_id", "step_id"),
            on_conflict="merge",
        ),
        _stage_table(
            "attempts",
            _ATTEMPTS,
            rows.attempts.values(),
            key=("execution_id", "step_id", "n"),
            on_conflict="merge",
        ),
        _stage_table("llm_calls", _LLM_CALLS, rows.llm_calls.values(), on_conflict="ignore"),
        _stage_table("events", _EVENTS, rows.events),
    )
    return StagedRows(
        inserts=tuple(insert for insert in inserts if insert is not None),
        step_execution_ids=tuple(sorted({execution_id for execution_id, _ in rows.steps})),
    )


def write_staged(conn: duckdb.DuckDBPyConnection, staged: StagedRows) -> None:
    """Upsert staged rows into every table (the caller owns the transaction)."""
    for insert in staged.inserts:
        _run_staged(conn, insert)
    if staged.step_execution_ids:
        _fill_steps_from_plan(conn, staged.step_execution_ids)


def decode_segments(tables: Sequence[pa.Table]) -> StagedRows:
    """Fold and stage the events of segment tables; SegmentDecodeError when they do not decode."""
    try:
        return stage_rows(fold_segments(tables))
    except MemoryError:
        raise
    except Exception as error:  # any failure to decode is the segments' fault, not the store's
        raise SegmentDecodeError(f"{type(error).__name__}: {error}") from error


def apply_segments(
    conn: duckdb.DuckDBPyConnection,
    tables: Sequence[pa.Table],
    *,
    segment_names: Sequence[str] = (),
) -> None:
    """Write the events of `tables` in one transaction, recording `segment_names` as ingested.

    Raises SegmentDecodeError before touching the database when the events do not decode, and
    the DuckDB error when the write fails (the transaction is then rolled back).
    """
    staged = decode_segments(tables)
    conn.execute("BEGIN TRANSACTION")
    try:
        write_staged(conn, staged)
        if segment_names:
            conn.execute(
                "INSERT INTO ingested_segments "
                "SELECT unnest($names), make_timestamp(CAST($now * 1000000 AS BIGINT))",
                {"names": list(segment_names), "now": time.time()},
            )
        conn.execute("COMMIT")
    except BaseException:
        # A failed COMMIT has already rolled back; the original error is the one to report.
        with contextlib.suppress(duckdb.Error):
            conn.execute("ROLLBACK")
        raise


# ---------------------------------------------------------------------------------------------
# Spool ingest and liveness
# ---------------------------------------------------------------------------------------------


# DuckDB errors caused by a segment's values rather than by the database or the machine.
_SEGMENT_DATA_ERRORS = (duckdb.DataError, duckdb.IntegrityError)
_SEGMENT_FAULTS = (SegmentDecodeError, *_SEGMENT_DATA_ERRORS)


def ingest_spool(conn: duckdb.DuckDBPyConnection, paths: StorePaths) -> int:
    """Ingest every ready spool segment, oldest first; return how many were written.

    A segment already recorded in `ingested_segments` (its delete was lost) is only deleted.
    A segment whose bytes are not an Arrow file, or whose events do not decode or fit their
    columns, is renamed `*.failed` and kept. Any other DuckDB failure (I/O, a full disk, out of
    memory) stops the ingest with StoreAccessError and leaves every segment not yet written in
    the spool for the next session.
    """
    segments = ready_segments(paths)
    if not segments:
        return 0
    done = {
        row[0]
        for row in conn.execute(
            "SELECT segment FROM ingested_segments WHERE list_contains($names, segment)",
            {"names": [path.name for path in segments]},
        ).fetchall()
    }
    _forget_segments(conn, [path for path in segments if path.name in done])
    pending = [path for path in segments if path.name not in done]
    written = 0
    for group in _groups_by_size(pending):
        loaded = _load_segments(group)
        try:
            apply_segments(conn, [table for _, table in loaded], segment_names=_names(loaded))
        except (*_SEGMENT_FAULTS, duckdb.OutOfMemoryException) as error:
            # One bad segment must not stop every reader, nor one batch too big for memory.
            log.warning("ingesting %d spool segments together failed (%s)", len(loaded), error)
            loaded = _apply_one_by_one(conn, paths, loaded)
        except duckdb.Error as error:
            raise _ingest_failed(paths, error) from error
        written += len(loaded)
        _forget_segments(conn, [path for path, _ in loaded])
    return written


def _ingest_failed(paths: StorePaths, error: duckdb.Error) -> StoreAccessError:
    kept = len(ready_segments(paths))
    return StoreAccessError(
        f"{paths.label}: cannot ingest the spool ({first_line(error)}); its {kept} "
        f"segment(s) are kept in {paths.segments} for the next try"
    )


def _names(loaded: Sequence[tuple[Path, pa.Table]]) -> list[str]:
    return [path.name for path, _ in loaded]


def _groups_by_size(segments: Sequence[Path]) -> Iterable[list[Path]]:
    group: list[Path] = []
    group_bytes = 0
    for path in segments:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        if group and group_bytes + size > _MAX_INGEST_BYTES:
            yield group
            group, group_bytes = [], 0
        group.append(path)
        group_bytes += size
    if group:
        yield group


def _load_segments(paths: Sequence[Path]) -> list[tuple[Path, pa.Table]]:
    """The segments' tables. One that is not an Arrow file is set aside; an OSError is raised."""
    loaded = []
    for path in paths:
        try:
            loaded.append((path, read_segment(path)))
        except FileNotFoundError:
            continue  # another thread of this process already ingested it
        except pa.ArrowException as error:
            log.warning("spool segment %s is unreadable (%s); kept as .failed", path, error)
            set_aside_segment(path)
    return loaded


def _apply_one_by_one(
    conn: duckdb.DuckDBPyConnection, paths: StorePaths, loaded: Sequence[tuple[Path, pa.Table]]
) -> list[tuple[Path, pa.Table]]:
    """Apply segments singly, setting aside the faulty ones; stop at any other DuckDB error.

    Segments applied before such a stop are in `ingested_segments`, so the next session only
    deletes them.
    """
    applied = []
    for path, table in loaded:
        try:
            apply_segments(conn, [table], segment_names=[path.name])
        except _SEGMENT_FAULTS as error:
            log.warning("spool segment %s cannot be ingested (%s); kept as .failed", path, error)
            set_aside_segment(path)
            continue
        except duckdb.Error as error:
            raise _ingest_failed(paths, error) from error
        applied.append((path, table))
    return applied


def _forget_segments(conn: duckdb.DuckDBPyConnection, segments: Sequence[Path]) -> None:
    """Delete ingested segment files, then the `ingested_segments` rows of those now gone."""
    if not segments:
        return
    gone = remove_files(segments)
    if gone:
        conn.execute(
            "DELETE FROM ingested_segments WHERE list_contains($names, segment)",
            {"names": [path.name for path in gone]},
        )


_MARK_INTERRUPTED = """
UPDATE executions SET
    status = 'interrupted',
    finished_at = coalesce(activity.last_at, executions.started_at),
    stop_reason = coalesce(
        executions.stop_reason,
        'the recorder (pid ' || coalesce(CAST(executions.writer_pid AS VARCHAR), '?')
            || ' on ' || coalesce(executions.writer_host, '?')
            || ') stopped before the execution finished'
    )
FROM (
    SELECT target.execution_id, max(activity_at) AS last_at
    FROM (SELECT unnest($execution_ids) AS execution_id) AS target
    LEFT JOIN (
        SELECT execution_id, greatest(started_at, finished_at) AS activity_at FROM steps
        UNION ALL
        SELECT execution_id, greatest(started_at, responded_at, decided_at) FROM attempts
        UNION ALL
        SELECT execution_id, called_at FROM llm_calls
        UNION ALL
        SELECT execution_id, occurred_at FROM events
    ) AS recorded USING (execution_id)
    GROUP BY target.execution_id
) AS activity
WHERE executions.execution_id = activity.execution_id
"""


def mark_interrupted(conn: duckdb.DuckDBPyConnection, writer_tokens: set[str | None]) -> list[str]:
    """Mark running executions of the given dead writers (None: unknown writer) interrupted."""
    tokens = sorted(token for token in writer_tokens if token is not None)
    execution_ids = [
        row[0]
        for row in conn.execute(
            "SELECT execution_id FROM executions WHERE status = 'running' "
            "AND (list_contains($tokens, writer_token) OR ($unknown AND writer_token IS NULL))",
            {"tokens": tokens, "unknown": None in writer_tokens},
        ).fetchall()
    ]
    if not execution_ids:
        return []
    conn.execute("BEGIN TRANSACTION")
    try:
        conn.execute(_MARK_INTERRUPTED, {"execution_ids": execution_ids})
        conn.execute(
            "UPDATE steps SET status = 'interrupted' "
            "WHERE status = 'running' AND list_contains($execution_ids, execution_id)",
            {"execution_ids": execution_ids},
        )
        conn.execute("COMMIT")
    except BaseException:
        # A failed COMMIT has already rolled back; the original error is the one to report.
        with contextlib.suppress(duckdb.Error):
            conn.execute("ROLLBACK")
        raise
    return execution_ids


def maintain(conn: duckdb.DuckDBPyConnection, paths: StorePaths) -> None:
    """Bring the database up to date: ingest the spool, then mark dead writers' runs interrupted.

    Writers already known are checked before ingesting, so every segment they renamed is in by
    the time their unfinished executions are marked. Writers first seen in this ingest are
    checked after it; one that died in between may be marked too early, and its finish, ingested
    on the next open, overrides `interrupted`. A spool that cannot be used (not a directory, no
    permission) raises StoreOpenError naming it; a failed ingest raises StoreAccessError.
    """
    try:
        _maintain(conn, paths)
    except OSError as error:
        where = error.filename or paths.spool
        raise StoreOpenError(
            f"{paths.label}: cannot use its spool: {where}: {error.strerror or error}"
        ) from error


def _maintain(conn: duckdb.DuckDBPyConnection, paths: StorePaths) -> None:
    known_tokens = _running_writer_tokens(conn)
    dead = dead_writers(paths, known_tokens) | set(orphaned_leases(paths))
    dead |= seal_orphaned_journals(paths)  # a killed writer's journal is all it left
    if ingest_spool(conn, paths):
        new_tokens = _running_writer_tokens(conn) - known_tokens
        dead |= dead_writers(paths, new_tokens)
    if dead:
        mark_interrupted(conn, dead)
        for token in dead:
            if token is not None:
                reap_writer(paths, token)


def _running_writer_tokens(conn: duckdb.DuckDBPyConnection) -> set[str | None]:
    return {
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT writer_token FROM executions WHERE status = 'running'"
        ).fetchall()
    }
