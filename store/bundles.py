"""Trace bundles: executions' store rows, their OTLP spans and a manifest in one zip file.

`export_bundle` reads the rows of chosen executions in one short session, redacts secrets (by
default), rebuilds the spans from the rows and writes the zip atomically. `read_bundle`
validates a bundle completely without touching any store; `import_bundle` then writes its rows
in one transaction, skipping executions already present with identical rows. The format is
described member by member in docs/bundles.md.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import contextlib
import functools
import hashlib
import json
import math
import os
import re
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from executor import __version__
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
from executor.redact import REDACTED, Place, RedactionLevel, redact
from executor.redact import redact_body as redact_body  # public here too: export's body rule
from store.connection import DEFAULT_LOCK_TIMEOUT_S, store_paths
from store.errors import StoreError
from store.queries import Store, open_store
from store.schema import MIGRATIONS, SCHEMA_VERSION, STORE_TABLES

BUNDLE_FORMAT = "truva-bundle"
BUNDLE_VERSION = 1
MANIFEST_MEMBER = "manifest.json"
README_MEMBER = "README.txt"
SPANS_MEMBER = "spans.otlp.json"
TABLES_FOLDER = "tables"

_MIB = 1024 * 1024
_READ_CHUNK = _MIB
# Import writes rows in batches of at most this many rows or bytes.
_INSERT_ROWS = 2_000
_INSERT_BYTES = 4 * _MIB
_FETCH_ROWS = 1_000
_IMPORT_MEMORY_LIMIT = 64 * _MIB
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_TIMESTAMP_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?$")
_DRIVE_LETTER = re.compile(r"^[A-Za-z]:")
_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
# Non-finite DOUBLE values are written as these strings; JSON has no token for them.
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_FINISHED_STATUSES = frozenset({"succeeded", "partial", "failed", "cancelled", "interrupted"})

_README = """\
A truva-console trace bundle (format truva-bundle, version 1): recorded executions of AI-agent
tool calls, with every attempt, routing decision, backoff wait and LLM call.

  manifest.json      what is inside: versions, execution ids, redaction, tables with their
                     columns, and the size and SHA-256 of every other member
  tables/*.jsonl     the debug store's rows for these executions, one JSON object per line;
                     BLOB columns are base64, JSON columns are JSON text, TIMESTAMPs are UTC
                     text 'YYYY-MM-DD HH:MM:SS.ffffff'
  spans.otlp.json    the executions as OpenTelemetry spans (an OTLP/JSON
                     ExportTraceServiceRequest)

Load it into a store with:  truva-console import BUNDLE
Read it without truva-console:
  unzip -p BUNDLE tables/attempts.jsonl | jq -r '[.step_id, .n, .status, .rule_id] | @tsv'
See docs/bundles.md in truva-console for every member and column.
"""


class BundleError(StoreError):
    """A bundle that cannot be imported; nothing was written. The message names file and problem."""


class BundleConflictError(BundleError):
    """The store already holds an execution of the bundle with different rows."""


class BundleExportError(StoreError):
    """The executions cannot be exported to the requested file; nothing was written."""


@dataclass(frozen=True, slots=True)
class BundleLimits:
    """Bounds a bundle must stay within to be read.

    Uncompressed bytes in all (absolutely, and relative to the archive's size), members, the
    manifest's size, and one row's (or one span's) length, which bounds import memory.
    """

    max_total_bytes: int = 2 * 1024 * _MIB
    max_ratio: int = 200
    ratio_floor_bytes: int = 64 * _MIB
    max_members: int = 10_000
    max_manifest_bytes: int = 16 * _MIB
    max_line_bytes: int = 64 * _MIB


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One store column: name, DuckDB type, and whether it may be null."""

    name: str
    type: str
    nullable: bool


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One store table as a bundle carries it: columns in order and its primary key."""

    name: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]

    @property
    def member(self) -> str:
        """The bundle member holding this table's rows."""
        return f"{TABLES_FOLDER}/{self.name}.jsonl"

    @property
    def column_names(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(column.name for column in self.columns)


@dataclass(frozen=True, slots=True)
class Bundle:
    """A validated bundle: its manifest and the rows of every table, ready to write.

    Rows are dicts of raw values: BLOB as bytes, JSON and TIMESTAMP as their text, DOUBLE as
    float, lists as lists.
    """

    path: Path
    manifest: Mapping[str, Any]
    execution_ids: tuple[str, ...]
    redacted: bool
    tool_version: str
    created_at: str
    rows: Mapping[str, tuple[dict[str, Any], ...]]
    span_count: int


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What `export_bundle` wrote."""

    path: Path
    execution_ids: tuple[str, ...]
    skipped_running: tuple[str, ...]
    redacted: bool
    size_bytes: int
    row_counts: Mapping[str, int]
    span_count: int


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What `import_bundle` did with each execution of the bundle."""

    bundle: Path
    db: Path
    imported: tuple[str, ...]
    skipped: tuple[str, ...]
    replaced: tuple[str, ...]
    row_counts: Mapping[str, int]
    redacted: bool
    tool_version: str


# ---------------------------------------------------------------------------------------------
# The store's tables, read from the schema itself
# ---------------------------------------------------------------------------------------------


@functools.cache
def store_table_specs(version: int = SCHEMA_VERSION) -> tuple[TableSpec, ...]:
    """The bundled tables of store schema `version`, from an in-memory copy of that schema."""
    conn = duckdb.connect(":memory:")
    try:
        for migration in MIGRATIONS:
            if migration.version <= version:
                for statement in migration.statements:
                    conn.execute(statement)
        specs = []
        for table in STORE_TABLES:
            columns = tuple(
                ColumnSpec(name=name, type=data_type, nullable=bool(nullable))
                for name, data_type, nullable in conn.execute(
                    "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
                    "WHERE table_name = $table AND database_name = current_database() "
                    "ORDER BY column_index",
                    {"table": table},
                ).fetchall()
            )
            key_row = conn.execute(
                "SELECT constraint_column_names FROM duckdb_constraints() "
                "WHERE table_name = $table AND constraint_type = 'PRIMARY KEY' "
                "AND database_name = current_database()",
                {"table": table},
            ).fetchone()
            unsupported = [c for c in columns if c.type not in _ARROW_TYPES]
            if unsupported:
                raise TypeError(
                    f"table {table}: column {unsupported[0].name} has type {unsupported[0].type}, "
                    "which bundles cannot encode yet"
                )
            specs.append(
                TableSpec(
                    name=table,
                    columns=columns,
                    primary_key=tuple(key_row[0]) if key_row else (),
                )
            )
        return tuple(specs)
    finally:
        conn.close()


_ARROW_TYPES: dict[str, pa.DataType] = {
    "VARCHAR": pa.large_string(),
    "JSON": pa.large_string(),
    "TIMESTAMP": pa.large_string(),
    "BLOB": pa.large_binary(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "VARCHAR[]": pa.list_(pa.large_string()),
}

# How each column type is written in a JSONL row (the manifest repeats it per column).
_ENCODINGS = {
    "BLOB": "base64",
    "JSON": "json_text",
    "TIMESTAMP": "utc_timestamp_text",
    "DOUBLE": "number_or_nonfinite_text",
}


def _column_sql(column: ColumnSpec) -> str:
    """The SELECT expression that reads a column as its raw bundle value."""
    quoted = _quote(column.name)
    if column.type in ("JSON", "TIMESTAMP"):
        return f"CAST({quoted} AS VARCHAR) AS {quoted}"
    return quoted


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def read_execution_rows(
    conn: duckdb.DuckDBPyConnection, execution_ids: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """Every bundled table's rows for `execution_ids`, as raw values, in a stable order."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for spec in store_table_specs():
        cursor = conn.execute(
            f"SELECT {', '.join(_column_sql(c) for c in spec.columns)} FROM {_quote(spec.name)} "
            "WHERE list_contains($ids, execution_id) ORDER BY ALL",
            {"ids": list(execution_ids)},
        )
        rows[spec.name] = [
            dict(zip(spec.column_names, values, strict=True)) for values in cursor.fetchall()
        ]
    return rows


# ---------------------------------------------------------------------------------------------
# Encoding rows as JSON Lines, and decoding them back with validation
# ---------------------------------------------------------------------------------------------


def encode_value(column: ColumnSpec, value: Any) -> Any:
    """A raw value as a bundle line writes it: BLOB as base64, non-finite DOUBLE as text."""
    if value is None:
        return None
    if column.type == "BLOB":
        return base64.b64encode(bytes(value)).decode("ascii")
    if column.type == "DOUBLE" and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def encode_row(spec: TableSpec, row: Mapping[str, Any]) -> dict[str, Any]:
    """A raw row as the JSON object a bundle line holds, columns in table order."""
    return {column.name: encode_value(column, row[column.name]) for column in spec.columns}


def _row_line(spec: TableSpec, row: Mapping[str, Any]) -> bytes:
    text = json.dumps(
        encode_row(spec, row), ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )
    return text.encode("utf-8") + b"\n"


class BundleValueError(ValueError):
    """A bundle value that does not fit its column; the message says what was expected."""


def _describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True) if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _valid_text(value: Any, expected: str) -> str:
    if not isinstance(value, str):
        raise BundleValueError(f"expected {expected}, got {_describe(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise BundleValueError(
            f"expected {expected}, got text that is not valid Unicode"
        ) from error
    return value


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def decode_value(column: ColumnSpec, value: Any) -> Any:
    """The raw value of one encoded cell; BundleValueError when it does not fit the column."""
    if value is None:
        if not column.nullable:
            raise BundleValueError("expected a value, got null (the column is NOT NULL)")
        return None
    kind = column.type
    if kind == "VARCHAR":
        return _valid_text(value, "text")
    if kind == "JSON":
        text = _valid_text(value, "JSON text")
        try:
            json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as error:
            raise BundleValueError(f"expected JSON text, got {_describe(value)}") from error
        return text
    if kind == "TIMESTAMP":
        text = _valid_text(value, "a timestamp 'YYYY-MM-DD HH:MM:SS[.ffffff]'")
        try:
            if not _TIMESTAMP_TEXT.match(text):
                raise ValueError(text)
            datetime.fromisoformat(text)
        except ValueError as error:
            raise BundleValueError(
                f"expected a timestamp 'YYYY-MM-DD HH:MM:SS[.ffffff]', got {_describe(value)}"
            ) from error
        return text
    if kind == "BLOB":
        text = _valid_text(value, "base64 text")
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as error:
            raise BundleValueError(f"expected base64 text, got {_describe(value)}") from error
    if kind in ("INTEGER", "BIGINT"):
        bits, (low, high) = (32, _INT32) if kind == "INTEGER" else (64, _INT64)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise BundleValueError(f"expected a {bits}-bit integer, got {_describe(value)}")
        return value
    if kind == "DOUBLE":
        if isinstance(value, str) and value in _NON_FINITE:
            return _NON_FINITE[value]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BundleValueError(f"expected a number, got {_describe(value)}")
        return float(value)
    if kind == "BOOLEAN":
        if not isinstance(value, bool):
            raise BundleValueError(f"expected true or false, got {_describe(value)}")
        return value
    if kind == "VARCHAR[]":
        if not isinstance(value, list):
            raise BundleValueError(f"expected a list of text, got {_describe(value)}")
        return [None if item is None else _valid_text(item, "a list of text") for item in value]
    raise BundleValueError(f"column type {kind} is not supported")


# ---------------------------------------------------------------------------------------------
# Redaction
# ---------------------------------------------------------------------------------------------

# How each column is redacted on export; columns not named here hold no user data.
REDACTED_COLUMNS: dict[str, dict[str, str]] = {
    "executions": {"query": "text", "stop_reason": "text"},
    "execution_snapshots": {
        "plan": "plan",
        "config": "json",
        "config_sources": "json",
        "llm": "json",
    },
    "steps": {
        "url": "text",
        "parameters": "json",
        "error": "text",
        "result": "json",
        "skip_reason": "text",
    },
    "attempts": {
        "parameters": "json",
        "url": "text",
        "request_headers": "headers",
        "request_body": "body",
        "response_headers": "headers",
        "response_body": "body",
        "transport_error_message": "text",
        "reason": "text",
        "decision": "json",
        "corrected_parameters": "json",
    },
    "llm_calls": {
        "base_url": "text",
        "messages": "json",
        "request_body": "body",
        "response_body": "body",
        "raw_text": "text",
        "parsed": "json",
        "parse_error": "text",
        "error": "text",
    },
    "events": {"message": "text", "attrs": "json"},
}
# A redacted body's size column is set to the new length.
_SIZE_COLUMNS = {"request_body": "request_size", "response_body": "response_size"}
# How each `REDACTED_COLUMNS` entry is handed to the policy.
_PLACES = {"text": Place.TEXT, "json": Place.JSON, "plan": Place.PLAN, "headers": Place.HEADERS}


def _redact_json_text(text: str, place: Place) -> str:
    value = json.loads(text)
    redacted = redact(RedactionLevel.EXPORT, place, value)
    if redacted == value:
        return text
    return json.dumps(redacted, ensure_ascii=False)


def redact_row(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a raw row with the columns of `REDACTED_COLUMNS[table]` redacted for EXPORT."""
    redacted = dict(row)
    for column, how in REDACTED_COLUMNS.get(table, {}).items():
        value = redacted.get(column)
        if value is None:
            continue
        if how == "text":
            redacted[column] = redact(RedactionLevel.EXPORT, Place.TEXT, value)
        elif how == "body":
            body = redact(RedactionLevel.EXPORT, Place.BODY, bytes(value))
            if body != value and _SIZE_COLUMNS.get(column) in redacted:
                redacted[_SIZE_COLUMNS[column]] = len(body)
            redacted[column] = body
        else:
            redacted[column] = _redact_json_text(value, _PLACES[how])
    return redacted


def _redaction_manifest(applied: bool) -> dict[str, Any]:
    if not applied:
        return {"applied": False}
    return {
        "applied": True,
        "replacement": REDACTED,
        "columns": REDACTED_COLUMNS,
        "notes": (
            "executor.redact policy, level export. text: credential patterns (keys, "
            "authorization values, URL query parameters, bearer/basic credentials, URL "
            "userinfo) and credential shapes found by value (sk-, AKIA/ASIA, ghp_/github_pat_, "
            "JWTs, xox?-, sk_live_/rk_live_, AIza, PEM private keys, random-looking values "
            "assigned to secret-ish words); json: values under credential-named keys, "
            "random-looking values under secret-ish keys, and every string as text; headers: "
            "credential-named headers lose their value, the rest as text; body: as text, JSON "
            "stays valid JSON, non-UTF-8 bytes kept unless a pattern matches, and the *_size "
            "column is the redacted length; plan: json, capability schemas keep their shape"
        ),
    }


# ---------------------------------------------------------------------------------------------
# Rows back to executor events (for spans)
# ---------------------------------------------------------------------------------------------


def _epoch(text: str | None) -> float | None:
    if text is None:
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


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
            )
        )
        finished_at = _epoch(row["finished_at"])
        if row["status"] in _FINISHED_STATUSES - {"interrupted"} and finished_at is not None:
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
    for row in attempt_rows:
        where = {"execution_id": row["execution_id"], "step_id": row["step_id"], "n": row["n"]}
        started_at = _epoch(row["started_at"])
        if row["dispatched"] and started_at is not None:
            yield AttemptDispatched(
                **where,
                attempt_number=row["attempt_number"] or row["n"],
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
                status=row["status"] or 0,
                response_headers=_loads(row["response_headers"]) or {},
                response_body=row["response_body"] or b"",
                transport_error=row["transport_error"],
                transport_error_message=row["transport_error_message"],
                retry_policy=row["retry_policy"] or "unspecified",
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
            messages=tuple(_loads(row["messages"]) or ()),
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
            text_recorded=row["messages"] is not None,
        )


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


# ---------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------


def _utc_now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _choose_executions(
    store: Store, conn: duckdb.DuckDBPyConnection, requested: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """The execution ids to export and, for `requested=None` (all), the running ones skipped."""
    statuses = dict(conn.execute("SELECT execution_id, status FROM executions").fetchall())
    if requested is None:
        ordered = [
            row[0]
            for row in conn.execute(
                "SELECT execution_id FROM executions ORDER BY started_at NULLS LAST, execution_id"
            ).fetchall()
        ]
        running = [eid for eid in ordered if statuses[eid] == "running"]
        chosen = [eid for eid in ordered if statuses[eid] != "running"]
        if not chosen:
            detail = f" ({len(running)} still running)" if running else ""
            raise BundleExportError(f"{store.path}: no finished executions to export{detail}")
        return chosen, running
    chosen = []
    for id_or_prefix in requested:
        execution_id = store.resolve_execution_id(conn, id_or_prefix)
        if statuses.get(execution_id) == "running":
            raise BundleExportError(
                f"{store.path}: execution {execution_id} is still running; export it once it "
                "has finished (or once its recorder has stopped and it shows as interrupted)"
            )
        if execution_id not in chosen:
            chosen.append(execution_id)
    return chosen, []


def _check_output(output: Path, db: Path, *, overwrite: bool) -> None:
    if output.is_dir():
        raise BundleExportError(f"{output}: is a directory, expected a bundle file name")
    if not output.parent.is_dir():
        raise BundleExportError(f"{output}: its directory {output.parent} does not exist")
    try:
        existing = output.stat()
    except OSError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        raise BundleExportError(
            f"{output}: exists and is not a regular file (a device, pipe or socket); "
            "choose a file name"
        )
    if output.exists() and not overwrite:
        raise BundleExportError(f"{output}: already exists (pass --force to overwrite it)")
    paths = store_paths(db)
    target = output.resolve()
    if target == paths.db.resolve() or paths.spool.resolve() in target.parents:
        raise BundleExportError(f"{output}: is the store itself; choose another file name")


def export_bundle(
    db_path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    execution_ids: Sequence[str] | None,
    *,
    redact: bool = True,
    overwrite: bool = False,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> ExportResult:
    """Write the executions `execution_ids` (ids or unique prefixes; None for all) to `output`.

    Rows are read in one short session. Secrets are redacted unless `redact` is false. A
    running execution is refused when named and skipped by `None`. The file is written under
    a temporary name and renamed, so `output` is either the whole bundle or untouched.
    Raises BundleExportError, StoreOpenError, StoreBusyError or ExecutionNotFoundError.
    """
    output_path = Path(output)
    if execution_ids is not None and not execution_ids:
        raise BundleExportError(f"{output_path}: no execution ids given (None exports all)")
    _check_output(output_path, Path(db_path), overwrite=overwrite)
    store = open_store(db_path, lock_timeout_s=lock_timeout_s)
    with store.session() as conn:
        chosen, skipped_running = _choose_executions(store, conn, execution_ids)
        rows = read_execution_rows(conn, chosen)
    if redact:
        rows = {
            table: [redact_row(table, row) for row in table_rows]
            for table, table_rows in rows.items()
        }
    spans, span_count = spans_document(rows)
    size = write_bundle(output_path, chosen, rows, spans, redacted=redact, overwrite=overwrite)
    return ExportResult(
        path=output_path,
        execution_ids=tuple(chosen),
        skipped_running=tuple(skipped_running),
        redacted=redact,
        size_bytes=size,
        row_counts={table: len(table_rows) for table, table_rows in rows.items()},
        span_count=span_count,
    )


def write_bundle(
    output: Path,
    execution_ids: Sequence[str],
    rows: Mapping[str, Sequence[Mapping[str, Any]]],
    spans: Mapping[str, Any],
    *,
    redacted: bool,
    overwrite: bool = False,
    created_at: str | None = None,
) -> int:
    """Write a bundle of raw `rows` and an OTLP/JSON `spans` document; return its size in bytes.

    Redaction is the caller's: `redacted` only records in the manifest whether it was applied.
    """
    members: list[tuple[str, bytes]] = [(README_MEMBER, _README.encode("utf-8"))]
    tables = []
    for spec in store_table_specs():
        table_rows = rows.get(spec.name, ())
        members.append((spec.member, b"".join(_row_line(spec, row) for row in table_rows)))
        tables.append(
            {
                "name": spec.name,
                "member": spec.member,
                "rows": len(table_rows),
                "primary_key": list(spec.primary_key),
                "columns": [
                    {
                        "name": column.name,
                        "type": column.type,
                        "nullable": column.nullable,
                        "encoding": _ENCODINGS.get(column.type, "json"),
                    }
                    for column in spec.columns
                ],
            }
        )
    span_total = sum(
        len(scope.get("spans", ()))
        for resource in spans.get("resourceSpans", ())
        for scope in resource.get("scopeSpans", ())
    )
    spans_bytes = json.dumps(spans, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    members.append((SPANS_MEMBER, spans_bytes))
    created_at = created_at or _utc_now_text()
    manifest = {
        "format": BUNDLE_FORMAT,
        "bundle_version": BUNDLE_VERSION,
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "created_at": created_at,
        "execution_ids": list(execution_ids),
        "redaction": _redaction_manifest(redacted),
        "tables": tables,
        "spans": {
            "member": SPANS_MEMBER,
            "encoding": "OTLP/JSON ExportTraceServiceRequest",
            "spans": span_total,
        },
        "members": [
            {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for name, data in members
        ],
    }
    manifest_bytes = (json.dumps(manifest, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    stamp = datetime.fromisoformat(created_at.replace("Z", "+00:00")).timetuple()[:6]
    return _write_zip_atomically(
        output, [(MANIFEST_MEMBER, manifest_bytes), *members], stamp, overwrite=overwrite
    )


def _write_zip_atomically(
    output: Path, members: Sequence[tuple[str, bytes]], stamp: tuple[int, ...], *, overwrite: bool
) -> int:
    try:
        descriptor, temporary_name = tempfile.mkstemp(
            dir=output.parent, prefix=f".{output.name}.", suffix=".tmp"
        )
    except OSError as error:
        raise BundleExportError(f"{output}: cannot write: {error.strerror or error}") from error
    temporary = Path(temporary_name)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            with zipfile.ZipFile(handle, "w", allowZip64=True) as archive:
                for name, data in members:
                    info = zipfile.ZipInfo(name, date_time=stamp)  # type: ignore[arg-type]
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = (stat.S_IFREG | 0o644) << 16
                    archive.writestr(info, data, compresslevel=6)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.chmod(0o644)
        if overwrite:
            os.replace(temporary, output)
        else:
            try:
                os.link(temporary, output)  # fails if another process created it meanwhile
            except FileExistsError as error:
                raise BundleExportError(
                    f"{output}: already exists (pass --force to overwrite it)"
                ) from error
        return output.stat().st_size
    except OSError as error:
        raise BundleExportError(f"{output}: cannot write: {error.strerror or error}") from error
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


# ---------------------------------------------------------------------------------------------
# Reading and validating
# ---------------------------------------------------------------------------------------------


def _refuse(path: Path, problem: str) -> BundleError:
    return BundleError(f"{path}: {problem}; nothing was imported")


def unsafe_member_reason(name: str) -> str | None:
    """Why a member name could escape the bundle or is not a plain file path, else None."""
    if not name:
        return "an empty name"
    if "\x00" in name or "\\" in name:
        return "a NUL or backslash in its name"
    if name.startswith("/") or _DRIVE_LETTER.match(name):
        return "an absolute path"
    parts = name.split("/")
    if ".." in parts:
        return "a '..' path component"
    if any(part in ("", ".") for part in parts):
        return "an empty or '.' path component"
    return None


def format_members() -> frozenset[str]:
    """The member names the bundle format has; any other member is refused."""
    tables = (spec.member for spec in store_table_specs())
    return frozenset({MANIFEST_MEMBER, README_MEMBER, SPANS_MEMBER, *tables})


def _check_directory(
    path: Path, infos: Sequence[zipfile.ZipInfo], limits: BundleLimits, archive_bytes: int
) -> None:
    """Refuse member lists that are too long, unsafe, duplicated, exotic, foreign or too large.

    The uncompressed total the archive declares must stay within `max_total_bytes` and, beyond
    `ratio_floor_bytes`, within `max_ratio` times the archive's own size; every read is then
    bounded by those declarations.
    """
    if len(infos) > limits.max_members:
        raise _refuse(path, f"{len(infos)} members, over the limit of {limits.max_members}")
    allowed = format_members()
    ratio_limit = max(limits.max_ratio * archive_bytes, limits.ratio_floor_bytes)
    seen: set[str] = set()
    total = 0
    for info in infos:
        for name in {info.filename, info.orig_filename}:
            reason = unsafe_member_reason(name)
            if reason:
                raise _refuse(path, f"member {name!r} has an unsafe path ({reason})")
        name = info.filename
        if name in seen:
            raise _refuse(path, f"member {name!r} appears twice")
        seen.add(name)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise _refuse(path, f"member {name!r} is a symbolic link")
        # Only the file-type bits count: writers such as zipfile.writestr set permissions alone.
        if info.is_dir() or (stat.S_IFMT(mode) and not stat.S_ISREG(mode)):
            raise _refuse(path, f"member {name!r} is not a regular file")
        if name not in allowed:
            raise _refuse(
                path,
                f"member {name!r} is not part of the bundle format (a bundle holds "
                f"{MANIFEST_MEMBER}, {README_MEMBER}, {TABLES_FOLDER}/<table>.jsonl and "
                f"{SPANS_MEMBER} only)",
            )
        if info.flag_bits & 0x1:
            raise _refuse(path, f"member {name!r} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise _refuse(
                path,
                f"member {name!r} uses compression method {info.compress_type} "
                "(expected stored or deflated)",
            )
        total += info.file_size
        if total > limits.max_total_bytes:
            raise _refuse(
                path,
                f"its members declare over {limits.max_total_bytes} bytes uncompressed, "
                "over the limit",
            )
        if total > ratio_limit:
            raise _refuse(
                path,
                f"its members declare over {ratio_limit} bytes uncompressed, over "
                f"{limits.max_ratio} times the {archive_bytes}-byte archive (a zip bomb?)",
            )


@contextlib.contextmanager
def _member_stream(
    path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, expected_size: int
) -> Iterator[Callable[[int], bytes]]:
    """A `read(n)` over the member that refuses more bytes than `expected_size`.

    A damaged member (bad CRC, bad deflate data) is refused naming it.
    """
    total = 0

    def read(size: int) -> bytes:
        nonlocal total
        chunk = handle.read(min(size, expected_size - total + 1))
        total += len(chunk)
        if total > expected_size:
            raise _refuse(
                path,
                f"member {info.filename!r} holds more than the {expected_size} bytes it declares",
            )
        return chunk

    try:
        with archive.open(info) as handle:
            yield read
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error) as error:
        raise _refuse(
            path, f"member {info.filename!r} is damaged ({_first_line(error)})"
        ) from error


def _read_member(
    path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, expected_size: int
) -> bytes:
    """The member's bytes (for the manifest only), reading at most `expected_size` + 1."""
    chunks = []
    with _member_stream(path, archive, info, expected_size) as read:
        while chunk := read(_READ_CHUNK):
            chunks.append(chunk)
    return b"".join(chunks)


def _verify_member(
    path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, member: Mapping[str, Any]
) -> None:
    """Check a member's size and SHA-256 against the manifest, reading it in chunks."""
    digest = hashlib.sha256()
    size = 0
    with _member_stream(path, archive, info, member["size"]) as read:
        while chunk := read(_READ_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    if size != member["size"]:
        raise _refuse(
            path,
            f"member {info.filename!r} is {size} bytes, the manifest says "
            f"{member['size']} (truncated?)",
        )
    found = digest.hexdigest()
    if found != member["sha256"]:
        raise _refuse(
            path,
            f"member {info.filename!r} has SHA-256 {found[:12]}…, the manifest "
            f"says {member['sha256'][:12]}… (changed or damaged)",
        )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _open_archive(path: Path, limits: BundleLimits) -> zipfile.ZipFile:
    try:
        info = path.stat()
    except FileNotFoundError as error:
        raise BundleError(f"{path}: no such file") from error
    except OSError as error:
        raise BundleError(f"{path}: cannot read: {error.strerror}") from error
    if not stat.S_ISREG(info.st_mode):
        raise BundleError(f"{path}: not a regular file, expected a bundle (.zip)")
    if info.st_size > limits.max_total_bytes:
        raise _refuse(
            path, f"the file is {info.st_size} bytes, over the limit of {limits.max_total_bytes}"
        )
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as error:
        raise BundleError(f"{path}: cannot read: {error.strerror}") from error
    try:
        return zipfile.ZipFile(path)
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        EOFError,
        ValueError,
        OSError,
        NotImplementedError,
    ) as error:
        if head in (_ZIP_MAGIC, _EMPTY_ZIP_MAGIC):
            problem = "a truncated or damaged zip archive (its directory at the end is unreadable)"
        else:
            problem = "not a truva bundle (not a zip archive)"
        raise _refuse(path, problem) from error


def _require(path: Path, condition: bool, problem: str) -> None:
    if not condition:
        raise _refuse(path, f"manifest.json: {problem}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_manifest(path: Path, manifest: Any) -> dict[str, dict[str, Any]]:
    """Validate the manifest's fields; return its members by name."""
    _require(path, isinstance(manifest, dict), "expected a JSON object")
    found_format = manifest.get("format")
    if found_format != BUNDLE_FORMAT:
        raise _refuse(
            path,
            f"not a truva bundle (manifest format is {_describe(found_format)}, "
            f"expected {BUNDLE_FORMAT!r})",
        )
    version = manifest.get("bundle_version")
    _require(path, _is_int(version), f"bundle_version must be an integer, got {_describe(version)}")
    if version != BUNDLE_VERSION:
        newer = "; upgrade truva-console" if version > BUNDLE_VERSION else ""
        raise _refuse(
            path,
            f"bundle version {version} is not supported (this truva-console "
            f"reads version {BUNDLE_VERSION}){newer}",
        )
    schema_version = manifest.get("schema_version")
    _require(
        path,
        _is_int(schema_version),
        f"schema_version must be an integer, got {_describe(schema_version)}",
    )
    if schema_version > SCHEMA_VERSION:
        raise _refuse(
            path,
            f"store schema version {schema_version} is newer than this "
            f"truva-console understands ({SCHEMA_VERSION}); upgrade "
            "truva-console",
        )
    oldest = MIGRATIONS[0].version
    if schema_version < oldest:
        raise _refuse(
            path,
            f"store schema version {schema_version} is older than any this "
            f"truva-console imports ({oldest} to {SCHEMA_VERSION})",
        )
    for key in ("tool_version", "created_at"):
        _require(
            path,
            isinstance(manifest.get(key), str),
            f"{key} must be text, got {_describe(manifest.get(key))}",
        )
    ids = manifest.get("execution_ids")
    _require(
        path,
        isinstance(ids, list) and bool(ids) and all(isinstance(i, str) and i for i in ids),
        "execution_ids must be a non-empty list of ids",
    )
    _require(path, len(set(ids)) == len(ids), "execution_ids lists an id twice")
    redaction = manifest.get("redaction")
    _require(
        path,
        isinstance(redaction, dict) and isinstance(redaction.get("applied"), bool),
        'redaction must be an object with a boolean "applied"',
    )
    members = manifest.get("members")
    _require(path, isinstance(members, list), "members must be a list")
    by_name: dict[str, dict[str, Any]] = {}
    for index, member in enumerate(members):
        where = f"members[{index}]"
        _require(
            path,
            isinstance(member, dict) and isinstance(member.get("name"), str),
            f"{where} must be an object with a name",
        )
        name = member["name"]
        reason = unsafe_member_reason(name)
        if reason:
            raise _refuse(path, f"manifest.json: member {name!r} has an unsafe path ({reason})")
        _require(
            path,
            name not in by_name and name != MANIFEST_MEMBER,
            f"{where} names {name!r} twice or names the manifest",
        )
        _require(
            path,
            _is_int(member.get("size")) and member["size"] >= 0,
            f"{where} ({name}) size must be a non-negative integer",
        )
        _require(
            path,
            isinstance(member.get("sha256"), str) and bool(_SHA256_HEX.match(member["sha256"])),
            f"{where} ({name}) sha256 must be 64 lowercase hex digits",
        )
        by_name[name] = member
    return by_name


def _check_tables(path: Path, manifest: Mapping[str, Any], members: Mapping[str, Any]) -> None:
    tables = manifest.get("tables")
    _require(
        path,
        isinstance(tables, list) and all(isinstance(t, dict) for t in tables),
        "tables must be a list of objects",
    )
    version = manifest["schema_version"]
    found_names = [str(table.get("name")) for table in tables]
    expected_names = [spec.name for spec in store_table_specs(version)]
    if sorted(found_names) != sorted(expected_names):
        raise _refuse(
            path,
            f"manifest.json: tables must be exactly {', '.join(expected_names)}, got "
            f"{', '.join(found_names) or 'none'}",
        )
    by_name = {table["name"]: table for table in tables}
    for spec in store_table_specs(version):
        table = by_name[spec.name]
        _require(
            path,
            table.get("member") == spec.member and spec.member in members,
            f"table {spec.name} must be in member {spec.member}, listed in members",
        )
        _require(
            path,
            _is_int(table.get("rows")) and table["rows"] >= 0,
            f"table {spec.name} rows must be a non-negative integer",
        )
        columns = table.get("columns")
        found = (
            [(c.get("name"), c.get("type")) for c in columns if isinstance(c, dict)]
            if isinstance(columns, list)
            else []
        )
        expected = [(c.name, c.type) for c in spec.columns]
        if found != expected:
            missing = [name for name, _ in expected if name not in dict(found)]
            extra = [str(name) for name, _ in found if name not in dict(expected)]
            detail = (
                "; ".join(
                    part
                    for part in (
                        f"missing {', '.join(missing)}" if missing else "",
                        f"unknown {', '.join(extra)}" if extra else "",
                    )
                    if part
                )
                or "names, types or order differ"
            )
            raise _refuse(
                path,
                f"manifest.json: table {spec.name} columns do not match store "
                f"schema version {version} ({detail})",
            )
    spans = manifest.get("spans")
    _require(
        path,
        isinstance(spans, dict) and spans.get("member") == SPANS_MEMBER and SPANS_MEMBER in members,
        f"spans must name member {SPANS_MEMBER}",
    )


def _member_lines(
    path: Path,
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    member: Mapping[str, Any],
    limits: BundleLimits,
) -> Iterator[tuple[int, str]]:
    """Each line of a table member as text, numbered from 1, read in bounded pieces."""
    where = info.filename
    with _member_stream(path, archive, info, member["size"]) as read:
        pending = bytearray()
        number = 0
        while True:
            chunk = read(_READ_CHUNK)
            if not chunk:
                break
            searched = len(pending)  # the bytes before the chunk hold no newline
            pending += chunk
            start = 0
            while (end := pending.find(b"\n", max(start, searched))) >= 0:
                number += 1
                yield number, _line_text(path, where, bytes(pending[start:end]))
                start = end + 1
            del pending[:start]
            if len(pending) > limits.max_line_bytes:
                raise _refuse(
                    path,
                    f"{where} line {number + 1} is over {limits.max_line_bytes} bytes, the "
                    "limit for one row",
                )
        if pending:
            raise _refuse(path, f"{where}: the last line has no newline (truncated?)")


def _line_text(path: Path, where: str, line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _refuse(path, f"{where} is not UTF-8 text") from error


def _decode_line(
    path: Path, spec: TableSpec, number: int, line: str, execution_ids: set[str]
) -> dict[str, Any]:
    """One table row, decoded and checked; BundleError names the member, line and column."""
    where = f"{spec.member} line {number}"
    try:
        encoded = json.loads(line, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        raise _refuse(path, f"{where}: not a JSON object") from error
    if not isinstance(encoded, dict):
        raise _refuse(path, f"{where}: not a JSON object")
    names = spec.column_names
    if len(encoded) != len(names) or any(name not in encoded for name in names):
        missing = sorted(set(names) - set(encoded))
        extra = sorted(set(encoded) - set(names))
        raise _refuse(
            path,
            f"{where}: columns differ from the table's (missing "
            f"{missing or 'none'}, unknown {extra or 'none'})",
        )
    row = {}
    for column in spec.columns:
        try:
            row[column.name] = decode_value(column, encoded[column.name])
        except BundleValueError as problem:
            raise _refuse(path, f"{where}: column {column.name}: {problem}") from None
    if row["execution_id"] not in execution_ids:
        raise _refuse(
            path,
            f"{where}: execution_id {_describe(row['execution_id'])} is not "
            "one of the manifest's execution_ids",
        )
    return row


def _bundle_row(
    path: Path, scan: _Scan, spec: TableSpec, number: int, line: str, execution_ids: set[str]
) -> dict[str, Any]:
    """A row decoded with the bundle's columns, then given every current column (NULL if new)."""
    row = _decode_line(path, scan.bundle_spec(spec), number, line, execution_ids)
    return {name: row.get(name) for name in spec.column_names}


def _row_digest(spec: TableSpec, row: Mapping[str, Any]) -> int:
    """A 128-bit digest of a row's canonical JSON, summed per execution to compare row sets."""
    text = json.dumps(encode_row(spec, row), sort_keys=True, ensure_ascii=False, allow_nan=False)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest(), "big")


def _key_hash(spec: TableSpec, row: Mapping[str, Any]) -> int:
    key = json.dumps([row[name] for name in spec.primary_key], ensure_ascii=False)
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


@dataclass(slots=True)
class _RowSets:
    """Per execution and table, how many rows and the sum of their digests (mod 2**128)."""

    sums: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def add(self, table: str, execution_id: str, digest: int) -> None:
        count, total = self.sums.get((table, execution_id), (0, 0))
        self.sums[(table, execution_id)] = (count + 1, (total + digest) % (1 << 128))

    def of(self, table: str, execution_id: str) -> tuple[int, int]:
        return self.sums.get((table, execution_id), (0, 0))

    def has(self, execution_id: str) -> bool:
        return any(self.of(spec.name, execution_id)[0] for spec in store_table_specs())


@dataclass(slots=True)
class _Scan:
    """What validating a bundle learned, without keeping its rows."""

    manifest: dict[str, Any]
    members: dict[str, dict[str, Any]]
    infos: dict[str, zipfile.ZipInfo]
    row_sets: _RowSets
    statuses: dict[str, Any]
    call_ids: dict[str, list[str]]
    span_count: int
    longest_line: int = 0

    @property
    def execution_ids(self) -> tuple[str, ...]:
        return tuple(self.manifest["execution_ids"])

    def bundle_spec(self, spec: TableSpec) -> TableSpec:
        """The table as the bundle's schema version has it (an older one lacks new columns)."""
        return next(
            found
            for found in store_table_specs(self.manifest["schema_version"])
            if found.name == spec.name
        )


def _scan_table(
    path: Path, archive: zipfile.ZipFile, scan: _Scan, spec: TableSpec, limits: BundleLimits
) -> None:
    """Decode and check every row of one table member, keeping digests and keys only."""
    declared_rows = next(t["rows"] for t in scan.manifest["tables"] if t["name"] == spec.name)
    execution_ids = set(scan.execution_ids)
    key_hashes: list[int] = []
    rows = 0
    lines = _member_lines(path, archive, scan.infos[spec.member], scan.members[spec.member], limits)
    for number, line in lines:
        row = _bundle_row(path, scan, spec, number, line, execution_ids)
        rows += 1
        scan.longest_line = max(scan.longest_line, len(line))
        scan.row_sets.add(spec.name, row["execution_id"], _row_digest(spec, row))
        if spec.primary_key:
            key_hashes.append(_key_hash(spec, row))
        if spec.name == "executions":
            scan.statuses[row["execution_id"]] = row["status"]
        elif spec.name == "llm_calls":
            scan.call_ids.setdefault(row["execution_id"], []).append(row["call_id"])
    if rows != declared_rows:
        raise _refuse(path, f"{spec.member} holds {rows} rows, the manifest says {declared_rows}")
    if key_hashes:
        hashes = pa.array(key_hashes, type=pa.uint64())
        del key_hashes
        if len(pc.unique(hashes)) != len(hashes):
            _refuse_duplicate_key(path, archive, scan, spec, hashes, limits)


def _refuse_duplicate_key(
    path: Path,
    archive: zipfile.ZipFile,
    scan: _Scan,
    spec: TableSpec,
    hashes: pa.Array,
    limits: BundleLimits,
) -> None:
    """Find the first row whose primary key repeats an earlier one and refuse it by line."""
    counts = pc.value_counts(hashes)
    repeated = {
        item["values"] for item in counts.to_pylist() if item["counts"] > 1
    }
    seen: set[tuple[Any, ...]] = set()
    lines = _member_lines(path, archive, scan.infos[spec.member], scan.members[spec.member], limits)
    for number, line in lines:
        row = _bundle_row(path, scan, spec, number, line, set(scan.execution_ids))
        if _key_hash(spec, row) not in repeated:
            continue
        key = tuple(row[name] for name in spec.primary_key)
        if key in seen:
            named = ", ".join(f"{name}={row[name]!r}" for name in spec.primary_key)
            raise _refuse(path, f"{spec.member} line {number}: a second row for {named}")
        seen.add(key)


def _scan_bundle(path: Path, archive: zipfile.ZipFile, limits: BundleLimits) -> _Scan:
    """Validate an open bundle completely in bounded memory; BundleError on the first problem.

    Checks, before anything is decoded: the member list (within the limits, every member a
    plain file of the format with a safe relative path, no duplicates); then the manifest
    (format, versions, members, tables and columns), every member's size and SHA-256, every
    row (types, execution ids, primary keys) and the spans document. Members are streamed.
    """
    infos = archive.infolist()
    _check_directory(path, infos, limits, path.stat().st_size)
    by_name = {info.filename: info for info in infos}
    manifest_info = by_name.get(MANIFEST_MEMBER)
    if manifest_info is None:
        raise _refuse(path, f"not a truva bundle ({MANIFEST_MEMBER} is missing)")
    if manifest_info.file_size > limits.max_manifest_bytes:
        raise _refuse(
            path,
            f"{MANIFEST_MEMBER} is {manifest_info.file_size} bytes, over the "
            f"limit of {limits.max_manifest_bytes}",
        )
    manifest_bytes = _read_member(path, archive, manifest_info, manifest_info.file_size)
    try:
        manifest = json.loads(manifest_bytes.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise _refuse(path, f"{MANIFEST_MEMBER} is not valid JSON") from error
    members = _check_manifest(path, manifest)
    for name in by_name:
        if name != MANIFEST_MEMBER and name not in members:
            raise _refuse(path, f"member {name!r} is not listed in the manifest")
    for name, member in members.items():
        info = by_name.get(name)
        if info is None:
            raise _refuse(
                path, f"member {name!r} is listed in the manifest but missing from the archive"
            )
        if info.file_size != member["size"]:
            raise _refuse(
                path,
                f"member {name!r} is {info.file_size} bytes in the archive, "
                f"the manifest says {member['size']}",
            )
    _check_tables(path, manifest, members)
    for name, member in members.items():
        _verify_member(path, archive, by_name[name], member)
    scan = _Scan(
        manifest=manifest,
        members=members,
        infos=by_name,
        row_sets=_RowSets(),
        statuses={},
        call_ids={},
        span_count=0,
    )
    for spec in store_table_specs():
        _scan_table(path, archive, scan, spec, limits)
    for execution_id in scan.execution_ids:
        status = scan.statuses.get(execution_id)
        if status is None:
            raise _refuse(
                path,
                f"execution {execution_id} is listed in the manifest but has no "
                "row in tables/executions.jsonl",
            )
        if status not in _FINISHED_STATUSES:
            raise _refuse(
                path,
                f"execution {execution_id} has status {status!r}; a bundle holds "
                "finished executions only",
            )
    spans_size = members[SPANS_MEMBER]["size"]
    with _member_stream(path, archive, by_name[SPANS_MEMBER], spans_size) as read:
        scan.span_count = _count_spans(path, _JsonStream(path, read, limits.max_line_bytes))
    return scan


def _table_rows(
    path: Path, archive: zipfile.ZipFile, scan: _Scan, spec: TableSpec, limits: BundleLimits
) -> Iterator[dict[str, Any]]:
    """The rows of a table member of a scanned bundle, decoded one line at a time."""
    execution_ids = set(scan.execution_ids)
    lines = _member_lines(path, archive, scan.infos[spec.member], scan.members[spec.member], limits)
    for number, line in lines:
        yield _bundle_row(path, scan, spec, number, line, execution_ids)


def read_bundle(
    bundle_path: str | os.PathLike[str], *, limits: BundleLimits | None = None
) -> Bundle:
    """Open and validate a bundle completely; BundleError (one line) on the first problem.

    Validation streams every member (see `import_bundle`); the returned Bundle then holds every
    row in memory, so this is for bundles small enough to inspect. Reads no store and writes
    nothing.
    """
    path = Path(bundle_path)
    limits = limits or BundleLimits()
    with _open_archive(path, limits) as archive:
        scan = _scan_bundle(path, archive, limits)
        rows = {
            spec.name: tuple(_table_rows(path, archive, scan, spec, limits))
            for spec in store_table_specs()
        }
    manifest = scan.manifest
    return Bundle(
        path=path,
        manifest=manifest,
        execution_ids=scan.execution_ids,
        redacted=manifest["redaction"]["applied"],
        tool_version=manifest["tool_version"],
        created_at=manifest["created_at"],
        rows=rows,
        span_count=scan.span_count,
    )


class _JsonStream:
    """JSON text read from a member in chunks; values are decoded with `raw_decode`.

    Only the containers being walked are streamed; each value decoded whole (a span, say) may
    be at most `max_value_bytes` long.
    """

    def __init__(self, path: Path, read: Callable[[int], bytes], max_value_bytes: int) -> None:
        self.path = path
        self._read = read
        self._max_value_bytes = max_value_bytes
        self._decoder = json.JSONDecoder(parse_constant=_reject_constant)
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._text = ""
        self._pos = 0
        self._eof = False

    def _invalid(self) -> BundleError:
        return _refuse(self.path, f"{SPANS_MEMBER} is not valid JSON")

    def _fill(self) -> bool:
        """Read one more chunk; False at the end of the member."""
        if self._eof:
            return False
        chunk = self._read(_READ_CHUNK)
        try:
            text = self._utf8.decode(chunk, final=not chunk)
        except UnicodeDecodeError as error:
            raise self._invalid() from error
        self._text = self._text[self._pos :] + text
        self._pos = 0
        if not chunk:
            self._eof = True
        return True

    def peek(self) -> str:
        """The next character that is not whitespace, or "" at the end."""
        while True:
            while self._pos < len(self._text) and self._text[self._pos] in " \t\r\n":
                self._pos += 1
            if self._pos < len(self._text):
                return self._text[self._pos]
            if not self._fill():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self._invalid()
        self._pos += 1

    def take(self, char: str) -> bool:
        """Consume `char` if it comes next."""
        if self.peek() == char:
            self._pos += 1
            return True
        return False

    def value(self) -> Any:
        """Decode the next whole value."""
        self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._text, self._pos)
            except (ValueError, RecursionError) as error:
                if self._eof:
                    raise self._invalid() from error
                value, end = None, -1
            if end >= 0 and (end < len(self._text) or self._eof):
                self._pos = end
                return value
            waiting = len(self._text) - self._pos
            if waiting > self._max_value_bytes:
                raise _refuse(
                    self.path,
                    f"{SPANS_MEMBER}: a value is over {self._max_value_bytes} bytes, the "
                    "limit for one span",
                )
            # Read until the text waiting doubles, so a long value is decoded a few times only.
            while len(self._text) - self._pos < 2 * waiting and self._fill():
                pass
            if not self._eof and len(self._text) - self._pos <= waiting:
                self._fill()

    def members(self) -> Iterator[str]:
        """The keys of the object that starts next; the caller consumes each value."""
        self.expect("{")
        if self.take("}"):
            return
        while True:
            key = self.value()
            if not isinstance(key, str):
                raise self._invalid()
            self.expect(":")
            yield key
            if self.take(","):
                continue
            self.expect("}")
            return

    def items(self) -> Iterator[int]:
        """The indexes of the array that starts next; the caller consumes each item."""
        self.expect("[")
        if self.take("]"):
            return
        index = 0
        while True:
            yield index
            index += 1
            if self.take(","):
                continue
            self.expect("]")
            return

    def finish(self) -> None:
        if self.peek() != "":
            raise self._invalid()


def _count_spans(path: Path, stream: _JsonStream) -> int:
    """The spans in an OTLP/JSON document, streamed; BundleError when its nesting is not OTLP's."""
    not_otlp = _refuse(path, f"{SPANS_MEMBER} is not an OTLP/JSON document (no resourceSpans)")
    if stream.peek() != "{":
        stream.value()
        stream.finish()
        raise not_otlp
    count: int | None = None
    for key in stream.members():
        if key != "resourceSpans":
            stream.value()
            continue
        if stream.peek() != "[":
            stream.value()
            count = None
            continue
        count = 0
        for resource_index in stream.items():
            count += _count_resource_spans(path, stream, f"resourceSpans[{resource_index}]")
    stream.finish()
    if count is None:
        raise not_otlp
    return count


def _wrong(path: Path, stream: _JsonStream, where: str, expected: str) -> BundleError:
    return _refuse(
        path, f"{SPANS_MEMBER}: {where} is {_describe(stream.value())}, expected {expected}"
    )


def _count_resource_spans(path: Path, stream: _JsonStream, where: str) -> int:
    if stream.peek() != "{":
        raise _wrong(path, stream, where, "an object")
    count = 0
    for key in stream.members():
        if key != "scopeSpans":
            stream.value()
            continue
        if stream.peek() != "[":
            raise _wrong(path, stream, f"{where}.scopeSpans", "a list")
        count = 0
        for scope_index in stream.items():
            here = f"{where}.scopeSpans[{scope_index}]"
            if stream.peek() != "{":
                raise _wrong(path, stream, here, "an object")
            spans = 0
            for scope_key in stream.members():
                if scope_key != "spans":
                    stream.value()
                    continue
                if stream.peek() != "[":
                    raise _wrong(path, stream, f"{here}.spans", "a list")
                spans = 0
                for _ in stream.items():
                    stream.value()
                    spans += 1
            count += spans
    return count


# ---------------------------------------------------------------------------------------------
# Import
# ---------------------------------------------------------------------------------------------


def _store_row_sets(conn: duckdb.DuckDBPyConnection, execution_ids: Sequence[str]) -> _RowSets:
    """Digests of the rows the store holds for `execution_ids`, read in batches."""
    row_sets = _RowSets()
    for spec in store_table_specs():
        cursor = conn.execute(
            f"SELECT {', '.join(_column_sql(c) for c in spec.columns)} FROM {_quote(spec.name)} "
            "WHERE list_contains($ids, execution_id)",
            {"ids": list(execution_ids)},
        )
        while batch := cursor.fetchmany(_FETCH_ROWS):
            for values in batch:
                row = dict(zip(spec.column_names, values, strict=True))
                row_sets.add(spec.name, row["execution_id"], _row_digest(spec, row))
    return row_sets


@dataclass(slots=True)
class _ImportPlan:
    """What to do with each execution of a bundle, decided against the store's rows."""

    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    running: list[str] = field(default_factory=list)


def _plan_import(conn: duckdb.DuckDBPyConnection, scan: _Scan, *, replace: bool) -> _ImportPlan:
    ours = _store_row_sets(conn, scan.execution_ids)
    stored_statuses = dict(
        conn.execute(
            "SELECT execution_id, status FROM executions WHERE list_contains($ids, execution_id)",
            {"ids": list(scan.execution_ids)},
        ).fetchall()
    )
    plan = _ImportPlan()
    for execution_id in scan.execution_ids:
        differing = [
            spec.name
            for spec in store_table_specs()
            if ours.of(spec.name, execution_id) != scan.row_sets.of(spec.name, execution_id)
        ]
        stored_status = stored_statuses.get(execution_id)
        if not ours.has(execution_id):
            plan.imported.append(execution_id)
        elif not differing:
            plan.skipped.append(execution_id)
        elif replace and stored_status == "running":
            plan.running.append(execution_id)
        elif replace:
            plan.replaced.append(execution_id)
        else:
            plan.conflicts.append((execution_id, f"different rows (in {', '.join(differing)})"))
    writing = set(plan.imported) | set(plan.replaced)
    call_ids = [call for eid in sorted(writing) for call in scan.call_ids.get(eid, ())]
    if call_ids:
        for call_id, owner in conn.execute(
            "SELECT call_id, execution_id FROM llm_calls WHERE list_contains($calls, call_id) "
            "AND NOT list_contains($writing, execution_id)",
            {"calls": call_ids, "writing": sorted(writing)},
        ).fetchall():
            plan.conflicts.append((owner, f"an LLM call {call_id!r} that the bundle also holds"))
    return plan


def _conflict_error(db: str, scan: _Scan, conflicts: Sequence[tuple[str, str]]) -> BundleError:
    execution_id, difference = conflicts[0]
    more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
    rows_differ = difference.startswith("different rows")
    hint = (
        "; the bundle is redacted, so it differs from an unredacted recording of the same run"
        if scan.manifest["redaction"]["applied"] and rows_differ
        else ""
    )
    remedy = "pass --replace to overwrite" if rows_differ else "an LLM call id is unique"
    return BundleConflictError(
        f"{db}: execution {execution_id} is already in the store with {difference}{more}{hint}; "
        f"nothing was imported ({remedy})"
    )


def _insert_rows(
    conn: duckdb.DuckDBPyConnection, spec: TableSpec, rows: Sequence[Mapping[str, Any]]
) -> None:
    if not rows:
        return
    schema = pa.schema([(column.name, _ARROW_TYPES[column.type]) for column in spec.columns])
    staging = pa.Table.from_pylist([dict(row) for row in rows], schema=schema)
    view_name = f"bundle_{spec.name}"
    columns = ", ".join(_quote(column.name) for column in spec.columns)
    casts = ", ".join(f"CAST({_quote(column.name)} AS {column.type})" for column in spec.columns)
    conn.register(view_name, staging)
    try:
        conn.execute(f"INSERT INTO {_quote(spec.name)} ({columns}) SELECT {casts} FROM {view_name}")
    finally:
        with contextlib.suppress(duckdb.Error):
            conn.unregister(view_name)


def _row_bytes(row: Mapping[str, Any]) -> int:
    return sum(len(value) for value in row.values() if isinstance(value, str | bytes))


def _insert_table(
    conn: duckdb.DuckDBPyConnection,
    path: Path,
    archive: zipfile.ZipFile,
    scan: _Scan,
    spec: TableSpec,
    writing: set[str],
    limits: BundleLimits,
    *,
    commit_batches: bool,
) -> int:
    """Stream one table member into the store in bounded batches; return the rows written.

    With `commit_batches`, each batch is its own transaction, so DuckDB writes it out.
    """
    batch: list[dict[str, Any]] = []
    batch_bytes = 0
    written = 0

    def write() -> None:
        if commit_batches:
            conn.execute("BEGIN TRANSACTION")
            try:
                _insert_rows(conn, spec, batch)
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        else:
            _insert_rows(conn, spec, batch)

    for row in _table_rows(path, archive, scan, spec, limits):
        if row["execution_id"] not in writing:
            continue
        batch.append(row)
        batch_bytes += _row_bytes(row)
        if len(batch) >= _INSERT_ROWS or batch_bytes >= _INSERT_BYTES:
            write()
            written += len(batch)
            batch, batch_bytes = [], 0
    if batch:
        write()
    return written + len(batch)


def _rollback(conn: duckdb.DuckDBPyConnection) -> None:
    # A failed COMMIT has already rolled back; the original error is the one to report.
    with contextlib.suppress(duckdb.Error):
        conn.execute("ROLLBACK")


def _delete_rows(
    conn: duckdb.DuckDBPyConnection, execution_ids: Sequence[str], *, orphans_only: bool
) -> None:
    """Delete the executions' rows in every table (with `orphans_only`, rows with no execution)."""
    for spec in store_table_specs():
        if orphans_only and spec.name == "executions":
            continue
        orphan = (
            " AND execution_id NOT IN (SELECT execution_id FROM executions)" if orphans_only else ""
        )
        conn.execute(
            f"DELETE FROM {_quote(spec.name)} WHERE list_contains($ids, execution_id){orphan}",
            {"ids": list(execution_ids)},
        )


def _write_bundle(
    conn: duckdb.DuckDBPyConnection,
    db_label: str,
    path: Path,
    archive: zipfile.ZipFile,
    scan: _Scan,
    limits: BundleLimits,
    *,
    replace: bool,
) -> tuple[_ImportPlan, dict[str, int]]:
    """Plan the import against the store, then write it (see `import_bundle`)."""
    row_counts = dict.fromkeys((spec.name for spec in store_table_specs()), 0)
    # DuckDB may cache little during an import, so committed batches are written out; one row
    # must still fit several times over.
    memory_limit = max(_IMPORT_MEMORY_LIMIT, 4 * scan.longest_line)
    conn.execute(f"SET memory_limit = '{memory_limit // _MIB}MiB'")
    conn.execute("BEGIN TRANSACTION")
    try:
        # Rows a crashed import left behind have no executions row; they are not the store's.
        _delete_rows(conn, scan.execution_ids, orphans_only=True)
        plan = _plan_import(conn, scan, replace=replace)
        if plan.running:
            raise BundleConflictError(
                f"{db_label}: execution {plan.running[0]} is still running in the store (its "
                "recorder may be writing it), so --replace leaves it alone; nothing was "
                "imported (import again once it has finished or shows as interrupted)"
            )
        if plan.conflicts:
            raise _conflict_error(db_label, scan, plan.conflicts)
        writing = set(plan.imported) | set(plan.replaced)
        specs = sorted(store_table_specs(), key=lambda spec: spec.name == "executions")
        if plan.replaced:  # a replacement stays one transaction with the whole import
            _delete_rows(conn, plan.replaced, orphans_only=False)
            for spec in specs:
                row_counts[spec.name] = _insert_table(
                    conn, path, archive, scan, spec, writing, limits, commit_batches=False
                )
            conn.execute("COMMIT")
            return plan, row_counts
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    try:
        for spec in specs[:-1]:
            row_counts[spec.name] = _insert_table(
                conn, path, archive, scan, spec, writing, limits, commit_batches=True
            )
        conn.execute("BEGIN TRANSACTION")
        row_counts["executions"] = _insert_table(
            conn, path, archive, scan, specs[-1], writing, limits, commit_batches=False
        )
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        with contextlib.suppress(duckdb.Error):
            _delete_rows(conn, sorted(writing), orphans_only=True)
        raise
    return plan, row_counts


def import_bundle(
    db_path: str | os.PathLike[str],
    bundle_path: str | os.PathLike[str],
    *,
    replace: bool = False,
    limits: BundleLimits | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> ImportResult:
    """Validate the bundle completely, then write its executions into the store.

    Validation and writing both stream the members. New executions are written in committed
    batches while this process holds the file, each execution's `executions` row last and
    together, so no reader ever sees a partial execution (rows left by a crash have no
    `executions` row and are removed by the next import of that execution); memory stays
    bounded by one row and one batch whatever the bundle's size. An execution already in the
    store with identical rows is skipped, so importing twice changes nothing. One with different
    rows is refused (BundleConflictError, nothing written) unless `replace`, which deletes its
    rows first, in one transaction with the whole import. The store is created when missing.
    """
    path = Path(bundle_path)
    limits = limits or BundleLimits()
    with _open_archive(path, limits) as archive:
        scan = _scan_bundle(path, archive, limits)
        paths = store_paths(db_path)
        store = Store(paths, lock_timeout_s=lock_timeout_s)
        with store.session(create=True) as conn:
            try:
                plan, row_counts = _write_bundle(conn, store.path, path, archive, scan, limits,
                                                 replace=replace)  # fmt: skip
            except duckdb.Error as error:
                raise BundleError(
                    f"{store.path}: writing {path} failed ({_first_line(error)}); nothing "
                    "was imported"
                ) from error
            finally:
                with contextlib.suppress(duckdb.Error):
                    conn.execute("RESET memory_limit")
    return ImportResult(
        bundle=path,
        db=paths.given,
        imported=tuple(plan.imported),
        skipped=tuple(plan.skipped),
        replaced=tuple(plan.replaced),
        row_counts=row_counts,
        redacted=scan.manifest["redaction"]["applied"],
        tool_version=scan.manifest["tool_version"],
    )
