"""Decoded segment events folded into one row per key per table.

An attempt joins its dispatch, response and decision; a step its start and finish. Later events
win column by column, so rows fold the same way whichever batch an event arrives in.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from store.ingest.segments import BYTES_FIELDS, json_text
from store.spool import WriterIdentity


def _merge(target: dict[str, Any], updates: dict[str, Any]) -> None:
    """Set each non-None value of `updates` on `target` (later events win)."""
    for key, value in updates.items():
        if value is not None:
            target[key] = value


@dataclass(frozen=True, slots=True)
class BodyRef:
    """A request or response body left in the segments' Arrow column: the event's row among
    all the events folded (`FoldedRows.bodies`) and the body's size in bytes."""

    row: int
    size: int


def _size(body: BodyRef | bytes | None) -> int | None:
    if body is None:
        return None
    return body.size if isinstance(body, BodyRef) else len(body)


@dataclass(slots=True)
class FoldedRows:
    """Rows for each table, keyed so that events about the same row fold together."""

    executions: dict[str, dict[str, Any]] = field(default_factory=dict)
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)
    steps: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    attempts: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    llm_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    # Every folded event's request and response body, by row (what a `BodyRef` points at).
    bodies: dict[str, list[pa.Array]] = field(default_factory=dict)

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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
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
            "labels": json_text(data.get("labels") or None),
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    body = data.get("request_body")
    _merge(
        rows.attempt(data["execution_id"], data["step_id"], data["n"]),
        {
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    body = data.get("response_body")
    _merge(
        rows.attempt(data["execution_id"], data["step_id"], data["n"]),
        {
            "http_status": data.get("status"),
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
    decision = data.get("decision") or {}
    dispatched = bool(data.get("dispatched"))
    row = rows.attempt(data["execution_id"], data["step_id"], data["n"])
    _merge(
        row,
        {
            "dispatched": dispatched,
            # A dispatched attempt keeps the parameters it was sent with.
            "parameters": None if dispatched else json_text(data.get("parameters")),
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
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
        "response_headers": json_text(data.get("response_headers") or None),
        # The prompt is stored once: as the request bytes, or here when none was sent.
        "unsent_messages": json_text(data.get("messages"))
        if text_recorded and not _size(request_body)
        else None,
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
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
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
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


def _fold_other(
    rows: FoldedRows, seq: int, data: dict[str, Any], writer: WriterIdentity | None
) -> None:
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
                if key not in BYTES_FIELDS and key != "_kind"
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


def fold_segments(tables: Iterable[pa.Table]) -> FoldedRows:
    """Decode segment tables in order and fold their events into rows.

    Only the small columns become Python values; the bodies stay in Arrow, each row holding a
    `BodyRef` to its event's body, so a 20 KB body is copied by Arrow, never by Python.
    """
    rows = FoldedRows()
    table_list = list(tables)
    first_row = 0
    for table in table_list:
        writer = WriterIdentity.from_metadata(table.schema.metadata)
        bodies = [
            (name, table.column(name).is_valid().to_pylist(), _lengths(table.column(name)))
            for name in BYTES_FIELDS
        ]
        payloads = table.column("payload").to_pylist()
        columns = zip(
            table.column("seq").to_pylist(),
            table.column("kind").to_pylist(),
            table.column("execution_id").to_pylist(),
            strict=True,
        )
        for index, (seq, kind, execution_id) in enumerate(columns):
            payload, payloads[index] = payloads[index], None  # a big payload freed once parsed
            data = json.loads(payload) if payload else {}
            del payload
            data["_kind"] = kind
            data.setdefault("execution_id", execution_id)
            for body_field, present, sizes in bodies:
                if present[index]:
                    data[body_field] = BodyRef(first_row + index, sizes[index])
            rows.add(kind, seq, data, writer)
        first_row += table.num_rows
    rows.bodies = {
        name: [
            chunk
            if chunk.type == pa.large_binary() or pa.types.is_dictionary(chunk.type)
            else chunk.cast(pa.large_binary())
            for table in table_list
            for chunk in table.column(name).chunks
        ]
        for name in BYTES_FIELDS
    }
    return rows


def _lengths(column: pa.ChunkedArray) -> list[int | None]:
    sizes: list[int | None] = []
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):  # a journal's pieces: lengths of those taken
            sizes.extend(pc.binary_length(chunk.dictionary).take(chunk.indices).to_pylist())
        else:
            sizes.extend(pc.binary_length(chunk).to_pylist())
    return sizes


def take_bodies(
    chunks: Sequence[pa.Array], rows: Sequence[int | None], *, as_dictionary: bool = False
) -> pa.ChunkedArray:
    """The bodies at `rows` (None: null) among the consecutive `chunks` of `FoldedRows.bodies`,
    as large binary. A journal's dictionary chunk is decoded only at the rows taken, so each
    body is copied once, here, by Arrow; runs of rows from one chunk are taken together.

    With `as_dictionary` nothing is copied: the result is dictionary<int64, large_binary>,
    each run's indices into its chunk's dictionary (a journal's mapped pieces, or a plain
    chunk itself), which DuckDB reads as BLOB without a copy in Python's memory."""
    take_from = _dictionary_from if as_dictionary else _take_from
    result_type = BODY_DICTIONARY if as_dictionary else pa.large_binary()
    starts = [0]
    for chunk in chunks:
        starts.append(starts[-1] + len(chunk))
    pieces: list[pa.Array] = []
    run: list[int | None] = []
    run_chunk = 0

    def flush() -> None:
        if run:
            pieces.append(take_from(chunks[run_chunk], run))
            run.clear()

    for row in rows:
        if row is None:
            run.append(None)
            continue
        index = bisect.bisect_right(starts, row) - 1
        if index != run_chunk and any(item is not None for item in run):
            flush()
        if index != run_chunk:
            # Leading nulls of a run belong to whichever chunk the run takes from.
            run_chunk = index
        run.append(row - starts[index])
    if run:
        if not chunks:
            return pa.chunked_array([pa.nulls(len(run), result_type)], result_type)
        flush()
    return pa.chunked_array(pieces, type=result_type)


# The type of bodies handed to DuckDB uncopied (`take_bodies(..., as_dictionary=True)`).
BODY_DICTIONARY = pa.dictionary(pa.int64(), pa.large_binary())


def _dictionary_from(chunk: pa.Array, rows: list[int | None]) -> pa.Array:
    indices = pa.array(rows, pa.int64())
    if pa.types.is_dictionary(chunk.type):
        return pa.DictionaryArray.from_arrays(chunk.indices.take(indices), chunk.dictionary)
    if chunk.type != pa.large_binary():
        chunk = chunk.cast(pa.large_binary())
    return pa.DictionaryArray.from_arrays(indices, chunk)


def _take_from(chunk: pa.Array, rows: list[int | None]) -> pa.Array:
    indices = pa.array(rows, pa.int64())
    if pa.types.is_dictionary(chunk.type):
        return chunk.dictionary.take(chunk.indices.take(indices))
    return chunk.take(indices)
