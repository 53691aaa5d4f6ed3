"""The headless query API on a small recorded store: filters, paging, prefixes, counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store.errors import ExecutionNotFoundError, StepNotFoundError
from store.queries import ExecutionFilter, Store, open_store
from store.recorder import StoreRecorder
from store.records import ATTEMPT_LAZY_JSON, is_decoded, to_jsonable
from tests.support.events_factory import (
    START_AT,
    exhausted_execution,
    realistic_execution,
    small_execution,
)

HOUR = 3600.0
TRIP, SMALL_A, SMALL_B, EXHAUSTED = "exec-trip", "exec-small-a", "exec-small-b", "exec-exhausted"
ALL = {TRIP, SMALL_A, SMALL_B, EXHAUSTED}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    db = tmp_path_factory.mktemp("queries") / "debug.duckdb"
    with StoreRecorder(db) as recorder:
        for event in (
            realistic_execution(TRIP, start_at=START_AT)
            + small_execution(SMALL_A, start_at=START_AT + HOUR)
            + small_execution(SMALL_B, start_at=START_AT + 2 * HOUR)
            + exhausted_execution(EXHAUSTED, start_at=START_AT + 3 * HOUR)
        ):
            recorder.record(event)
    return open_store(db)


FILTER_CASES = [
    ("no-filter", ExecutionFilter(), ALL),
    ("status-partial", ExecutionFilter(status="partial"), {TRIP}),
    ("status-failed", ExecutionFilter(status="failed"), {EXHAUSTED}),
    ("status-with-no-match", ExecutionFilter(status="cancelled"), set()),
    ("tool", ExecutionFilter(tool="crm"), {TRIP}),
    ("tool-of-several-executions", ExecutionFilter(tool="t"), {SMALL_A, SMALL_B}),
    ("tool-of-a-skipped-step-filled-from-plan", ExecutionFilter(capability="receipt"), {TRIP}),
    ("capability-name", ExecutionFilter(capability="create_contact"), {TRIP}),
    ("capability-tool-dot-name", ExecutionFilter(capability="crm.create_contact"), {TRIP}),
    ("action", ExecutionFilter(action="retry_same"), ALL),
    ("action-stop-budget", ExecutionFilter(action="stop_budget"), {EXHAUSTED}),
    ("action-reject-predispatch", ExecutionFilter(action="reject_predispatch"), {TRIP}),
    ("action-and-tool-on-the-same-attempt", ExecutionFilter(action="retry_same", tool="crm"),
     set()),
    ("rule-id", ExecutionFilter(rule_id="analyzer.accept"), {TRIP}),
    ("rule-id-budget", ExecutionFilter(rule_id="budget.attempts"), {EXHAUSTED}),
    ("http-status", ExecutionFilter(http_status=401), {TRIP}),
    ("http-status-zero-is-transport-error", ExecutionFilter(http_status=0), {EXHAUSTED}),
    ("http-status-and-action-on-the-same-attempt",
     ExecutionFilter(http_status=503, action="success"), set()),
    ("since-inclusive", ExecutionFilter(since=START_AT + HOUR), {SMALL_A, SMALL_B, EXHAUSTED}),
    ("until-exclusive", ExecutionFilter(until=START_AT + HOUR), {TRIP}),
    ("time-window", ExecutionFilter(since=START_AT + HOUR, until=START_AT + 2 * HOUR), {SMALL_A}),
    ("text-in-response-body-any-case", ExecutionFilter(text="SLOW DOWN"), {TRIP}),
    ("text-in-request-body", ExecutionFilter(text='"quantity": 2'), {EXHAUSTED}),
    ("text-in-llm-prompt", ExecutionFilter(text="answer json only"), {TRIP}),
    ("text-in-llm-raw-answer", ExecutionFilter(text="is_transient_error"), {TRIP}),
    ("text-in-non-utf8-body", ExecutionFilter(text="binary"), {TRIP}),
    ("text-absent", ExecutionFilter(text="no such words anywhere"), set()),
    ("filters-combine-with-and", ExecutionFilter(status="succeeded", text="slow down"), set()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "expected"),
    [(filters, expected) for _, filters, expected in FILTER_CASES],
    ids=[name for name, _, _ in FILTER_CASES],
)
def test_filter(store: Store, filters: ExecutionFilter, expected: set[str]) -> None:
    page = store.list_executions(filters)

    assert {row.execution_id for row in page.executions} == expected
    assert page.total == len(expected)


def test_rows_are_newest_first_with_counts(store: Store) -> None:
    rows = store.list_executions().executions

    assert [row.execution_id for row in rows] == [EXHAUSTED, SMALL_B, SMALL_A, TRIP]
    trip = rows[-1]
    assert (trip.status, trip.steps_planned, trip.steps_total) == ("partial", 5, 5)
    assert (trip.steps_succeeded, trip.steps_failed, trip.steps_rejected, trip.steps_skipped) == (
        2,
        1,
        1,
        1,
    )
    assert (trip.attempts, trip.dispatches, trip.llm_calls, trip.llm_total_tokens) == (6, 5, 1, 150)
    assert trip.last_failing_rule == "guard.reject_predispatch"
    assert trip.duration_ms == pytest.approx((trip.finished_at - trip.started_at) * 1000)
    assert rows[0].last_failing_rule == "budget.attempts"


def test_pages_split_the_list_and_keep_the_total(store: Store) -> None:
    first = store.list_executions(limit=3)
    second = store.list_executions(limit=3, offset=3)

    assert [row.execution_id for row in first.executions] == [EXHAUSTED, SMALL_B, SMALL_A]
    assert [row.execution_id for row in second.executions] == [TRIP]
    assert first.total == second.total == 4


@pytest.mark.parametrize(
    ("given", "resolved"),
    [("exec-trip", TRIP), ("exec-tr", TRIP), ("exec-small-a", SMALL_A), ("exec-e", EXHAUSTED)],
    ids=["full-id", "unique-prefix", "full-id-that-prefixes-nothing-else", "short-prefix"],
)
def test_execution_by_id_or_unique_prefix(store: Store, given: str, resolved: str) -> None:
    assert store.get_execution(given).execution.execution_id == resolved


@pytest.mark.parametrize(
    ("given", "message_part"),
    [("exec-s", "matches several executions"), ("zzz", "no execution id starts with"),
     ("", "no execution id starts with")],
    ids=["ambiguous-prefix", "unknown", "empty"],
)  # fmt: skip
def test_execution_lookup_errors(store: Store, given: str, message_part: str) -> None:
    with pytest.raises(ExecutionNotFoundError, match=message_part):
        store.get_execution(given)


def test_unknown_step_names_the_steps_there_are(store: Store) -> None:
    detail = store.get_execution(EXHAUSTED)

    with pytest.raises(StepNotFoundError, match=r"no step 'step-9' \(steps: step-1\)"):
        detail.step("step-9")


def test_transport_error_attempt_detail(store: Store) -> None:
    attempts = store.get_execution(EXHAUSTED).step("step-1").attempts

    assert [(a.status, a.transport_error, a.action) for a in attempts] == [
        (503, None, "retry_same"),
        (0, "connect", "retry_same"),
        (503, None, "stop_budget"),
    ]
    assert [a.backoff.planned_ms if a.backoff else None for a in attempts] == [
        542.0735,
        1084.147,
        None,
    ]


def test_summary_counts(store: Store) -> None:
    counts = store.summary_counts()
    failed_only = store.summary_counts(ExecutionFilter(status="failed"))

    assert counts["executions_by_status"] == {"succeeded": 2, "partial": 1, "failed": 1}
    assert counts["attempts"] == 6 + 6 + 6 + 3
    assert counts["attempts_by_action"]["retry_same"] == 1 + 3 + 3 + 2
    assert counts["attempts_by_rule"]["budget.attempts"] == 1
    assert counts["attempts_by_http_status"][None] == 1  # the rejected attempt
    assert failed_only == {
        "executions_by_status": {"failed": 1},
        "attempts_by_action": {"retry_same": 2, "stop_budget": 1},
        "attempts_by_rule": {"transient.retry_same": 2, "budget.attempts": 1},
        "attempts_by_http_status": {503: 2, 0: 1},
        "executions": 1,
        "attempts": 3,
    }


def test_running_execution_of_a_live_recorder_in_this_process(tmp_path: Path) -> None:
    db = tmp_path / "debug.duckdb"
    events = small_execution("exec-live")
    recorder = StoreRecorder(db)
    try:
        for event in events[:5]:
            recorder.record(event)
        recorder.flush()

        running = open_store(db).get_execution("exec-live")

        for event in events[5:]:
            recorder.record(event)
    finally:
        recorder.close()
    assert running.execution.status == "running"
    assert running.execution.duration_ms is None
    assert open_store(db).get_execution("exec-live").execution.status == "succeeded"


def test_a_running_step_counts_dispatches_and_corrections_from_its_attempts(
    tmp_path: Path, store: Store
) -> None:
    db = tmp_path / "debug.duckdb"
    events = realistic_execution("exec-live")
    unfinished = [e for e in events if e.kind not in ("step_finished", "execution_finished")]
    recorder = StoreRecorder(db)
    try:
        for event in unfinished:
            recorder.record(event)
        recorder.flush()
        running = open_store(db).get_execution("exec-live")
    finally:
        recorder.close()
    finished = {step.step_id: step for step in store.get_execution(TRIP).steps}
    for step in running.steps:
        dispatched = sum(1 for attempt in step.attempts if attempt.dispatched)
        assert step.status == "running" and finished[step.step_id].status != "running"
        assert step.dispatch_count == dispatched == finished[step.step_id].dispatch_count
        # the policy's attempt counter, as step_finished will record it
        assert step.attempts_count == max(attempt.attempt_number for attempt in step.attempts)
        assert step.validation_retries == finished[step.step_id].validation_retries
        assert step.semantic_retries == finished[step.step_id].semantic_retries


def test_a_running_steps_refused_connection_is_no_dispatch(tmp_path: Path) -> None:
    db = tmp_path / "debug.duckdb"
    events = exhausted_execution("exec-live")  # 503, a refused connection, 503
    recorder = StoreRecorder(db)
    try:
        for event in events:
            if event.kind not in ("step_finished", "execution_finished"):
                recorder.record(event)
        recorder.flush()
        running = open_store(db).get_execution("exec-live")
    finally:
        recorder.close()
    step = running.step("step-1")
    assert [a.transport_error for a in step.attempts] == [None, "connect", None]
    assert (step.status, step.dispatch_count) == ("running", 2)
    assert running.execution.dispatches == 2


def _calls(detail: object) -> list:
    return [call for step in detail.steps for attempt in step.attempts  # type: ignore[attr-defined]
            for call in (*attempt.llm_calls, *step.llm_calls)]  # fmt: skip


def test_an_execution_read_without_llm_texts_gets_them_by_call_id(store: Store) -> None:
    full = store.get_execution(TRIP)
    light = store.get_execution(TRIP, llm_texts=False)
    full_calls, light_calls = _calls(full), _calls(light)
    assert [c.call_id for c in light_calls] == [c.call_id for c in full_calls] != []
    for call in light_calls:
        assert not call.texts_loaded and call.text_recorded  # recorded, not yet read
        assert (call.messages, call.request_body, call.response_body, call.raw_text) == (
            None, None, None, None)  # fmt: skip
    texts = store.llm_call_texts(full.execution.execution_id,
                                 [c.call_id for c in light_calls])  # fmt: skip
    for call in full_calls:
        assert texts[call.call_id] == {"messages": call.messages,
                                       "request_body": call.request_body,
                                       "response_body": call.response_body,
                                       "raw_text": call.raw_text}  # fmt: skip
    from store.records import step_with_texts

    filled = [step_with_texts(step, texts) for step in light.steps]
    assert filled == list(full.steps)  # the same records once the texts are in


def test_a_call_without_its_text_is_told_apart_when_read_without_llm_texts(
    tmp_path: Path,
) -> None:
    # Whether a call has its text is asked without reading the prompts' bytes; a call whose
    # text was not recorded (NULL request bytes) must still say so, beside one that was.
    db = tmp_path / "debug.duckdb"
    with StoreRecorder(db) as recorder:
        for event in realistic_execution(TRIP, start_at=START_AT):
            recorder.record(event)
    store = open_store(db)
    recorded = _calls(store.get_execution(TRIP))[0].call_id
    unrecorded = recorded + "-unrecorded"
    with store.session() as conn:  # the same call again, as one made with its text not kept
        conn.execute("INSERT INTO llm_calls SELECT * REPLACE ($2 AS call_id, "
                     "NULL AS request_body, NULL AS response_body, NULL AS raw_text) "
                     "FROM llm_calls WHERE call_id = $1", [recorded, unrecorded])  # fmt: skip
    full = _calls(store.get_execution(TRIP))
    light = _calls(store.get_execution(TRIP, llm_texts=False))
    assert [(c.call_id, c.text_recorded, c.text_note) for c in light] == [
        (c.call_id, c.text_recorded, c.text_note) for c in full]  # fmt: skip
    assert [c.text_recorded for c in light].count(False) == 1
    shown = {c.call_id: c.texts_loaded for c in light}
    assert shown[unrecorded] and not any(v for k, v in shown.items() if k != unrecorded)


def test_an_execution_is_read_with_its_attempts_json_undecoded_until_a_field_is_read(
    store: Store,
) -> None:
    # Opening 1,000 attempts decoded ~5,000 JSON texts (decisions ~0.6 KB each) that the first
    # screen does not show; each field now decodes itself when read, to the same value.
    detail = store.get_execution(TRIP, llm_texts=False)
    attempts = [attempt for step in detail.steps for attempt in step.attempts]
    assert len(attempts) > 3
    undecoded = {name: sum(not is_decoded(a, name) for a in attempts) for name in ATTEMPT_LAZY_JSON}
    assert undecoded["decision"] == len(attempts)  # every attempt has a recorded decision
    assert undecoded["request_headers"] > 0
    first = attempts[0]
    rule = first.decision["rule_id"]  # read: decoded once, kept
    assert is_decoded(first, "decision") and first.decision["rule_id"] == rule == first.rule_id
    assert all(not is_decoded(a, "decision") for a in attempts[1:])
    with store.session() as conn:
        stored = conn.execute(
            "SELECT decision::VARCHAR FROM attempts WHERE execution_id = $1 "
            "AND step_id = $2 AND n = $3", [TRIP, first.step_id, first.n]).fetchone()  # fmt: skip
    assert first.decision == json.loads(stored[0])
    # Every view of the records sees the decoded values: equality, to_jsonable, replace.
    assert store.get_execution(TRIP, llm_texts=False) == detail
    assert to_jsonable(detail) == to_jsonable(store.get_execution(TRIP, llm_texts=False))
    assert all(is_decoded(a, name) for a in attempts for name in ATTEMPT_LAZY_JSON)


def test_sessions_draw_no_duckdb_progress_bar(store: Store) -> None:
    # DuckDB's bar for a query past 2 s would be drawn over the console or into `ls` output.
    with store.session() as conn:
        assert conn.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)


def test_a_text_search_matching_most_executions_counts_and_pages_them(store: Store) -> None:
    # Every execution has a body with `{`: the matches go through the session's table, and the
    # count, the page and the summary agree.
    page = store.list_executions(ExecutionFilter(text="{"), limit=2)
    assert page.total == len(ALL) and len(page.executions) == 2
    assert set(store.matching_execution_ids(ExecutionFilter(text="{"))) == ALL
    counts = store.summary_counts(ExecutionFilter(text="{"))
    assert sum(counts["executions_by_status"].values()) == len(ALL)
