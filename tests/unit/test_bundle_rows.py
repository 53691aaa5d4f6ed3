"""A bundle's rows come out of the store in the order of all their columns (ORDER BY ALL)."""

from __future__ import annotations

import json
import math

import duckdb
import pytest

from store.bundle.format import column_sql, quote, read_execution_rows, store_table_specs
from store.recorder import StoreRecorder
from tests.support.events_factory import START_AT, realistic_execution, small_execution


def test_rows_are_read_in_the_order_of_all_their_columns(tmp_path):
    db = tmp_path / "debug.duckdb"
    events = [
        *realistic_execution("exec-b"),
        *small_execution("exec-a", start_at=START_AT + 60),
        *small_execution("exec-c", start_at=START_AT + 120),
    ]
    with StoreRecorder(db) as recorder:
        for event in events:
            recorder.record(event)
    ids = ["exec-c", "exec-a", "exec-b"]
    with duckdb.connect(str(db), read_only=True) as conn:
        rows = read_execution_rows(conn, ids)
        for spec in store_table_specs():
            expected = conn.execute(
                f"SELECT {', '.join(column_sql(c) for c in spec.columns)} "
                f"FROM {quote(spec.name)} WHERE list_contains($ids, execution_id) ORDER BY ALL",
                {"ids": ids},
            ).fetchall()
            got = [tuple(row.values()) for row in rows[spec.name]]
            assert got == expected, spec.name
    assert len(rows["attempts"]) > 3 and len(rows["steps"]) > 3


def test_an_import_writes_exactly_the_exported_rows_bodies_and_non_finite_numbers_included(
    tmp_path,
):
    """A current-schema bundle is written from its parsed lines, bodies decoded by DuckDB."""
    import dataclasses
    import json
    import math

    from executor.events import AttemptResponded
    from store.bundle import encode_row, export_bundle, import_bundle

    body = bytes(range(256)) * 3  # not UTF-8
    events = [
        dataclasses.replace(event, response_body=body)
        if isinstance(event, AttemptResponded)
        else event
        for event in realistic_execution("exec-nan")
    ]
    source, target = tmp_path / "source.duckdb", tmp_path / "target.duckdb"
    with StoreRecorder(source) as recorder:
        for event in events:
            recorder.record(event)
    with duckdb.connect(str(source)) as conn:  # DOUBLE values JSON has no number for
        conn.execute(
            "UPDATE attempts SET elapsed_ms = CASE n % 3 WHEN 0 THEN 'inf'::DOUBLE "
            "WHEN 1 THEN 'nan'::DOUBLE ELSE '-inf'::DOUBLE END"
        )
    export_bundle(source, tmp_path / "b.zip", None, redact=False)
    import_bundle(target, tmp_path / "b.zip")

    def lines(db):
        with duckdb.connect(str(db), read_only=True) as conn:
            rows = read_execution_rows(conn, ["exec-nan"])
        return {
            spec.name: [json.dumps(encode_row(spec, row)) for row in rows[spec.name]]
            for spec in store_table_specs()
        }

    exported, imported = lines(source), lines(target)
    assert imported == exported
    with duckdb.connect(str(target), read_only=True) as conn:
        elapsed = conn.execute("SELECT list(elapsed_ms) FROM attempts").fetchone()[0]
        assert any(math.isnan(value) for value in elapsed), elapsed
        assert -math.inf in elapsed, elapsed
        bodies = conn.execute("SELECT DISTINCT response_body FROM attempts").fetchall()
        searchable = conn.execute("SELECT count(*) FROM llm_calls WHERE search_text IS NULL")
        assert searchable.fetchone() == (0,)
    assert (body,) in bodies


EDGE_VALUES = {
    "VARCHAR": ["", "plain", "quote \" backslash \\ newline \n", "ünï \u2028 \x00 東京 \ud7ff"],
    "JSON": ['{"a": [1, 2.5, null]}', '"text"', "[]"],
    "TIMESTAMP": ["2026-01-31 14:00:00.123456"],
    "TIMESTAMP WITH TIME ZONE": ["2026-01-31 14:00:00"],
    "BLOB": [b"", b"\xff\xfe\x00binary", b'{"json": "body"}', bytes(range(256)) * 3],
    "INTEGER": [0, -(2**31), 2**31 - 1],
    "BIGINT": [-(2**63), 2**63 - 1],
    "DOUBLE": [0.0, -0.0, 1.0, -1.5, 1e16, 1e300, 5e-324, math.nan, math.inf, -math.inf],
    "BOOLEAN": [True, False],
    "VARCHAR[]": [[], ["a", "é"], ["x", None]],
}


@pytest.mark.parametrize("table", [spec.name for spec in store_table_specs()])
def test_a_row_line_is_the_compact_json_of_the_encoded_row_byte_for_byte(table):
    from store.bundle.format import encode_row, row_line

    spec = next(spec for spec in store_table_specs() if spec.name == table)
    longest = max(len(values) for values in EDGE_VALUES.values())
    for index in range(longest + 1):  # the last row is all nulls
        row = {
            column.name: (
                None
                if index == longest
                else EDGE_VALUES[column.type][index % len(EDGE_VALUES[column.type])]
            )
            for column in spec.columns
        }
        expected = json.dumps(
            encode_row(spec, row), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
        assert row_line(spec, row) == expected.encode("utf-8") + b"\n"
