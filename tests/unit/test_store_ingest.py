"""Ingest: folding events into rows, idempotent spool segments, bad segments, dead writers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from store.connection import StorePaths, session, store_paths
from store.ingest import (
    SEGMENT_SCHEMA,
    apply_segments,
    encode_events,
    ingest_spool,
    json_text,
    maintain,
)
from store.spool import WriterIdentity, WriterLease, segment_name, write_segment
from tests.support.events_factory import realistic_execution, small_execution

WRITER = WriterIdentity(token="feedbeef00000001", pid=4242, host="test-host")


@dataclass(frozen=True)
class Point:
    x: int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ({"a": [1, 2.5, "ü"]}, '{"a": [1, 2.5, "ü"]}'),
        ({"nan": float("nan"), "inf": float("inf")}, '{"nan": null, "inf": null}'),
        ({"raw": b"\xff\x00"}, '{"raw": "/wA="}'),
        ({"tags": {"b"}}, '{"tags": ["b"]}'),
        ({"point": Point(1)}, '{"point": {"x": 1}}'),
        ({"s": "a\udcffb"}, '{"s": "a\ufffdb"}'),
        ((1, 2), "[1, 2]"),
    ],
    ids=["none-is-sql-null", "plain", "nan-and-infinity", "bytes-as-base64", "set-as-list",
         "dataclass-as-object", "lone-surrogate", "tuple-as-array"],
)  # fmt: skip
def test_json_text(value, expected) -> None:
    assert json_text(value) == expected


@pytest.fixture
def paths(tmp_path: Path) -> StorePaths:
    return store_paths(tmp_path / "debug.duckdb")


@pytest.fixture
def conn(paths: StorePaths) -> Iterator[duckdb.DuckDBPyConnection]:
    with session(paths, create=True) as connection:
        yield connection


def count(conn: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def test_an_attempt_spread_over_three_batches_is_one_complete_row(conn) -> None:
    events = small_execution("exec-split", steps=1)
    kinds = [event.kind for event in events]
    dispatched = kinds.index("attempt_dispatched")
    responded = kinds.index("attempt_responded")

    for batch in (events[: dispatched + 1], events[dispatched + 1 : responded + 1],
                  events[responded + 1 :]):  # fmt: skip
        apply_segments(conn, [encode_events(batch, 1, WRITER)])

    row = conn.execute(
        "SELECT method, status, action, rule_id, request_size, response_size FROM attempts "
        "WHERE execution_id = 'exec-split' AND n = 1"
    ).fetchone()
    assert row == ("POST", 503, "retry_same", "transient.retry_same", 8, 17)
    assert count(conn, "SELECT count(*) FROM attempts") == 2


def test_execution_row_records_the_writer(conn) -> None:
    apply_segments(conn, [encode_events(small_execution("exec-w"), 1, WRITER)])

    row = conn.execute(
        "SELECT status, writer_pid, writer_host, writer_token FROM executions"
    ).fetchone()
    assert row == ("succeeded", 4242, "test-host", WRITER.token)


def test_segment_ingested_but_not_deleted_is_not_ingested_twice(conn, paths) -> None:
    table = encode_events(realistic_execution("exec-once"), 1, WRITER)
    name = segment_name(WRITER, 1)
    write_segment(paths, name, table)
    # A crash between the commit and the file delete leaves both behind.
    apply_segments(conn, [table], segment_names=[name])
    events_before = count(conn, "SELECT count(*) FROM events")

    written = ingest_spool(conn, paths)

    assert written == 0
    assert count(conn, "SELECT count(*) FROM events") == events_before
    assert not (paths.segments / name).exists()
    assert count(conn, "SELECT count(*) FROM ingested_segments") == 0


@pytest.mark.parametrize(
    "bad_bytes",
    [
        pytest.param(b"ARROW1\x00\x00 but cut short", id="truncated-arrow"),
        pytest.param(None, id="valid-arrow-with-bad-payload"),
    ],
)
def test_bad_segment_is_set_aside_and_the_rest_ingested(conn, paths, bad_bytes) -> None:
    write_segment(
        paths, segment_name(WRITER, 1), encode_events(small_execution("exec-a"), 1, WRITER)
    )
    bad_path = paths.segments / segment_name(WRITER, 2)
    if bad_bytes is None:
        bad_table = pa.Table.from_pydict(
            {"seq": [1], "kind": ["attempt_decided"], "execution_id": ["x"],
             "payload": ["{not json"], "request_body": [None], "response_body": [None]},
            schema=SEGMENT_SCHEMA,
        )  # fmt: skip
        write_segment(paths, bad_path.name, bad_table)
    else:
        paths.segments.mkdir(parents=True, exist_ok=True)
        bad_path.write_bytes(bad_bytes)
    write_segment(
        paths, segment_name(WRITER, 3), encode_events(small_execution("exec-b"), 1, WRITER)
    )

    ingest_spool(conn, paths)

    statuses = dict(conn.execute("SELECT execution_id, status FROM executions").fetchall())
    assert statuses == {"exec-a": "succeeded", "exec-b": "succeeded"}
    assert sorted(path.name for path in paths.segments.iterdir()) == [bad_path.name + ".failed"]


def test_maintain_marks_only_dead_writers_running_executions_interrupted(conn, paths) -> None:
    live = WriterIdentity.for_this_process()
    lease = WriterLease(paths, live)
    dead = WriterIdentity(token="deadbeef00000002", pid=1, host="test-host")
    paths.segments.mkdir(parents=True, exist_ok=True)
    half_written = paths.segments / (segment_name(dead, 7) + ".tmp")
    half_written.write_bytes(b"partial")
    try:
        running_live = small_execution("exec-live")[:5]
        running_dead = small_execution("exec-dead")[:5]
        apply_segments(conn, [encode_events(running_live, 1, live)])
        # The dead writer's last segment is still in the spool.
        write_segment(paths, segment_name(dead, 1), encode_events(running_dead, 1, dead))

        maintain(conn, paths)

        rows = dict(conn.execute("SELECT execution_id, status FROM executions").fetchall())
        dead_row = conn.execute(
            "SELECT stop_reason, finished_at IS NOT NULL FROM executions "
            "WHERE execution_id = 'exec-dead'"
        ).fetchone()
        step_status = conn.execute(
            "SELECT status FROM steps WHERE execution_id = 'exec-dead'"
        ).fetchone()
    finally:
        lease.release()
    assert rows == {"exec-live": "running", "exec-dead": "interrupted"}
    assert dead_row == (
        "the recorder (pid 1 on test-host) stopped before the execution finished",
        True,
    )
    assert step_status == ("interrupted",)
    assert not half_written.exists()


def test_a_late_finish_overrides_interrupted(conn, paths) -> None:
    events = small_execution("exec-late")
    apply_segments(conn, [encode_events(events[:5], 1, WRITER)])
    maintain(conn, paths)  # WRITER holds no lease: it is dead
    assert conn.execute("SELECT status FROM executions").fetchone() == ("interrupted",)

    apply_segments(conn, [encode_events(events[5:], 6, WRITER)])

    row = conn.execute("SELECT status, stop_reason FROM executions").fetchone()
    assert row == ("succeeded", None)


def test_segment_carries_redacted_headers_and_writer(paths) -> None:
    table = encode_events(realistic_execution("exec-r"), 1, WRITER)

    payloads = [json.loads(p) for p in table.column("payload").to_pylist()]
    dispatched = next(p for p in payloads if "request_headers" in p)
    assert dispatched["request_headers"]["Authorization"] == "[REDACTED]"
    assert WriterIdentity.from_metadata(table.schema.metadata) == WRITER
