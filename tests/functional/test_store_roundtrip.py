"""Recorder → DuckDB file → query API round trips: byte-exact bodies, big prompts, redaction."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.events import AttemptDispatched, Notice
from store.queries import open_store
from store.recorder import StoreRecorder
from tests.support.events_factory import (
    NON_UTF8_BODY,
    REALISTIC_COUNTS,
    SECRET,
    realistic_execution,
)

MIB = 1024 * 1024


def record(db: Path, events: list, **options) -> StoreRecorder:
    with StoreRecorder(db, **options) as recorder:
        for event in events:
            recorder.record(event)
    return recorder


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / ".truva" / "debug.duckdb"


class LockHolder:
    """Another process holding the store file open, as a second console would."""

    def __init__(self, db: Path) -> None:
        code = (
            "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
            "print('locked', flush=True); sys.stdin.readline(); c.close()"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "locked"

    def release(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        self.process.wait(timeout=10)


@pytest.fixture
def lock_holder(db: Path) -> Iterator[type[LockHolder]]:
    holders: list[LockHolder] = []

    def start(path: Path = db) -> LockHolder:
        holder = LockHolder(path)
        holders.append(holder)
        return holder

    yield start  # type: ignore[misc]
    for holder in holders:
        if holder.process.poll() is None:
            holder.process.kill()
            holder.process.wait()


def test_realistic_execution_reads_back_complete(db: Path) -> None:
    events = realistic_execution("exec-roundtrip")
    record(db, events)

    detail = open_store(db).get_execution("exec-roundtrip")

    assert detail.execution.status == "partial"
    assert detail.execution.incomplete_steps == ("step-3", "step-4", "step-5")
    assert len(detail.steps) == REALISTIC_COUNTS["steps"]
    assert sum(len(step.attempts) for step in detail.steps) == REALISTIC_COUNTS["attempts"]
    assert {step.step_id: step.status for step in detail.steps} == {
        "step-1": "succeeded",
        "step-2": "succeeded",
        "step-3": "failed",
        "step-4": "skipped",
        "step-5": "rejected",
    }
    retried = detail.step("step-1").attempts[0]
    assert (retried.action, retried.rule_id) == ("retry_same", "transient.retry_same")
    assert (retried.delay_ms, retried.delay_source) == (1000.0, "retry_after_header")
    assert retried.decision["not_matched"][0] == {
        "rule_id": "success.2xx",
        "reason": "HTTP 429 is not 2xx",
    }
    assert retried.backoff is not None
    assert (retried.backoff.planned_ms, retried.backoff.actual_ms) == (1000.0, 1000.4)
    corrected = detail.step("step-2").attempts
    assert (corrected[0].action, corrected[0].decision_layer) == ("retry_corrected", "analyzer")
    assert corrected[0].corrected_parameters == {"name": "Ada", "age": 30}
    assert corrected[1].correction_layer == "analyzer"
    assert corrected[0].llm_calls[0].site == "error_analysis"
    rejected = detail.step("step-5").attempts[0]
    assert (rejected.dispatched, rejected.action) == (False, "reject_predispatch")
    assert rejected.request_body is None
    skipped = detail.step("step-4")
    assert (skipped.tool, skipped.capability, skipped.depends_on) == (
        "billing",
        "receipt",
        ("step-3",),
    )
    assert [event.kind for event in detail.events] == ["circuit"]


def test_bodies_are_byte_exact_including_non_utf8(db: Path) -> None:
    events = realistic_execution("exec-bytes", binary_body=NON_UTF8_BODY)
    record(db, events)
    sent = {(e.step_id, e.n): e.request_body for e in events if isinstance(e, AttemptDispatched)}

    detail = open_store(db).get_execution("exec-bytes")

    failed = detail.step("step-3").attempts[0]
    assert failed.response_body == NON_UTF8_BODY
    assert failed.response_size == len(NON_UTF8_BODY)
    for step in detail.steps:
        for attempt in step.attempts:
            if attempt.dispatched:
                assert attempt.request_body == sent[(step.step_id, attempt.n)]
                assert attempt.request_size == len(sent[(step.step_id, attempt.n)])


def test_five_mib_prompt_is_stored_whole(db: Path) -> None:
    prompt_extra = "\n" + ("context line ü\n" * (MIB // 3))
    events = realistic_execution("exec-big-prompt", prompt_extra=prompt_extra)
    record(db, events)
    sent_call = next(event for event in events if event.kind == "llm_call")

    call = open_store(db).get_execution("exec-big-prompt").step("step-2").attempts[0].llm_calls[0]

    assert call.messages[1]["content"] == sent_call.messages[1]["content"]
    assert len(call.messages[1]["content"]) > 5 * MIB
    assert call.request_body == sent_call.request_body
    assert call.request_size == len(sent_call.request_body)


def test_twenty_mib_llm_response_is_stored_whole(db: Path) -> None:
    raw_text = '{"should_retry": false, "reason": "' + "r" * (20 * MIB) + '"}'
    events = realistic_execution("exec-big-answer", llm_raw_text=raw_text)
    record(db, events)
    sent_call = next(event for event in events if event.kind == "llm_call")

    call = open_store(db).get_execution("exec-big-answer").step("step-2").attempts[0].llm_calls[0]

    assert call.raw_text == raw_text
    assert call.response_body == sent_call.response_body
    assert call.response_size == len(sent_call.response_body) > 20 * MIB


def _bytes_under(path: Path) -> bytes:
    return b"".join(file.read_bytes() for file in sorted(path.rglob("*")) if file.is_file())


def test_secrets_are_redacted_in_the_spool_and_the_database(db: Path, lock_holder) -> None:
    record(db, [])  # create the store
    holder = lock_holder(db)
    events = realistic_execution("exec-secret")
    record(db, events, lock_timeout_s=0.05)
    spool = db.with_name(db.name + ".spool")

    spooled = _bytes_under(spool)
    assert b"slow down" in spooled  # the spool holds the recording
    assert SECRET.encode() not in spooled
    holder.release()
    detail = open_store(db).get_execution("exec-secret")

    headers = detail.step("step-1").attempts[0].request_headers
    assert headers["Authorization"] == "[REDACTED]"
    assert headers["X-Api-Key"] == "[REDACTED]"
    assert detail.llm["api_key"] == "[REDACTED]"
    stored = db.read_bytes() + _bytes_under(spool)
    assert b"X-Api-Key" in stored  # header names are stored as text, so a secret would show
    assert SECRET.encode() not in stored
    assert not list((spool / "segments").iterdir())


def test_recording_while_another_process_holds_the_file_goes_through_the_spool(
    db: Path, lock_holder
) -> None:
    record(db, [])
    holder = lock_holder(db)
    record(db, realistic_execution("exec-spooled"), lock_timeout_s=0.05)
    segments = list((db.with_name(db.name + ".spool") / "segments").iterdir())
    assert segments, "the recorder could not open the file, so it spooled"
    holder.release()

    detail = open_store(db).get_execution("exec-spooled")

    assert detail.execution.status == "partial"
    assert sum(len(step.attempts) for step in detail.steps) == REALISTIC_COUNTS["attempts"]


class Unencodable:
    kind = "notice"
    execution_id = "exec-odd"


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(Unencodable(), id="not-a-dataclass"),
        pytest.param(
            Notice("exec-odd", None, None, 1.0, "odd", "NaN attrs", {"x": float("nan")}),
            id="nan-in-attrs",
        ),
        pytest.param(
            Notice("exec-odd", None, None, 1.0, "odd", "bytes attrs", {"raw": b"\xff"}),
            id="bytes-in-attrs",
        ),
        pytest.param(
            Notice("exec-odd", None, None, 1.0, "odd", "lone surrogate", {"s": "\udcff"}),
            id="lone-surrogate",
        ),
    ],
)
def test_odd_events_never_raise_and_are_kept(db: Path, event) -> None:
    recorder = record(db, [event])

    assert recorder.last_error is None
    with open_store(db).session() as conn:
        kinds = conn.execute("SELECT kind FROM events WHERE execution_id = 'exec-odd'").fetchall()
    assert len(kinds) == 1


def test_credentials_quoted_in_failure_texts_are_redacted_at_rest(db: Path) -> None:
    import dataclasses

    secret = "sk-transport-secret-77"
    events = [
        dataclasses.replace(
            event,
            transport_error="connect",
            transport_error_message=f"request failed: ConnectError: https://api.test/?api_key={secret}",
        )
        if event.kind == "attempt_responded"
        else dataclasses.replace(event, error=f"component returned status 401: api_key={secret}")
        if event.kind == "step_finished" and event.error
        else event
        for event in realistic_execution("exec-error-secret")
    ]
    record(db, events)
    detail = open_store(db).get_execution("exec-error-secret")
    messages = [a.transport_error_message for s in detail.steps for a in s.attempts]
    assert any("api_key=[REDACTED]" in (m or "") for m in messages)
    stored = db.read_bytes() + _bytes_under(db.with_name(db.name + ".spool"))
    assert secret.encode() not in stored
