"""The bundle format: member names, the store's tables as a bundle carries them, and how
rows are encoded as JSON Lines and decoded back with validation.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import gc
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pybase64

from store.errors import StoreError
from store.schema import DERIVED_COLUMNS, MIGRATIONS, SCHEMA_VERSION, STORE_TABLES

BUNDLE_FORMAT = "truva-bundle"
BUNDLE_VERSION = 1
MANIFEST_MEMBER = "manifest.json"
README_MEMBER = "README.txt"
SPANS_MEMBER = "spans.otlp.json"
TABLES_FOLDER = "tables"


MIB = 1024 * 1024


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off for a bulk step that makes many small acyclic objects
    (row dicts, span attributes), where its passes over the live rows cost a fifth of the
    time; reference counting still frees them. Back on (if it was) afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


TIMESTAMPTZ = "TIMESTAMP WITH TIME ZONE"  # as DuckDB names the type
_TIMESTAMP_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?$")


_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
# Non-finite DOUBLE values are written as these strings; JSON has no token for them.
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class BundleError(StoreError):
    """A bundle that cannot be imported; nothing was written. The message names file and problem."""


class BundleConflictError(BundleError):
    """The store already holds an execution of the bundle with different rows."""


class BundleExportError(StoreError):
    """The executions cannot be exported to the requested file; nothing was written."""


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
    # The column names, in order and as a set, and each column's name with its `fast_decoder`
    # (kept: an import reads them for every row).
    column_names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    column_set: frozenset[str] = field(init=False, repr=False, compare=False)
    decoders: tuple[tuple[str, Callable[[Any], Any]], ...] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "column_names", tuple(column.name for column in self.columns))
        object.__setattr__(self, "column_set", frozenset(self.column_names))
        decoders = tuple((column.name, fast_decoder(column)) for column in self.columns)
        object.__setattr__(self, "decoders", decoders)

    @property
    def member(self) -> str:
        """The bundle member holding this table's rows."""
        return f"{TABLES_FOLDER}/{self.name}.jsonl"


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


def store_table_specs(version: int = SCHEMA_VERSION) -> tuple[TableSpec, ...]:
    """The bundled tables of store schema `version`, from an in-memory copy of that schema.

    Derived columns (`store.schema.DERIVED_COLUMNS`) are left out; import computes them.
    Built once per version (`store_table_specs()` and `store_table_specs(3)` share it).
    """
    return _table_specs(version)


@functools.cache
def _table_specs(version: int) -> tuple[TableSpec, ...]:
    conn = duckdb.connect(":memory:")
    try:
        for migration in MIGRATIONS:
            if migration.version <= version:
                for statement in migration.statements:
                    conn.execute(statement)
        specs = []
        for table in STORE_TABLES:
            derived = DERIVED_COLUMNS.get(table, {})
            columns = tuple(
                ColumnSpec(name=name, type=data_type, nullable=bool(nullable))
                for name, data_type, nullable in conn.execute(
                    "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
                    "WHERE table_name = $table AND database_name = current_database() "
                    "ORDER BY column_index",
                    {"table": table},
                ).fetchall()
                if name not in derived
            )
            key_row = conn.execute(
                "SELECT constraint_column_names FROM duckdb_constraints() "
                "WHERE table_name = $table AND constraint_type = 'PRIMARY KEY' "
                "AND database_name = current_database()",
                {"table": table},
            ).fetchone()
            unsupported = [c for c in columns if c.type not in ARROW_TYPES]
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


