"""A bundle's rows come out of the store in the order of all their columns (ORDER BY ALL)."""

from __future__ import annotations

import duckdb

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
