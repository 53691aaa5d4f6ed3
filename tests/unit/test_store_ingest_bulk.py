"""Bulk ingest: prompts journaled once, bodies kept in Arrow, search text lowered by Arrow where
it is ASCII, new rows inserted plainly and stored rows merged, journals decoded in one pass."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import store.ingest.upsert
import store.spool
from executor.events import LLMCall
from store.connection import StorePaths, session, store_paths
from store.ingest import apply_segments, encode_events, encode_records, records_table
from store.ingest.fold import BodyRef, fold_segments, take_bodies
from store.ingest.upsert import _ascii_lowered, stage_rows
from store.schema import DERIVED_COLUMNS
from store.spool import WriterIdentity
from tests.support.events_factory import (
    START_AT,
    one_attempt_execution,
    small_execution,
)

WRITER = WriterIdentity(token="feedbeef0000b001", pid=4242, host="test-host")
MESSAGES = (
    {"role": "system", "content": "You analyze failed tool calls."},
    {"role": "user", "content": "The CRM answered HTTP 400 for contact Ada."},
)


@pytest.fixture
def paths(tmp_path: Path) -> StorePaths:
    return store_paths(tmp_path / "debug.duckdb")


@pytest.fixture
def conn(paths: StorePaths) -> Iterator[duckdb.DuckDBPyConnection]:
    with session(paths, create=True) as connection:
        yield connection


def llm_call(
    call_id: str, *, request_body: bytes, raw_text: str | None = "{}", **fields
) -> LLMCall:
    values: dict[str, Any] = {
        "execution_id": "exec-llm", "step_id": "step-1", "n": 1, "call_id": call_id,
        "site": "error_analysis", "at": START_AT, "latency_ms": 10.0,
        "base_url": "http://127.0.0.1:8200/v1", "model": "gpt-test", "temperature": 0.0,
        "max_tokens": 256, "messages": MESSAGES, "request_body": request_body,
        "response_status": 200, "response_body": b'{"choices":[]}', "raw_text": raw_text,
        "parsed": None, "parse_error": None, "error": None, "prompt_tokens": 10,
        "completion_tokens": 2, "total_tokens": 12,
    }  # fmt: skip
    values.update(fields)
    return LLMCall(**values)


def sent_request(messages: Any = MESSAGES) -> bytes:
    return json.dumps({"model": "gpt-test", "messages": list(messages)}).encode()


def test_an_llm_calls_prompt_is_journaled_once_as_its_request_bytes(conn) -> None:
    sent = llm_call("call-sent", request_body=sent_request())
    unsent = llm_call("call-unsent", request_body=b"", error="connection refused")

    records = encode_records([sent, unsent], 1)
    payloads = [json.loads(record[3]) for record in records]
    apply_segments(conn, [records_table(records, WRITER)])

    assert "messages" not in payloads[0] and records[0][4] == sent_request()
    assert payloads[1]["messages"] == [dict(message) for message in MESSAGES]
    rows = dict(
        conn.execute(
            "SELECT call_id, [CAST(unsent_messages AS VARCHAR), CAST(messages AS VARCHAR)] "
            "FROM llm_calls JOIN llm_calls_text USING (call_id) ORDER BY call_id"
        ).fetchall()
    )
    expected = json.dumps([dict(message) for message in MESSAGES])
    assert json.loads(rows["call-sent"][1]) == json.loads(expected)
    assert rows["call-sent"][0] is None
    assert json.loads(rows["call-unsent"][0]) == json.loads(expected)
    assert json.loads(rows["call-unsent"][1]) == json.loads(expected)


# (request body, response body) of an attempt: what Arrow lower-cases and what DuckDB must.
ATTEMPT_BODIES = {
    "ascii-upper-case": (b'{"City":"PARIS"}', b'{"Error":"NOT FOUND"}'),
    "non-ascii-utf8": ('{"name":"ÉCOLE"}'.encode(), "STRASSE Straße ΣΊΣΥΦΟΣ".encode()),
    "not-utf8": (b'{"a":"B"}', b"\xffBINARY\x00DATA"),
    "nul-and-control-bytes": (b"A\x00B\x01C", b"\x7fZ"),
    "empty-bodies": (b"", b""),
    "ascii-and-non-ascii": (b"PLAIN ASCII", "Ünïcode".encode()),
}


def execution_with_bodies(execution_id: str, request: bytes, response: bytes) -> list[Any]:
    events = small_execution(execution_id, steps=1)
    return [
        replace(event, request_body=request)
        if event.kind == "attempt_dispatched"
        else replace(event, response_body=response)
        if event.kind == "attempt_responded"
        else event
        for event in events
    ]


@pytest.mark.parametrize("case", sorted(ATTEMPT_BODIES))
def test_attempt_search_text_lowered_by_arrow_equals_the_sql_definition(conn, case) -> None:
    request, response = ATTEMPT_BODIES[case]
    events = execution_with_bodies(f"exec-{case}", request, response)

    staged = stage_rows(fold_segments([encode_events(events, 1, WRITER)]))
    apply_segments(conn, [encode_events(events, 1, WRITER)])

    attempts = next(insert.staging for insert in staged.inserts if insert.table_name == "attempts")
    lowered = attempts.column("lowered_response_body").to_pylist()
    assert lowered == [response.lower().decode() if response.isascii() else None] * 2
    rows = conn.execute(
        f"SELECT search_text, {DERIVED_COLUMNS['attempts']['search_text']} FROM attempts"
    ).fetchall()
    assert len(rows) == 2 and all(kept == defined for kept, defined in rows), rows


def journaled(paths: StorePaths, name: str, events: list[Any]) -> pa.Table:
    """`events` appended to one journal (two frames) and read back as the ingest reads it."""
    journal = store.spool.Journal(paths, name, WRITER)
    records = encode_records(events, 1)
    journal.append(records[: len(records) // 2])
    journal.append(records[len(records) // 2 :])
    journal.close()
    return store.spool.read_segment(journal.path, dictionary_bodies=True)


def test_journaled_bodies_reach_duckdb_uncopied_with_exact_bytes_and_search_text(
    paths, conn
) -> None:
    events = [
        event
        for case, (request, response) in sorted(ATTEMPT_BODIES.items())
        for event in execution_with_bodies(f"exec-{case}", request, response)
    ]
    table = journaled(paths, "feedbeef0000b001-0000000007.journal", events)

    staged = stage_rows(fold_segments([table]))
    apply_segments(conn, [table])

    attempts = next(insert.staging for insert in staged.inserts if insert.table_name == "attempts")
    assert pa.types.is_dictionary(attempts.column("response_body").type)  # not copied
    rows = conn.execute(
        "SELECT execution_id, request_body, response_body, search_text, "
        f"{DERIVED_COLUMNS['attempts']['search_text']} FROM attempts ORDER BY ALL"
    ).fetchall()
    assert len(rows) == 2 * len(ATTEMPT_BODIES)
    for execution_id, request, response, kept, defined in rows:
        assert (request, response) == ATTEMPT_BODIES[execution_id.removeprefix("exec-")]
        assert kept == defined, execution_id


def test_journaled_llm_calls_keep_their_bytes_and_search_text(paths, conn) -> None:
    calls = [
        llm_call(f"call-{case}", request_body=request, raw_text=raw_text)
        for case, (request, raw_text) in sorted(LLM_PARTS.items())
    ]
    table = journaled(paths, "feedbeef0000b001-0000000008.journal", calls)

    apply_segments(conn, [table])

    rows = conn.execute(
        "SELECT call_id, request_body, search_text, "
        f"{DERIVED_COLUMNS['llm_calls']['search_text']} FROM llm_calls ORDER BY call_id"
    ).fetchall()
    assert [row[0] for row in rows] == sorted(call.call_id for call in calls)
    for call_id, request, kept, defined in rows:
        sent = LLM_PARTS[call_id.removeprefix("call-")][0]
        assert request == sent and kept == defined and kept is not None, call_id


# (request body, raw answer) of an LLM call; an empty request keeps its messages unsent.
LLM_PARTS = {
    "ascii": (sent_request(), '{"Should_Retry": TRUE}'),
    "non-ascii-prompt": (sent_request([{"role": "user", "content": "ÇA NE MARCHE PAS"}]), "OK"),
    "non-ascii-answer": (sent_request(), "Ärger: NEIN"),
    "unsent-prompt": (b"", None),
    "not-utf8-request": (b"\xff\xfeRAW", "Fine"),
}


@pytest.mark.parametrize("case", sorted(LLM_PARTS))
def test_llm_search_text_lowered_by_arrow_equals_the_sql_definition(conn, case) -> None:
    request, raw_text = LLM_PARTS[case]
    call = llm_call(f"call-{case}", request_body=request, raw_text=raw_text)

    apply_segments(conn, [encode_events([call], 1, WRITER)])

    row = conn.execute(
        f"SELECT search_text, {DERIVED_COLUMNS['llm_calls']['search_text']} FROM llm_calls"
    ).fetchone()
    assert row is not None and row[0] == row[1] and row[0] is not None


def test_new_rows_are_inserted_plainly_and_only_stored_rows_merge(conn) -> None:
    events = small_execution("exec-merge", steps=2)
    kinds = [event.kind for event in events]
    first_response = kinds.index("attempt_responded")
    first = llm_call("call-kept", request_body=sent_request(), execution_id="exec-merge")
    again = replace(first, raw_text="a different answer for the same call id")

    apply_segments(conn, [encode_events([*events[:first_response], first], 1, WRITER)])
    later = [*events[first_response:], again]
    staged = stage_rows(fold_segments([encode_events(later, first_response + 2, WRITER)]))
    apply_segments(conn, [encode_events(later, first_response + 2, WRITER)])

    statements = {insert.table_name: insert.statements for insert in staged.inserts}
    merge, plain = statements["attempts"]
    assert "SEMI JOIN attempts" in merge and merge.startswith("UPDATE attempts SET")
    assert "ANTI JOIN attempts" in plain and "ON CONFLICT" not in plain
    assert all("ON CONFLICT" not in statement for statement in statements["llm_calls"])
    rows = conn.execute(
        "SELECT step_id, n, method, http_status, rule_id, response_size FROM attempts "
        "ORDER BY step_id, n"
    ).fetchall()
    assert rows == [
        ("step-1", 1, "POST", 503, "transient.retry_same", 17),
        ("step-1", 2, "POST", 200, "success.2xx", 16),
        ("step-2", 1, "POST", 503, "transient.retry_same", 17),
        ("step-2", 2, "POST", 200, "success.2xx", 16),
    ]
    assert conn.execute("SELECT raw_text FROM llm_calls").fetchall() == [("{}",)]


def test_bodies_stay_in_arrow_through_the_fold() -> None:
    events = execution_with_bodies("exec-arrow", b'{"i":1}', b'{"big":"' + b"x" * 20_000 + b'"}')

    rows = fold_segments([encode_events(events, 1, WRITER)])
    staged = stage_rows(rows)

    attempt = rows.attempts[("exec-arrow", "step-1", 1)]
    assert isinstance(attempt["response_body"], BodyRef)
    assert attempt["response_size"] == 20_010
    attempts = next(insert.staging for insert in staged.inserts if insert.table_name == "attempts")
    assert attempts.column("response_body").to_pylist() == [b'{"big":"' + b"x" * 20_000 + b'"}'] * 2
    assert attempts.column("request_body").to_pylist() == [b'{"i":1}'] * 2


RECORDS = [
    (1, "execution_started", "exec-j", '{"query": "ü"}', None, None),
    (2, "attempt_dispatched", "exec-j", "{}", b"", None),
    (3, "attempt_responded", None, None, None, b"\x00\xff" * 10_000),
    (4, "notice", "exec-j", "{}", b"short", b"twelve bytes"),
]


def test_a_journal_is_decoded_into_its_columns_whatever_the_frames(paths) -> None:
    journal = store.spool.Journal(paths, "feedbeef0000b001-0000000001.journal", WRITER)
    journal.append(RECORDS[:1])
    journal.append(RECORDS[1:])
    data = journal.path.read_bytes()
    journal.close()

    whole = store.spool.read_segment(journal.path)
    torn = store.spool.read_journal_bytes(data[:-3], name="torn.journal")

    assert [tuple(row.values()) for row in whole.to_pylist()] == RECORDS
    assert [tuple(row.values()) for row in torn.to_pylist()] == RECORDS[:1]
    assert whole.schema.metadata[b"writer_token"] == WRITER.token.encode()


def test_a_record_running_past_its_frame_is_a_damaged_frame() -> None:
    frame_payload = b"E" + (7).to_bytes(8, "little", signed=True) + (99).to_bytes(4, "little")
    frame = store.spool._frame(frame_payload + b"abc")
    data = store.spool.JOURNAL_MAGIC + store.spool.journal_meta_frame(WRITER) + frame

    with pytest.raises(pa.ArrowInvalid, match=r"past\.journal: a damaged frame at byte"):
        store.spool.read_journal_bytes(data, name="past.journal")


def test_a_journal_frame_hands_long_values_to_the_kernel_from_their_own_buffers() -> None:
    body = b"x" * 20_000
    records = [(1, "attempt_responded", "exec-j", "{}", None, body), *RECORDS[1:]]

    parts = store.spool.journal_frame_parts(records)

    assert b"".join(parts) == store.spool.journal_frame(records)
    assert any(part is body for part in parts)  # not copied into the frame
    assert len(parts) <= 8  # the short values are joined, not one buffer each


def test_a_journal_read_for_ingest_keeps_its_bodies_in_the_file_until_taken(paths) -> None:
    journal = store.spool.Journal(paths, "feedbeef0000b001-0000000002.journal", WRITER)
    journal.append(RECORDS)
    journal.close()

    copied = store.spool.read_segment(journal.path)
    mapped = store.spool.read_segment(journal.path, dictionary_bodies=True)

    body_column = mapped.column("response_body")
    assert pa.types.is_dictionary(body_column.type)
    # The dictionary's bytes are the journal file itself: nothing was copied out of it.
    assert body_column.chunk(0).dictionary.buffers()[2].size == journal.path.stat().st_size
    assert mapped.column("response_body").to_pylist() == copied.column("response_body").to_pylist()
    assert mapped.column("payload").to_pylist() == copied.column("payload").to_pylist()


def test_bodies_are_taken_in_row_order_across_journal_and_arrow_segments(paths) -> None:
    journal = store.spool.Journal(paths, "feedbeef0000b001-0000000003.journal", WRITER)
    journal.append(RECORDS)
    journal.close()
    mapped = store.spool.read_segment(journal.path, dictionary_bodies=True)
    plain = records_table([(5, "notice", "exec-j", "{}", None, b"from an arrow segment")], WRITER)

    chunks = [
        mapped.column("response_body").chunk(0),
        plain.column("response_body").chunk(0),
        mapped.column("response_body").chunk(0),
    ]
    taken = take_bodies(chunks, [5, None, 2, 4, 0, 3, None, 8])

    assert [pa.types.is_dictionary(chunk.type) for chunk in chunks] == [True, False, True]
    assert taken.type == pa.large_binary()
    assert taken.to_pylist() == [
        None, None, b"\x00\xff" * 10_000, b"from an arrow segment", None, b"twelve bytes",
        None, b"twelve bytes",
    ]  # fmt: skip
    assert take_bodies(chunks, [None, None]).to_pylist() == [None, None]
    assert take_bodies([], [None]).to_pylist() == [None]


def test_non_ascii_rows_of_a_lowered_part_are_null_without_a_copy() -> None:
    text = pa.array(["MiXeD ASCII", "Ünïcode", None, "", "X" * 5000], pa.large_string())

    lowered = _ascii_lowered(text)

    assert lowered.to_pylist() == ["mixed ascii", None, None, "", "x" * 5000]


def bulky_execution(execution_id: str, steps: int, body_bytes: int) -> list[Any]:
    """An execution of `steps` one-attempt steps whose responses carry `body_bytes` each."""
    bodies = [b'{"text":"' + (b"Body %d " % s) * (body_bytes // 8) + b'"}' for s in range(steps)]
    return one_attempt_execution(execution_id, "bulky", bodies)


def test_a_bulky_ingest_batch_is_checkpointed_by_its_commit_without_a_wal(paths, conn) -> None:
    events = bulky_execution("exec-bulky", 40, 100_000)  # 4 MB of bodies, 8 MB with search text

    apply_segments(conn, [encode_events(events, 1, WRITER)], segment_names=["bulky.segment"])

    wal = paths.db.with_name(paths.db.name + ".wal")
    assert not wal.exists() or wal.stat().st_size < 1_000_000  # the bodies went to the file
    assert conn.execute("SELECT current_setting('checkpoint_threshold')").fetchone() == (
        "16.0 MiB",
    )  # the session's own setting is back
    assert conn.execute(
        "SELECT count(*), sum(response_size), "
        "count(*) FILTER (contains(search_text, 'body ' || split_part(step_id, '-', 2) || ' ')) "
        "FROM attempts"
    ).fetchone() == (
        40,
        sum(len(e.response_body) for e in events if e.kind == "attempt_responded"),
        40,
    )
    assert conn.execute("SELECT segment FROM ingested_segments").fetchall() == [("bulky.segment",)]


@pytest.mark.parametrize("split", [False, True], ids=["new-row", "stored-row"])
def test_a_big_journaled_body_is_lowered_by_duckdb_with_the_same_search_text(
    paths, conn, monkeypatch, split
) -> None:
    # Pieces over the limit are not lowered in Arrow (no lowered copy beside the body); the
    # row's search text is then DuckDB's, as defined; rows stored earlier merge by UPDATE.
    monkeypatch.setattr(store.ingest.upsert, "_LOWER_IN_ARROW_MAX", 64)
    response = b'{"Result": "' + b"AbC" * 100 + b'"}'
    events = execution_with_bodies("exec-big", b'{"q": "Small"}', response)
    first = next(i for i, event in enumerate(events) if event.kind == "attempt_responded")
    batches = [events[:first], events[first:]] if split else [events]
    for number, batch in enumerate(batches):
        table = journaled(paths, f"feedbeef0000b001-000000002{number}.journal", batch)
        staged = stage_rows(fold_segments([table]))
        attempts = next(i.staging for i in staged.inserts if i.table_name == "attempts")
        if batch is batches[-1]:
            assert set(attempts.column("lowered_response_body").to_pylist()) == {None}
        apply_segments(conn, [table])
    rows = conn.execute(
        "SELECT request_body, response_body, search_text, "
        f"{DERIVED_COLUMNS['attempts']['search_text']} FROM attempts"
    ).fetchall()
    text = '{"q": "small"}\n' + response.decode().lower()
    assert rows and set(rows) == {(b'{"q": "Small"}', response, text, text)}