ARROW_TYPES: dict[str, pa.DataType] = {
    "VARCHAR": pa.large_string(),
    "JSON": pa.large_string(),
    "TIMESTAMP": pa.large_string(),
    TIMESTAMPTZ: pa.large_string(),
    "BLOB": pa.large_binary(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "VARCHAR[]": pa.list_(pa.large_string()),
}

# How each column type is written in a JSONL row (the manifest repeats it per column).
COLUMN_ENCODINGS = {
    "BLOB": "base64",
    "JSON": "json_text",
    "TIMESTAMP": "utc_timestamp_text",
    TIMESTAMPTZ: "utc_timestamp_text",
    "DOUBLE": "number_or_nonfinite_text",
}


def column_sql(column: ColumnSpec) -> str:
    """The SELECT expression that reads a column as its raw bundle value."""
    quoted = quote(column.name)
    if column.type == TIMESTAMPTZ:
        return f"CAST(timezone('UTC', {quoted}) AS VARCHAR) AS {quoted}"
    if column.type in ("JSON", "TIMESTAMP"):
        return f"CAST({quoted} AS VARCHAR) AS {quoted}"
    return quoted


def insert_sql(column: ColumnSpec) -> str:
    """The SELECT expression that turns a raw bundle value back into the column's type."""
    quoted = quote(column.name)
    if column.type == TIMESTAMPTZ:  # the text is UTC, whatever the session's time zone
        return f"timezone('UTC', CAST({quoted} AS TIMESTAMP))"
    return f"CAST({quoted} AS {column.type})"


def upgrade_row(table: str, row: dict[str, Any], version: int) -> dict[str, Any]:
    """A row of store schema `version` with the current schema's names for its values.

    Before version 3, `attempts.status` was the HTTP status and an LLM call's prompt was kept
    twice (`messages` beside the request bytes); `attempt_number` is now derived.
    """
    if version < 3 and table == "attempts":
        row["http_status"] = row.pop("status", None)
    if version < 3 and table == "llm_calls":
        messages = row.pop("messages", None)
        if not row.get("request_body"):
            row["unsent_messages"] = messages
    return row


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _row_order(spec: TableSpec) -> str:
    """ORDER BY for a table's rows in the order of all their columns (ORDER BY ALL): the leading
    columns up to the last primary-key column hold the unique key, so later columns never break
    a tie and 20 KB bodies are never compared; ALL for a table without a key."""
    if not spec.primary_key:
        return "ALL"
    names = spec.column_names
    end = max(names.index(name) for name in spec.primary_key) + 1
    return ", ".join(quote(name) for name in names[:end])


_ROWID = '"__bundle_rowid"'  # no column's name


def read_execution_rows(
    conn: duckdb.DuckDBPyConnection, execution_ids: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """Every bundled table's rows for `execution_ids`, as raw values, in a stable order.

    The ids' range is a filter too (the same rows): DuckDB skips the row groups outside it
    by their min/max, which it cannot do for `list_contains` (a batch of an export reads ids
    next to each other). DuckDB sorts only the rows' ids (`rowid`) by `_row_order`; the rows
    are read unsorted and put in that order here: its sort carried the 20 KB bodies along
    (warm, `make bench`'s 80 MB of LLM calls: 0.068 s instead of 0.123). Both reads see the same
    rows: the caller's session holds the store, so nothing writes it in between."""
    rows: dict[str, list[dict[str, Any]]] = {}
    if not execution_ids:
        return {spec.name: [] for spec in store_table_specs()}
    ids = list(execution_ids)
    parameters = {"ids": ids, "first": min(ids), "last": max(ids)}
    where = "WHERE execution_id BETWEEN $first AND $last AND list_contains($ids, execution_id)"
    for spec in store_table_specs():
        order = _row_order(spec)
        if order == "ALL":  # of the raw values, in column order, as `ORDER BY ALL` would
            order = ", ".join(quote(name) for name in spec.column_names)
        select = (
            f"SELECT rowid AS {_ROWID}, {', '.join(column_sql(c) for c in spec.columns)} "
            f"FROM {quote(spec.name)} {where}"
        )
        ranks = {
            rowid: rank
            for rank, (rowid,) in enumerate(
                conn.execute(
                    f"SELECT {_ROWID} FROM ({select}) ORDER BY {order}", parameters
                ).fetchall()
            )
        }
        cursor = conn.execute(select, parameters)
        placed: list[Any] = [None] * len(ranks)
        names = spec.column_names
        for values in cursor.fetchall():
            placed[ranks[values[0]]] = dict(zip(names, values[1:], strict=True))
        rows[spec.name] = placed
    return rows


def follows_execution_order(
    conn: duckdb.DuckDBPyConnection, spec: TableSpec, execution_ids: Sequence[str]
) -> bool:
    """Whether `read_execution_rows`' order of the table never goes back to an earlier
    execution id, so reading executions in id order, a few at a time, gives the same rows in
    the same order."""
    names = spec.column_names
    if names and names[0] == "execution_id":
        return True
    if not spec.primary_key:
        return False  # ORDER BY ALL over other columns first: not worth a check
    cursor = conn.execute(
        f"SELECT count(*) FROM (SELECT execution_id, lag(execution_id) OVER "
        f"(ORDER BY {_row_order(spec)}) AS previous FROM {quote(spec.name)} "
        "WHERE list_contains($ids, execution_id)) WHERE previous > execution_id",
        {"ids": list(execution_ids)},
    )
    row = cursor.fetchone()
    return row is not None and row[0] == 0


def execution_weights(
    conn: duckdb.DuckDBPyConnection, execution_ids: Sequence[str], row_bytes: int
) -> list[tuple[str, int]]:
    """`execution_ids` in the store's id order, each with its rows' weight: `row_bytes` a row
    and the bytes of its BLOB cells."""
    parts = []
    for spec in store_table_specs():
        blobs = [
            f"coalesce(octet_length({quote(c.name)}), 0)" for c in spec.columns if c.type == "BLOB"
        ]
        parts.append(
            f"SELECT execution_id, {' + '.join([str(int(row_bytes)), *blobs])} AS weight "
            f"FROM {quote(spec.name)} WHERE list_contains($ids, execution_id)"
        )
    cursor = conn.execute(
        f"SELECT execution_id, CAST(sum(weight) AS BIGINT) FROM ({' UNION ALL '.join(parts)}) "
        "GROUP BY execution_id ORDER BY execution_id",
        {"ids": list(execution_ids)},
    )
    return [(execution_id, int(weight)) for execution_id, weight in cursor.fetchall()]


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


def row_line(spec: TableSpec, row: Mapping[str, Any]) -> bytes:
    """The JSON line of a raw row: the bytes of `json.dumps(encode_row(spec, row))`, compact.

    Built cell by cell: a BLOB's base64 (which JSON never escapes) goes in as bytes, so the
    bodies are not decoded to text, scanned for escapes and encoded again; text, integers,
    booleans and finite floats go through the encoder's own primitives (`_SCALAR_TEXT`),
    skipping a `json.dumps` call per cell.
    """
    pieces = []
    append = pieces.append
    for column, key in zip(spec.columns, _line_keys(spec), strict=True):
        value = row[column.name]
        append(key)  # `{"name":` or `,"name":`
        if value is None:
            append(b"null")
        elif column.type == "BLOB":  # pieces, so the body's base64 is copied once, by the join
            append(b'"')
            append(pybase64.b64encode(value))
            append(b'"')
        else:
            scalar = _SCALAR_TEXT.get(type(value))
            if scalar is not None and (type(value) is not float or math.isfinite(value)):
                text = scalar(value)
            else:
                text = json.dumps(
                    encode_value(column, value),
                    ensure_ascii=False,
                    separators=(",", ":"),
                    allow_nan=False,
                )
            append(text.encode("utf-8"))
    append(b"}\n")
    return b"".join(pieces)


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


# What `json.dumps(value, ensure_ascii=False)` writes for a value of exactly these types (the
# functions its encoder calls); a non-finite float is left to `encode_value`.
_SCALAR_TEXT: dict[type, Callable[[Any], str]] = {
    str: json.encoder.encode_basestring,  # type: ignore[attr-defined]
    int: int.__repr__,
    float: float.__repr__,
    bool: _bool_text,
}


@functools.cache
def _line_keys(spec: TableSpec) -> tuple[bytes, ...]:
    """Each column's `"name":` as a line writes it, after the line's `{` or the cell's `,`."""
    return tuple(
        (("{" if index == 0 else ",") + json.dumps(column.name, ensure_ascii=False) + ":").encode(
            "utf-8"
        )
        for index, column in enumerate(spec.columns)
    )


class BundleValueError(ValueError):
    """A bundle value that does not fit its column; the message says what was expected."""


def describe(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=True) if not isinstance(value, bytes) else repr(value)
    except RecursionError:
        return "a value nested too deeply to show"
    return text if len(text) <= 40 else text[:37] + "..."


def _valid_text(value: Any, expected: str) -> str:
    if not isinstance(value, str):
        raise BundleValueError(f"expected {expected}, got {describe(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise BundleValueError(
            f"expected {expected}, got text that is not valid Unicode"
        ) from error
    return value


def reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


# `json.loads(text, parse_constant=reject_constant)`, without building a decoder per call.
decode_json: Callable[[str], Any] = json.JSONDecoder(parse_constant=reject_constant).decode


def parse_json(text: str) -> Any:
    """`decode_json(text)`, by orjson (about 3x faster) where orjson reads the text: json reads
    what orjson refuses (NaN, lone surrogates, numbers past a double, nesting past 1,024) and
    decides it. orjson reads an integer past 64 bits as a float, json as an int, so a caller
    that refuses a value parsed here parses the text again with `decode_json` to say why."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return decode_json(text)


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
        try:  # JSON text either reads (orjson: nesting to 1,024; json: lone surrogates, 1e400)
            parse_json(text)
        except (ValueError, RecursionError) as error:
            raise BundleValueError(f"expected JSON text, got {describe(value)}") from error
        return text
    if kind in ("TIMESTAMP", TIMESTAMPTZ):
        text = _valid_text(value, "a timestamp 'YYYY-MM-DD HH:MM:SS[.ffffff]'")
        try:
            if not _TIMESTAMP_TEXT.match(text):
                raise ValueError(text)
            datetime.fromisoformat(text)
        except ValueError as error:
            raise BundleValueError(
                f"expected a timestamp 'YYYY-MM-DD HH:MM:SS[.ffffff]', got {describe(value)}"
            ) from error
        return text
    if kind == "BLOB":
        text = _valid_text(value, "base64 text")
        try:  # strict: only the base64 alphabet with its padding (as b64decode's validate)
            return binascii.a2b_base64(text, strict_mode=True)
        except (binascii.Error, ValueError) as error:
            raise BundleValueError(f"expected base64 text, got {describe(value)}") from error
    if kind in ("INTEGER", "BIGINT"):
        bits, (low, high) = (32, _INT32) if kind == "INTEGER" else (64, _INT64)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise BundleValueError(f"expected a {bits}-bit integer, got {describe(value)}")
        return value
    if kind == "DOUBLE":
        if isinstance(value, str) and value in NON_FINITE:
            return NON_FINITE[value]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BundleValueError(f"expected a number, got {describe(value)}")
        try:
            return float(value)
        except OverflowError:  # an integer past 1.8e308
            raise BundleValueError(
                f"expected a number a DOUBLE holds, got {describe(value)}"
            ) from None
    if kind == "BOOLEAN":
        if not isinstance(value, bool):
            raise BundleValueError(f"expected true or false, got {describe(value)}")
        return value
    if kind == "VARCHAR[]":
        if not isinstance(value, list):
            raise BundleValueError(f"expected a list of text, got {describe(value)}")
        return [None if item is None else _valid_text(item, "a list of text") for item in value]
    raise BundleValueError(f"column type {kind} is not supported")


def fast_decoder(column: ColumnSpec) -> Callable[[Any], Any]:
    """`decode_value` for `column`, with the fewest checks for the common, valid cell.

    Any other cell (text that is not ASCII, which might hold a lone surrogate, included) goes
    to `decode_value`, which decodes it or raises its BundleValueError, so both accept and
    refuse exactly the same cells.
    """
    kind = column.type

    def slow(value: Any) -> Any:
        return decode_value(column, value)

    def null(value: Any) -> Any:
        return None if column.nullable else slow(value)

    if kind in ("VARCHAR", "TIMESTAMP", TIMESTAMPTZ, "JSON", "BLOB"):
        check = _TEXT_CHECKS[kind]

        def text(value: Any) -> Any:
            if type(value) is str and value.isascii():
                try:
                    return check(value)
                except (ValueError, RecursionError):
                    return slow(value)
            return null(value) if value is None else slow(value)

        return text
    if kind in ("INTEGER", "BIGINT"):
        low, high = _INT32 if kind == "INTEGER" else _INT64

        def integer(value: Any) -> Any:
            if type(value) is int and low <= value <= high:
                return value
            return null(value) if value is None else slow(value)

        return integer
    if kind == "DOUBLE":

        def double(value: Any) -> Any:
            if type(value) is float:
                return value
            return null(value) if value is None else slow(value)

        return double
    if kind == "BOOLEAN":

        def boolean(value: Any) -> Any:
            if type(value) is bool:
                return value
            return null(value) if value is None else slow(value)

        return boolean
    return lambda value: null(value) if value is None else slow(value)


def _checked_json(text: str) -> str:
    orjson.loads(text)  # refused (a ValueError): `decode_value` and json decide
    return text


def _checked_timestamp(text: str) -> str:
    if not _TIMESTAMP_TEXT.match(text):
        raise ValueError(text)
    datetime.fromisoformat(text)
    return text


def _checked_base64(text: str) -> bytes:
    # pybase64 (SIMD, about 15x faster) accepts no text binascii's strict mode refuses, and
    # decodes what both accept alike; what it refuses (`AAAA=`) goes to `decode_value`.
    return pybase64.b64decode(text, validate=True)


# What a valid text cell of each type decodes to (ValueError, which binascii.Error is, else).
_TEXT_CHECKS: dict[str, Callable[[str], Any]] = {
    "VARCHAR": lambda text: text,
    "TIMESTAMP": _checked_timestamp,
    TIMESTAMPTZ: _checked_timestamp,
    "JSON": _checked_json,
    "BLOB": _checked_base64,
}
