"""Ingest: folding events into rows, idempotent spool segments, bad segments, dead writers."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import store.ingest
import store.ingest.liveness
import store.ingest.upsert
import store.spool
from store.connection import StorePaths, session, store_paths
from store.errors import StoreAccessError
from store.ingest import (
    SEGMENT_SCHEMA,
    apply_segments,
    encode_events,
    ingest_spool,
    json_text,
    maintain,
    mark_interrupted,
)
from store.schema import ensure_schema
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
        "SELECT method, http_status, action, rule_id, request_size, response_size FROM attempts "
        "WHERE execution_id = 'exec-split' AND n = 1"
    ).fetchone()
    assert row == ("POST", 503, "retry_same", "transient.retry_same", 8, 17)
    assert count(conn, "SELECT count(*) FROM attempts") == 2


def test_search_text_holds_both_bodies_when_they_arrive_in_separate_batches(conn) -> None:
    events = small_execution("exec-search", steps=1)
    responded = [event.kind for event in events].index("attempt_responded")

    apply_segments(conn, [encode_events(events[:responded], 1, WRITER)])
    apply_segments(conn, [encode_events(events[responded:], responded + 1, WRITER)])

    rows = conn.execute(
        "SELECT search_text, lower(decode(request_body) || chr(10) || decode(response_body)) "
        "FROM attempts WHERE execution_id = 'exec-search' ORDER BY n"
    ).fetchall()
    assert len(rows) == 2 and all(kept == expected for kept, expected in rows)


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


def test_spool_ingest_runs_under_its_memory_limit_and_leaves_the_default(
    conn, paths, monkeypatch
) -> None:
    setting = "SELECT current_setting('memory_limit')"
    default = conn.execute(setting).fetchone()[0]
    scratch = duckdb.connect()
    scratch.execute(f"SET memory_limit = '{store.ingest.liveness.INGEST_MEMORY_LIMIT}'")
    limit = scratch.execute(setting).fetchone()[0]
    write_segment(paths, segment_name(WRITER, 1),
                  encode_events(realistic_execution("exec-limit"), 1, WRITER))  # fmt: skip
    seen: list[str] = []
    apply = store.ingest.liveness.apply_segments

    def recording_apply(conn, tables, **kwargs):
        seen.append(conn.execute(setting).fetchone()[0])
        return apply(conn, tables, **kwargs)

    monkeypatch.setattr(store.ingest.liveness, "apply_segments", recording_apply)

    assert ingest_spool(conn, paths) == 1
    assert seen == [limit] and limit != default
    assert conn.execute(setting).fetchone()[0] == default


def test_a_group_out_of_memory_under_the_limit_is_applied_again_without_it(
    conn, paths, monkeypatch
) -> None:
    setting = "SELECT current_setting('memory_limit')"
    default = conn.execute(setting).fetchone()[0]
    write_segment(paths, segment_name(WRITER, 1),
                  encode_events(realistic_execution("exec-oom"), 1, WRITER))  # fmt: skip
    seen: list[str] = []
    apply = store.ingest.liveness.apply_segments

    def out_of_memory_when_limited(conn, tables, **kwargs):
        seen.append(conn.execute(setting).fetchone()[0])
        if seen[-1] != default:
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate")
        return apply(conn, tables, **kwargs)

    monkeypatch.setattr(store.ingest.liveness, "apply_segments", out_of_memory_when_limited)

    assert ingest_spool(conn, paths) == 1
    assert len(seen) == 2 and seen[0] != default and seen[1] == default
    assert count(conn, "SELECT count(*) FROM executions WHERE execution_id = 'exec-oom'") == 1
    assert not list(paths.segments.iterdir())


def test_arrow_default_pool_is_not_mimalloc_unless_chosen() -> None:
    # mimalloc kept an ingest's freed buffers reserved: a long run's memory grew per batch.
    chosen = os.environ.get("ARROW_DEFAULT_MEMORY_POOL")
    assert chosen or pa.default_memory_pool().backend_name != "mimalloc"


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


def write_good_segments(paths: StorePaths, how_many: int) -> list[Path]:
    return [
        write_segment(
            paths,
            segment_name(WRITER, number),
            encode_events(small_execution(f"exec-good-{number}"), 1, WRITER),
        )
        for number in range(1, how_many + 1)
    ]


def test_a_database_failure_keeps_good_segments_for_the_next_try(conn, paths, monkeypatch) -> None:
    segments = write_good_segments(paths, 3)

    def disk_full(connection, staged) -> None:
        raise duckdb.IOException('Could not write file "debug.duckdb.wal": No space left on device')

    monkeypatch.setattr(store.ingest.upsert, "write_staged", disk_full)
    with pytest.raises(StoreAccessError) as raised:
        ingest_spool(conn, paths)
    kept = sorted(path.name for path in paths.segments.iterdir())
    monkeypatch.undo()
    written = ingest_spool(conn, paths)

    assert "No space left on device" in str(raised.value)
    assert "its 3 segments are kept" in str(raised.value)
    assert "\n" not in str(raised.value)
    assert kept == [path.name for path in segments]
    assert written == 3
    assert count(conn, "SELECT count(*) FROM executions WHERE status = 'succeeded'") == 3
    assert list(paths.segments.iterdir()) == []


class CommitFails:
    """A connection whose COMMIT fails as DuckDB's does on a full disk: rolled back, then raised."""

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self._connection = connection

    def execute(self, sql: str, *args):
        if sql.strip().upper() == "COMMIT":
            self._connection.execute("ROLLBACK")
            raise duckdb.IOException("Could not write file: No space left on device")
        return self._connection.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._connection, name)


