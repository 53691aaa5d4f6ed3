"""Folded rows written to the store: one `INSERT ... SELECT ... ON CONFLICT` per table from Arrow.

Every Arrow table is built before the write (`stage_rows`), so the transaction runs only SQL;
each upsert sets only the columns its events carry (`COALESCE(excluded.c, c)`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from store.ingest.fold import BodyRef, FoldedRows, fold_segments, take_bodies
from store.ingest.segments import json_text
from store.schema import DERIVED_COLUMNS, attempt_search_text_sql, decoded_text_sql

_JSON = pa.large_string()
_TEXT = pa.string()
_TIME = pa.float64()  # epoch seconds in staging; stored as TIMESTAMPTZ (columns named *_at)
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
        ("labels", _JSON),
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
        ("dispatched", pa.bool_()),
        ("parameters", _JSON),
        ("correction_layer", _TEXT),
        ("method", _TEXT),
        ("url", _TEXT),
        ("request_headers", _JSON),
        ("request_body", _BLOB),
        ("request_size", pa.int64()),
        ("http_status", pa.int32()),
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
        ("request_body", _BLOB),
        ("request_size", pa.int64()),
        ("response_status", pa.int32()),
        ("response_body", _BLOB),
        ("response_size", pa.int64()),
        ("raw_text", pa.large_string()),
        ("parsed", _JSON),
        ("parse_error", _TEXT),
        ("error", _TEXT),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("total_tokens", pa.int64()),
        ("latency_ms", pa.float64()),
        ("called_at", _TIME),
        ("response_headers", _JSON),
        ("unsent_messages", _JSON),
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


def _select_expression(column: str) -> str:
    if column.endswith("_at"):
        return f"make_timestamptz(CAST(round({column} * 1000000) AS BIGINT)) AS {column}"
    return column


@dataclass(frozen=True, slots=True)
class _StagedInsert:
    """The statements writing a table's rows, in order, from an Arrow table built before the
    write (registered as `staging_<table_name>`)."""

    table_name: str
    statements: tuple[str, ...]
    staging: pa.Table


# The parts of each table's `search_text` (`store.schema.DERIVED_COLUMNS`), in order, and how
# each becomes text there: a BLOB decoded, JSON or text as it is. The staging tables carry each
# part lower-cased by Arrow where it is ASCII (`lower()` of ASCII is ASCII lower-casing, and
# DuckDB decodes an ASCII BLOB as it is); DuckDB lower-cases only the other parts.
# tests/unit/test_store_ingest_bulk.py checks both give the same text.
_SEARCH_TEXT_PARTS: dict[str, tuple[tuple[str, bool], ...]] = {
    "attempts": (("request_body", True), ("response_body", True)),
    "llm_calls": (("request_body", True), ("unsent_messages", False), ("raw_text", False)),
}
_LOWERED_PREFIX = "lowered_"


def _with_lowered_parts(table_name: str, staging: pa.Table) -> pa.Table:
    """`staging` plus a `lowered_<part>` column per search-text part: the part lower-cased
    where it is ASCII, null elsewhere (and where the part is null).

    A body handed over as a dictionary (`take_bodies(..., as_dictionary=True)`) is lowered as
    a dictionary too, but only at the pieces its rows index: the rest of the dictionary (a
    journal's other records and frame bytes) is never copied, so a big body costs one lowered
    copy of itself, not of its whole journal."""
    for column, _ in _SEARCH_TEXT_PARTS.get(table_name, ()):
        values = staging.column(column)
        if pa.types.is_dictionary(values.type):
            lowered = pa.chunked_array(
                [_ascii_lowered_rows(chunk) for chunk in values.chunks], _LOWERED_DICTIONARY
            )
        else:
            # A BLOB's bytes seen as text without a UTF-8 check: only its ASCII rows are used.
            text_type = pa.large_string() if _is_large(values.type) else pa.string()
            lowered = pa.chunked_array(
                [_ascii_lowered(chunk.view(text_type)) for chunk in values.chunks], text_type
            )
        staging = staging.append_column(_LOWERED_PREFIX + column, lowered)
    return staging


_LOWERED_DICTIONARY = pa.dictionary(pa.int64(), pa.large_string())
_LOWER_IN_ARROW_MAX = 1 << 20


def _ascii_lowered_rows(chunk: pa.DictionaryArray) -> pa.DictionaryArray:
    """A dictionary chunk's rows lower-cased where ASCII, null elsewhere: indices into the
    lower-cased pieces the rows use (each used piece copied once, the others not at all)."""
    indices = chunk.indices
    used = pc.unique(indices.drop_null()) if indices.null_count else pc.unique(indices)
    # A piece over `_LOWER_IN_ARROW_MAX` is left null: DuckDB lowers it from the stored column
    # (the same text) rather than Arrow holding a lowered copy beside the staged body.
    used = used.filter(
        pc.less_equal(pc.binary_length(chunk.dictionary).take(used), _LOWER_IN_ARROW_MAX)
    )
    if not len(used):
        return pa.DictionaryArray.from_arrays(
            pa.nulls(len(chunk), pa.int64()), pa.array([], pa.large_string())
        )
    text = chunk.dictionary.take(used).view(pa.large_string())  # unchecked: ASCII rows only
    ascii_pieces = pc.fill_null(pc.string_is_ascii(text), False)
    positions = pc.index_in(indices, value_set=used)
    ascii_rows = pc.fill_null(ascii_pieces.take(positions), False)
    return pa.DictionaryArray.from_arrays(
        pc.if_else(ascii_rows, positions.cast(pa.int64()), None), pc.ascii_lower(text)
    )


def _ascii_lowered(text: pa.Array) -> pa.Array:
    """`text` lower-cased where it is ASCII, null elsewhere: Arrow's lower-casing, with the
    non-ASCII rows masked by a validity bitmap rather than copied out by `if_else`."""
    lowered = pc.ascii_lower(text)
    ascii_rows = pc.fill_null(pc.string_is_ascii(text), False)
    if lowered.offset or ascii_rows.offset or not len(lowered):
        return pc.if_else(ascii_rows, lowered, None)
    return pa.Array.from_buffers(
        lowered.type, len(lowered), [ascii_rows.buffers()[1], *lowered.buffers()[1:]]
    )


def _staging_table(
    schema: pa.Schema, rows: list[dict[str, Any]], bodies: dict[str, list[pa.Array]] | None
) -> pa.Table:
    """The rows as an Arrow table of `schema`; a body column whose rows hold `BodyRef`s is
    the segments' column (`bodies`) indexed, uncopied: dictionary<int64, large_binary> over
    the mapped journals instead of the schema's large binary (DuckDB reads it as BLOB)."""
    taken: dict[str, pa.ChunkedArray] = {}
    for name in schema.names:
        if not bodies or name not in bodies:
            continue
        values = [row.get(name) for row in rows]
        if all(value is None or isinstance(value, BodyRef) for value in values):
            refs = [None if value is None else value.row for value in values]
            taken[name] = take_bodies(bodies[name], refs, as_dictionary=True)
    if not taken:
        return pa.Table.from_pylist(rows, schema=schema)
    rest = pa.schema([item for item in schema if item.name not in taken])
    table = pa.Table.from_pylist(rows, schema=rest)
    columns = [taken[name] if name in taken else table.column(name) for name in schema.names]
    return pa.Table.from_arrays(columns, names=schema.names)


def _is_large(data_type: pa.DataType) -> bool:
    return pa.types.is_large_binary(data_type) or pa.types.is_large_string(data_type)


def _search_text_sql(table_name: str) -> str:
    """The `search_text` of a new row from the staged parts (see `_SEARCH_TEXT_PARTS`)."""
    parts = []
    for column, is_blob in _SEARCH_TEXT_PARTS[table_name]:
        text = decoded_text_sql(column) if is_blob else f"CAST({column} AS VARCHAR)"
        parts.append(f"coalesce({_LOWERED_PREFIX}{column}, lower({text}))")
    return f"concat_ws(chr(10), {', '.join(parts)})"


def _stage_table(
    table_name: str,
    schema: pa.Schema,
    rows: Iterable[dict[str, Any]],
    *,
    key: tuple[str, ...] = (),
    on_conflict: str = "",
    overrides: dict[str, str] | None = None,
    bodies: dict[str, list[pa.Array]] | None = None,
) -> _StagedInsert | None:
    """The statements writing `rows` into `table_name`; None for no rows.

    `on_conflict` is "" (plain insert), "ignore" (rows whose key is stored are left out), or
    "merge" (non-null new values win). Rows new to the table are one plain `INSERT ... SELECT`
    (an anti-join on the key finds them); only rows already stored go through `ON CONFLICT`,
    which costs DuckDB several times a plain insert. The table's derived columns
    (`store.schema.DERIVED_COLUMNS`) are computed in the statements.
    """
    row_list = list(rows)
    if not row_list:
        return None
    staging = _with_lowered_parts(table_name, _staging_table(schema, row_list, bodies))
    derived = DERIVED_COLUMNS.get(table_name, {})
    columns = [*schema.names, *derived]
    plain = [_select_expression(c) for c in schema.names]
    new_rows = [
        *plain,
        *(
            f"{_search_text_sql(table_name) if name == 'search_text' else expression} AS {name}"
            for name, expression in derived.items()
        ),
    ]
    insert = f"INSERT INTO {table_name} ({', '.join(columns)}) "
    source = f"FROM staging_{table_name}"
    insert_all = f"{insert}SELECT {', '.join(new_rows)} {source}"
    if not on_conflict:
        return _StagedInsert(table_name, (insert_all,), staging)
    using = f"{table_name} USING ({', '.join(key)})"
    insert_new = f"{insert_all} ANTI JOIN {using}"
    if on_conflict == "ignore":
        return _StagedInsert(table_name, (insert_new,), staging)
    overrides = overrides or {}
    assignments = [
        f"{c} = {overrides.get(c, f'COALESCE(excluded.{c}, {table_name}.{c})')}"
        for c in columns
        if c not in key
    ]
    # A derived column whose override recomputes it from the merged row is not computed for
    # the staged row too (for a big body, that is three body-sized strings saved).
    stored = [
        *plain,
        *(
            f"NULL AS {name}"
            if name in overrides and f"excluded.{name}" not in overrides[name]
            else f"{expression} AS {name}"
            for name, expression in derived.items()
        ),
    ]
    # An UPDATE from the staged rows rather than `INSERT ... ON CONFLICT DO UPDATE`: DuckDB's
    # conflict path holds several copies of each row (a 20 MB body cost ~250 MB there).
    matches = " AND ".join(f"{table_name}.{c} = excluded.{c}" for c in key)
    merge_stored = (
        f"UPDATE {table_name} SET {', '.join(assignments)} "
        f"FROM (SELECT {', '.join(stored)} {source} SEMI JOIN {using}) AS excluded "
        f"WHERE {matches}"
    )
    # The stored rows first: once merged, the anti-join leaves them out of the plain insert.
    return _StagedInsert(table_name, (merge_stored, insert_new), staging)


def _run_staged(conn: duckdb.DuckDBPyConnection, insert: _StagedInsert) -> None:
    view_name = f"staging_{insert.table_name}"
    conn.register(view_name, insert.staging)
    try:
        for statement in insert.statements:
            conn.execute(statement)
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
        _run_staged(conn, _StagedInsert("planned_steps", (_FILL_STEPS_FROM_PLAN,), staging))


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


def stage_rows(rows: FoldedRows) -> StagedRows:
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
                "THEN excluded.stop_reason ELSE executions.stop_reason END",
            },
        ),
        _stage_table(
            "execution_snapshots",
            _SNAPSHOTS,
            rows.snapshots.values(),
            key=("execution_id",),
            on_conflict="ignore",
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
            bodies=rows.bodies,
            # The search text follows whichever bodies the row has once merged.
            overrides={
                "search_text": attempt_search_text_sql(
                    "COALESCE(excluded.request_body, attempts.request_body)",
                    "COALESCE(excluded.response_body, attempts.response_body)",
                )
            },
        ),
        _stage_table(
            "llm_calls",
            _LLM_CALLS,
            rows.llm_calls.values(),
            key=("call_id",),
            on_conflict="ignore",
            bodies=rows.bodies,
        ),
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


