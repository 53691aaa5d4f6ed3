"""The recorder's journal and database cadence: what is written before a dispatch, and when."""

from __future__ import annotations

import itertools
import threading
import types
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

import store.recorder
import store.spool
from store.ingest import encode_records
from store.recorder import DB_INTERVAL_GROWTH, StoreRecorder
from store.spool import JOURNAL_SUFFIX, WriterIdentity, read_segment, writer_segments
from tests.support.events_factory import SECRET, realistic_execution, small_execution

QUIET = {"batch_size": 10_000, "flush_interval_s": 3600.0}  # the background thread stays asleep


def journal_kinds(recorder: StoreRecorder, *, journals: int = 1) -> list[str]:
    """Kinds of the records in the recorder's newest journal, in order."""
    found = [p for p in writer_segments(recorder.paths, recorder.writer)
             if p.name.endswith(JOURNAL_SUFFIX)]  # fmt: skip
    assert len(found) == journals, found
    return read_segment(found[-1]).column("kind").to_pylist()


def test_a_step_start_is_journaled_with_its_dispatch_in_one_frame(tmp_path: Path) -> None:
    events = small_execution("exec-journal", steps=1)
    kinds = [event.kind for event in events]
    dispatched = kinds.index("attempt_dispatched")
    recorder = StoreRecorder(tmp_path / "debug.duckdb", **QUIET)
    try:
        for event in events[: kinds.index("step_started") + 1]:
            recorder.record(event)
        assert journal_kinds(recorder) == ["execution_started"]
        frames_before = recorder._journal.size

        for event in events[kinds.index("step_started") + 1 : dispatched + 1]:
            recorder.record(event)

        assert journal_kinds(recorder) == kinds[: dispatched + 1]
        assert recorder._journal.size > frames_before
        assert recorder._journal.size - frames_before == len(
            store.spool.journal_frame(encode_records(events[1 : dispatched + 1], 2))
        )  # one frame carries the step start and the dispatch
    finally:
        recorder.close()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(store.recorder, "time", types.SimpleNamespace(monotonic=fake.monotonic))
    return fake


def test_the_recorders_own_database_ingests_back_off_to_a_bound(
    tmp_path: Path, clock: FakeClock
) -> None:
    recorder = StoreRecorder(tmp_path / "debug.duckdb", db_interval_s=1.0, **QUIET)
    ingested_at: list[float] = []
    try:
        for tick in range(250):  # 25 s of flushes, one every 0.1 s, each with a new execution
            clock.now = 1000.0 + tick / 10
            for event in small_execution(f"exec-{tick:04d}", steps=1):
                recorder.record(event)
            recorder.flush()
            if not writer_segments(recorder.paths, recorder.writer):
                ingested_at.append(round(clock.now - 1000.0, 1))
    finally:
        recorder.close()

    waits = [round(b - a, 1) for a, b in itertools.pairwise(ingested_at)]
    assert ingested_at[0] == 0.0  # the first flush ingests at once
    assert waits[:3] == [2.0, 4.0, 8.0]
    assert set(waits[3:]) == {1.0 * DB_INTERVAL_GROWTH}


def test_repeated_headers_and_urls_are_redacted_in_every_event() -> None:
    events = [event for event in realistic_execution("exec-cache") if event.kind in
              ("attempt_dispatched", "attempt_responded")]  # fmt: skip
    twice = events + [replace(event, execution_id="exec-cache-2") for event in events]

    records = encode_records(twice, 1)

    payloads = [record[3] for record in records]
    assert payloads[: len(events)] == [
        text.replace("exec-cache-2", "exec-cache") for text in payloads[len(events) :]
    ]
    assert all(SECRET not in text for text in payloads)
    assert any("[REDACTED]" in text for text in payloads)


def test_a_journal_text_that_is_not_utf8_is_refused_naming_the_file(tmp_path: Path) -> None:
    writer = WriterIdentity(token="feedbeef00000009", pid=1, host="test-host")
    frame = store.spool.journal_frame([(1, b"step_\xffstarted", "exec", "{}", None, None)])
    data = store.spool.JOURNAL_MAGIC + store.spool.journal_meta_frame(writer) + frame

    with pytest.raises(pa.ArrowInvalid, match=r"bad\.journal: a damaged frame"):
        store.spool.read_journal_bytes(data, name="bad.journal")


def test_a_dispatch_is_journaled_while_the_last_journal_is_being_fsynced(
    tmp_path: Path, monkeypatch
) -> None:
    events = small_execution("exec-seal", steps=1)
    dispatches = [i for i, event in enumerate(events) if event.kind == "attempt_dispatched"]
    recorder = StoreRecorder(tmp_path / "debug.duckdb", **QUIET)
    in_seal, release = threading.Event(), threading.Event()
    seal = store.spool.Journal.seal

    def slow_seal(journal: store.spool.Journal) -> Path:
        in_seal.set()
        release.wait(60)
        return seal(journal)

    monkeypatch.setattr(store.spool.Journal, "seal", slow_seal)
    try:
        for event in events[: dispatches[0] + 1]:
            recorder.record(event)
        flusher = threading.Thread(target=recorder.flush)
        flusher.start()
        assert in_seal.wait(60)
        recorded = threading.Event()

        def dispatch_next() -> None:
            for event in events[dispatches[0] + 1 : dispatches[1] + 1]:
                recorder.record(event)
            recorded.set()

        threading.Thread(target=dispatch_next).start()
        try:
            assert recorded.wait(20), "record() waited for the previous journal's fsync"
            # a new journal holds it; the one being sealed is still a journal on disk
            assert journal_kinds(recorder, journals=2) == [
                event.kind for event in events[dispatches[0] + 1 : dispatches[1] + 1]
            ]
        finally:
            release.set()
            flusher.join()
    finally:
        recorder.close()