def no_preparation(connection: duckdb.DuckDBPyConnection) -> None:
    ensure_schema(connection, "debug.duckdb", create=True)


def record_a_running_execution(connection: duckdb.DuckDBPyConnection) -> None:
    ensure_schema(connection, "debug.duckdb", create=True)
    apply_segments(connection, [encode_events(small_execution("exec-run")[:5], 1, WRITER)])


COMMIT_SITES = [
    ("apply-segments", no_preparation,
     lambda conn: apply_segments(conn, [encode_events(small_execution("x"), 1, WRITER)])),
    ("mark-interrupted", record_a_running_execution,
     lambda conn: mark_interrupted(conn, {WRITER.token})),
    ("migrate", lambda connection: None,
     lambda conn: ensure_schema(conn, "debug.duckdb", create=True)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("prepare", "write"),
    [(prepare, write) for _, prepare, write in COMMIT_SITES],
    ids=[name for name, _, _ in COMMIT_SITES],
)
def test_a_failed_commit_raises_its_own_error_not_the_rollbacks(
    tmp_path: Path, prepare, write
) -> None:
    connection = duckdb.connect(str(tmp_path / "debug.duckdb"))
    try:
        prepare(connection)
        with pytest.raises(duckdb.Error) as raised:
            write(CommitFails(connection))
    finally:
        connection.close()

    assert "No space left on device" in str(raised.value)


def segment_of(kind: str, payload: dict) -> pa.Table:
    table = pa.Table.from_pydict(
        {"seq": [1], "kind": [kind], "execution_id": ["exec-bad"], "payload": [json.dumps(payload)],
         "request_body": [None], "response_body": [None]},
        schema=SEGMENT_SCHEMA,
    )  # fmt: skip
    return table.replace_schema_metadata(WRITER.to_metadata())


FAULTY_SEGMENTS = [
    ("event-without-its-key", segment_of("attempt_dispatched", {"step_id": "step-1"})),
    ("number-too-big-for-its-column", segment_of("attempt_dispatched",
                                                 {"step_id": "s", "n": 2**40})),
    ("time-out-of-range", segment_of("execution_started", {"started_at": 1e300})),
]  # fmt: skip


@pytest.mark.parametrize(
    "bad_table",
    [table for _, table in FAULTY_SEGMENTS],
    ids=[name for name, _ in FAULTY_SEGMENTS],
)
def test_only_the_faulty_segment_is_set_aside(conn, paths, bad_table) -> None:
    good = write_good_segments(paths, 2)
    bad = write_segment(paths, segment_name(WRITER, 9), bad_table)

    ingest_spool(conn, paths)

    assert sorted(path.name for path in paths.segments.iterdir()) == [bad.name + ".failed"]
    assert count(conn, "SELECT count(*) FROM executions WHERE status = 'succeeded'") == len(good)


def test_a_segment_the_reader_cannot_delete_is_kept_and_never_applied_twice(
    conn, paths, monkeypatch
) -> None:
    [segment] = write_good_segments(paths, 1)
    real_unlink = Path.unlink

    def refuse_segments(path: Path, missing_ok: bool = False) -> None:
        if path.parent == paths.segments:
            raise PermissionError(13, "Permission denied", str(path))
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse_segments)
    ingest_spool(conn, paths)
    events_once = count(conn, "SELECT count(*) FROM events")
    ingest_spool(conn, paths)
    events_after_retry = count(conn, "SELECT count(*) FROM events")
    still_there = segment.exists()
    monkeypatch.undo()
    ingest_spool(conn, paths)

    assert still_there
    assert events_once > 0
    assert events_after_retry == events_once == count(conn, "SELECT count(*) FROM events")
    assert not segment.exists()
    assert count(conn, "SELECT count(*) FROM ingested_segments") == 0


