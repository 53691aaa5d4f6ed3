"""Executor events as spool segment records: at-rest redaction, JSON payloads, Arrow tables.

Events travel as Arrow segments, one row per event: its JSON payload (headers, URLs, failure
texts and LLM settings redacted at rest) plus the exact request and response bytes.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import math
import os
import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from executor.eventlog import event_fields
from executor.redact import Place, RedactionLevel, redact
from store.spool import WriterIdentity

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _use_system_arrow_pool() -> None:
    """Make the C library's allocator Arrow's default pool, unless ARROW_DEFAULT_MEMORY_POOL
    chose one: Arrow's own default, mimalloc, keeps ~20–30 MB of an ingest's freed buffers
    reserved, so a long run's resident memory stepped up with every batch it stored."""
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ and (
        pa.default_memory_pool().backend_name == "mimalloc"
    ):
        pa.set_memory_pool(pa.system_memory_pool())


_use_system_arrow_pool()

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
BYTES_FIELDS = ("request_body", "response_body")
# One event as a segment row: seq, kind, execution id, JSON payload, request and response body.
SegmentRecord = tuple[int, str, str | None, str | None, bytes | None, bytes | None]
# Event fields holding a URL, whose userinfo and credential query parameters are redacted.
_URL_FIELDS = ("url", "base_url")
# Failure texts can quote a URL or a credential (`request failed: … api_key=…`).
_ERROR_TEXT_FIELDS = ("transport_error_message", "error")


def json_text(value: Any) -> str | None:
    """`value` as JSON text that DuckDB accepts; None for None.

    Bytes become base64 text, NaN and infinities null, lone surrogates (not Unicode) U+FFFD,
    and any other unknown value its str().
    """
    if value is None:
        return None
    try:
        text = _STRICT_ENCODER.encode(value)
    except ValueError:
        text = _ENCODER.encode(_finite(value))
    if not text.isascii():
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


# `json.dumps` with options builds an encoder per call; these are built once (same output).
_STRICT_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_json_default)
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_json_default)


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
    values = event_fields(event, omit=_omitted_fields(event))
    for name in _REDACTED_TEXT_FIELDS:
        if isinstance(values.get(name), str):
            place, text = _TEXT_FIELD_PLACES[name], values[name]
            cached = len(text) <= _CACHED_TEXT_CHARS
            values[name] = _redacted_text(place, text) if cached else _redact_at_rest(place, text)
    for header_field in ("request_headers", "response_headers"):
        headers = values.get(header_field)
        if isinstance(headers, dict):
            values[header_field] = {
                name: _redacted_header(name, text)
                for name, text in ((str(k), str(v)) for k, v in headers.items())
            }
    if values.get("llm") is not None:
        values["llm"] = _redact_at_rest(Place.LLM_SETTINGS, values["llm"])
    if isinstance(values.get("plan"), dict):
        values["plan"] = _redact_at_rest(Place.PLAN, values["plan"])
    return values


# An LLM call's prompt is stored once, as its request bytes (`llm_calls.request_body`); the
# `messages` beside them would only double the journal, so they travel only when none was sent.
_OMIT_WITH_REQUEST = (*BYTES_FIELDS, "messages")


def _omitted_fields(event: Any) -> tuple[str, ...]:
    if getattr(event, "kind", None) == "llm_call" and getattr(event, "request_body", None):
        return _OMIT_WITH_REQUEST
    return BYTES_FIELDS


_TEXT_FIELD_PLACES = {
    **dict.fromkeys(_URL_FIELDS, Place.URL),
    **dict.fromkeys(_ERROR_TEXT_FIELDS, Place.ERROR_TEXT),
}
_REDACTED_TEXT_FIELDS = tuple(_TEXT_FIELD_PLACES)


def _redact_at_rest(place: Place, value: Any) -> Any:
    return redact(RedactionLevel.AT_REST, place, value)


# Redaction is a pure function of the text; a run repeats the same URLs and headers per step.
_CACHED_TEXT_CHARS = 4096
_redacted_text = functools.lru_cache(maxsize=1024)(_redact_at_rest)


def _redacted_header(name: str, value: str) -> str:
    """One header's value as at-rest redaction keeps it (headers are redacted one by one)."""
    if len(value) > _CACHED_TEXT_CHARS:
        return _redact_at_rest(Place.HEADERS, {name: value})[name]
    return _redacted_header_cached(name, value)


# Keyed by header, not by header map: a step's own ids make every request's map new.
@functools.lru_cache(maxsize=4096)
def _redacted_header_cached(name: str, value: str) -> str:
    return _redact_at_rest(Place.HEADERS, {name: value})[name]


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