# DuckDB's WAL size past which a commit checkpoints (default 16 MiB), during an ingest batch.
INGEST_CHECKPOINT_THRESHOLD = "1MB"


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
    # A batch past INGEST_CHECKPOINT_THRESHOLD is checkpointed by its COMMIT, which then skips
    # the WAL: the bodies are written once, compressed, into the file, instead of into the WAL
    # (uncompressed) and then the file. A kill before COMMIT returns loses the batch, whose
    # segments are still in the spool: the next session ingests them again.
    conn.execute(f"SET checkpoint_threshold = '{INGEST_CHECKPOINT_THRESHOLD}'")
    try:
        conn.execute("BEGIN TRANSACTION")
        try:
            write_staged(conn, staged)
            if segment_names:
                conn.execute(
                    "INSERT INTO ingested_segments "
                    "SELECT unnest($names), make_timestamptz(CAST($now * 1000000 AS BIGINT))",
                    {"names": list(segment_names), "now": time.time()},
                )
            conn.execute("COMMIT")
        except BaseException:
            # A failed COMMIT has already rolled back; the original error is the one to report.
            with contextlib.suppress(duckdb.Error):
                conn.execute("ROLLBACK")
            raise
    finally:
        with contextlib.suppress(duckdb.Error):
            conn.execute("RESET checkpoint_threshold")