def test_a_failed_segment_write_leaves_no_half_written_file(paths, monkeypatch) -> None:
    def disk_full(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.spool.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_segment(
            paths, segment_name(WRITER, 1), encode_events(small_execution("x"), 1, WRITER)
        )

    assert list(paths.segments.iterdir()) == []


def test_plans_are_read_only_for_executions_with_a_step_that_never_started(
    conn, monkeypatch
) -> None:
    plan_reads = []
    real_planned_steps = store.ingest.upsert._planned_steps

    def spy(connection, wanted):
        plan_reads.append({key: sorted(steps) for key, steps in wanted.items()})
        return real_planned_steps(connection, wanted)

    monkeypatch.setattr(store.ingest.upsert, "_planned_steps", spy)
    started_only = small_execution("exec-all-started")
    with_skip = realistic_execution("exec-with-skip", start_at=1.9e9)

    for events in (started_only, with_skip):
        for offset in range(0, len(events), 4):  # many small batches, as a long run makes
            apply_segments(conn, [encode_events(events[offset : offset + 4], offset + 1, WRITER)])

    assert plan_reads == [{"exec-with-skip": ["step-4"]}]
    row = conn.execute(
        "SELECT tool, capability FROM steps WHERE execution_id = 'exec-with-skip' "
        "AND step_id = 'step-4'"
    ).fetchone()
    assert row is not None and None not in row


@pytest.mark.parametrize(
    "keep_of_second_frame", [5, 20, -1], ids=["mid-header", "mid-payload", "last-byte-missing"]
)
def test_a_journal_cut_by_a_kill_keeps_every_whole_frame(paths, keep_of_second_frame) -> None:
    events = small_execution("exec-torn")
    journal = store.spool.Journal(paths, store.spool.journal_name(WRITER, 1), WRITER)
    journal.append(store.ingest.encode_records(events[:3], 1))
    second_frame_at = journal.size
    journal.append(store.ingest.encode_records(events[3:], 4))
    journal.close()
    data = journal.path.read_bytes()
    end = len(data) - 1 if keep_of_second_frame < 0 else second_frame_at + keep_of_second_frame
    journal.path.write_bytes(data[:end])

    table = store.spool.read_segment(journal.path)

    assert table.column("seq").to_pylist() == [1, 2, 3]
    assert table.schema.metadata[b"writer_token"] == WRITER.token.encode()


def _three_frames(paths) -> tuple[Path, list[int]]:
    events = small_execution("exec-damaged")
    journal = store.spool.Journal(paths, store.spool.journal_name(WRITER, 1), WRITER)
    starts = []
    for first, last in ((0, 2), (2, 4), (4, len(events))):
        starts.append(journal.size)
        journal.append(store.ingest.encode_records(events[first:last], first + 1))
    journal.close()
    return journal.path, starts


def test_a_whole_frame_changed_with_frames_after_it_is_damage_not_a_torn_tail(paths) -> None:
    """Found by an outside check: 8 bytes overwritten in a frame in the middle of a complete
    file were read as a torn tail, so that frame and every one after it were dropped without a
    word and the file deleted. A kill only tears the last frame."""
    path, starts = _three_frames(paths)
    data = bytearray(path.read_bytes())
    data[starts[1] + 12 : starts[1] + 20] = b"XXXXXXXX"
    path.write_bytes(bytes(data))
    with pytest.raises(store.spool.DamagedJournal, match=r"a damaged frame at byte .* bytes "
                       "follow it") as raised:  # fmt: skip
        store.spool.read_segment(path)
    assert raised.value.table.column("seq").to_pylist() == [1, 2]  # the frame before it


def test_the_ingest_takes_the_frames_before_damage_and_keeps_the_file(paths) -> None:
    """What a machine crash can leave in an unsynced journal: a page in the middle lost."""
    from store.ingest.liveness import _load_segments

    path, starts = _three_frames(paths)
    data = bytearray(path.read_bytes())
    data[starts[1] + 12 : starts[1] + 20] = b"XXXXXXXX"
    path.write_bytes(bytes(data))
    ((loaded_path, table),) = _load_segments([path])
    assert loaded_path == path and table.column("seq").to_pylist() == [1, 2]
    kept = path.with_name(path.name + ".failed")
    assert kept.read_bytes() == bytes(data)  # every byte kept, to be read by hand


def test_a_last_frame_whose_checksum_fails_is_a_torn_tail(paths) -> None:
    """Power lost mid-append can leave the last frame's length written and its bytes not."""
    path, _ = _three_frames(paths)
    data = bytearray(path.read_bytes())
    data[-8:] = bytes(8)
    path.write_bytes(bytes(data))
    assert store.spool.read_segment(path).column("seq").to_pylist() == [1, 2, 3, 4]


def test_rerun_of_recovery_and_impact_are_ingested_and_absent_keys_are_null(conn) -> None:
    from dataclasses import replace

    from executor.events import AttemptDecided, ExecutionStarted
    from executor.faults import Recovery

    events = []
    for event in small_execution("exec-v2", steps=1):
        if isinstance(event, ExecutionStarted):
            event = replace(event, rerun_of="exec-original")
        elif isinstance(event, AttemptDecided) and event.n == 2:
            decision = replace(event.decision, recovery=Recovery.STOP, impact="Nothing was booked.")
            event = replace(event, decision=decision)
        events.append(event)
    apply_segments(conn, [encode_events(events, 1, WRITER)])

    assert conn.execute("SELECT rerun_of FROM executions").fetchall() == [("exec-original",)]
    assert conn.execute(
        "SELECT n, recovery, impact FROM attempts ORDER BY n"
    ).fetchall() == [(1, None, None), (2, "stop", "Nothing was booked.")]


def test_times_are_stored_as_the_same_instants_whatever_the_session_time_zone(conn) -> None:
    conn.execute("SET TimeZone = 'America/New_York'")
    events = small_execution("exec-tz", steps=1)
    started_at = events[0].started_at

    apply_segments(conn, [encode_events(events, 1, WRITER)])

    epoch, utc_text = conn.execute(
        "SELECT epoch(started_at), CAST(timezone('UTC', started_at) AS VARCHAR) "
        "FROM executions WHERE execution_id = 'exec-tz'"
    ).fetchone()
    assert epoch == pytest.approx(started_at, abs=1e-6)
    assert datetime.fromisoformat(utc_text).replace(tzinfo=UTC).timestamp() == pytest.approx(
        started_at, abs=1e-6
    )
    conn.execute("RESET TimeZone")
