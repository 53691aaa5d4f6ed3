"""Event logs: every executor event kind survives JSON Lines and comes back equal."""

from __future__ import annotations

import json
import subprocess
import sys
import typing

import pytest

from executor import events as ev
from executor.eventlog import (
    EVENT_CLASSES,
    EventLogError,
    event_from_dict,
    event_to_dict,
    read_event_log,
    write_event_log,
)
from executor.policy import Decision
from tests.support.events_factory import realistic_execution

EXEC = "20260101-000000-abc123"
AT = 1_767_225_600.25
NON_UTF8 = b"\xff\xfe\x00\x80binary\xc3"
LARGE_BODY = b'{"rows":[' + b",".join(b'{"n":%d}' % i for i in range(300_000)) + b"]}"

DECISION = Decision.from_dict({
    "action": "retry_corrected",
    "rule_id": "analyzer.accept",
    "reason": "analyzer changed city_code",
    "inputs": {"status": 400, "guard_violations": [], "protected_keys": {}},
    "not_matched": [{"rule_id": "success.2xx", "reason": "HTTP 400 is not 2xx"}],
    "delay_ms": None,
    "delay_source": None,
    "layer": "analyzer",
    "corrected_parameters": {"city_code": "PAR"},
})

EVENT_CASES: list[tuple[str, ev.Event]] = [
    ("execution_started", ev.ExecutionStarted(
        execution_id=EXEC, started_at=AT, query="Find hotels in Paris — 3 nights ✈",
        plan_path=None, plan={"steps": [{"id": "step-1"}]}, config={"max_attempts": 3},
        config_sources={"max_attempts": "default"}, llm={"base_url": "http://127.0.0.1:1/v1"},
        tool_version="0.1.0")),
    ("execution_finished", ev.ExecutionFinished(
        execution_id=EXEC, finished_at=AT + 2, status="partial", stop_reason=None,
        incomplete_steps=("step-2", "step-3"), llm_calls=2, llm_total_tokens=812)),
    ("step_started", ev.StepStarted(
        execution_id=EXEC, step_id="step-1", started_at=AT, tool="travel",
        capability="search_hotels", url="http://127.0.0.1:9/capabilities/search_hotels",
        depends_on=("step-0",), parameters={"city_code": "PARIS", "nights": "2"},
        protected_keys={"nights": "hitl_approved"}, orchestrator=False, side_effects="none")),
    ("step_finished", ev.StepFinished(
        execution_id=EXEC, step_id="step-1", finished_at=AT, status="succeeded",
        dispatch_count=2, attempts=1, validation_retries=1, semantic_retries=0,
        final_action="success", final_rule_id="success.2xx", error=None,
        result={"success": True, "data": {"hotels": [1.5, None, "x"]}})),
    ("step_finished_skipped", ev.StepFinished(
        execution_id=EXEC, step_id="step-2", finished_at=AT, status="skipped",
        dispatch_count=0, attempts=0, validation_retries=0, semantic_retries=0,
        final_action=None, final_rule_id=None, error="skipped due to failed dependency: step-1",
        result=None, skip_reason="skipped due to failed dependency: step-1")),
    ("parameters_coerced", ev.ParametersCoerced(
        execution_id=EXEC, step_id="step-1", n=1, at=AT,
        coercions=({"key": "nights", "from_type": "string", "from_value": "2",
                    "to_type": "int64", "to_value": 2,
                    "log_line": "nights: string(2) -> int64(2)"},))),
    ("attempt_dispatched", ev.AttemptDispatched(
        execution_id=EXEC, step_id="step-1", n=1, attempt_number=1, at=AT, method="POST",
        url="http://127.0.0.1:9/x", request_headers={"Content-Type": "application/json"},
        request_body=b'{"city_code":"PARIS"}', parameters={"city_code": "PARIS"},
        correction_layer=None)),
    ("attempt_dispatched_empty_body", ev.AttemptDispatched(
        execution_id=EXEC, step_id="step-1", n=2, attempt_number=1, at=AT, method="POST",
        url="http://127.0.0.1:9/x", request_headers={}, request_body=b"", parameters={},
        correction_layer="analyzer")),
    ("attempt_responded_non_utf8", ev.AttemptResponded(
        execution_id=EXEC, step_id="step-1", n=1, at=AT, elapsed_ms=3.25, status=502,
        response_headers={"content-type": "application/octet-stream"}, response_body=NON_UTF8,
        transport_error=None, transport_error_message=None, retry_policy="unspecified")),
    ("attempt_responded_large_body", ev.AttemptResponded(
        execution_id=EXEC, step_id="step-1", n=1, at=AT, elapsed_ms=12.0, status=200,
        response_headers={}, response_body=LARGE_BODY, transport_error=None,
        transport_error_message=None, retry_policy="unspecified")),
    ("attempt_responded_transport_failure", ev.AttemptResponded(
        execution_id=EXEC, step_id="step-1", n=3, at=AT, elapsed_ms=0.5, status=0,
        response_headers={}, response_body=b"", transport_error="connect",
        transport_error_message="request failed: ConnectError: refused",
        retry_policy="unspecified")),
    ("attempt_decided", ev.AttemptDecided(
        execution_id=EXEC, step_id="step-1", n=1, at=AT, dispatched=True,
        parameters={"city_code": "PARIS"}, decision=DECISION)),
    ("backoff_started", ev.BackoffEvent(
        execution_id=EXEC, step_id="step-1", n=1, at=AT, phase="started", planned_ms=1000.0,
        source="retry_after_header")),
    ("backoff_finished", ev.BackoffEvent(
        execution_id=EXEC, step_id="step-1", n=1, at=AT, phase="finished", planned_ms=542.0735,
        source="backoff", actual_ms=543.9)),
    ("llm_call", ev.LLMCall(
        execution_id=EXEC, step_id="step-1", n=1, call_id=f"{EXEC}:step-1:1:1",
        site="error_analysis", at=AT, latency_ms=4.5, base_url="http://127.0.0.1:1/v1",
        model="truva-demo-rules", temperature=0.0, max_tokens=500,
        messages=({"role": "user", "content": "<identity>… “quoted” 東京"},),
        request_body=b'{"model":"m"}', response_status=200,
        response_body='{"choices":[{"message":{"content":"×"}}]}'.encode(),
        raw_text='{"should_retry": true}', parsed={"should_retry": True}, parse_error=None,
        error=None, prompt_tokens=120, completion_tokens=9, total_tokens=129)),
    ("llm_call_failed_lone_surrogate", ev.LLMCall(
        execution_id=EXEC, step_id="step-1", n=1, call_id="c2", site="semantic_retry", at=AT,
        latency_ms=0.0, base_url="http://127.0.0.1:1/v1", model="m", temperature=0.0,
        max_tokens=1000, messages=(), request_body=b"", response_status=None,
        response_body=NON_UTF8, raw_text="broken \ud800 surrogate", parsed=None,
        parse_error="no JSON object found in response", error="LLM endpoint answered HTTP 500",
        prompt_tokens=None, completion_tokens=None, total_tokens=None)),
    ("notice", ev.Notice(
        execution_id=EXEC, step_id="step-1", n=1, at=AT,
        name="tool_contract.success_false_on_2xx", message="HTTP 200 but success:false",
        attrs={"status": 200})),
    ("notice_without_step", ev.Notice(
        execution_id=EXEC, step_id=None, n=None, at=AT, name="budget.note", message="m")),
    ("circuit_state_changed", ev.CircuitStateChanged(
        breaker="travel", at=AT, from_state="closed", to_state="open",
        reason="5 consecutive failures", execution_id=EXEC)),
]  # fmt: skip


def test_the_cases_cover_every_event_kind():
    covered = {event.kind for _, event in EVENT_CASES}
    assert covered == set(EVENT_CLASSES)
    assert set(EVENT_CLASSES) == {
        cls.__dataclass_fields__["kind"].default for cls in typing.get_args(ev.Event)
    }


@pytest.mark.parametrize("event", [e for _, e in EVENT_CASES], ids=[n for n, _ in EVENT_CASES])
def test_dict_round_trip_is_equal_and_typed(event):
    data = event_to_dict(event)
    assert data["kind"] == event.kind
    json.dumps(data)  # JSON-able as it stands
    back = event_from_dict(json.loads(json.dumps(data)))
    assert back == event
    assert type(back) is type(event)
    for name in type(event).__dataclass_fields__:
        assert type(getattr(back, name)) is type(getattr(event, name)), name


@pytest.mark.parametrize("event", [e for _, e in EVENT_CASES], ids=[n for n, _ in EVENT_CASES])
def test_file_round_trip_is_equal(tmp_path, event):
    path = write_event_log(tmp_path / "one.events.jsonl", [event])
    assert read_event_log(path) == [event]


def test_bytes_and_tuples_are_written_as_documented():
    data = event_to_dict(dict(EVENT_CASES)["attempt_responded_non_utf8"])
    assert data["response_body"] == {"$bytes_b64": "//4AgGJpbmFyecM="}
    finished = event_to_dict(dict(EVENT_CASES)["execution_finished"])
    assert finished["incomplete_steps"] == ["step-2", "step-3"]


def test_a_realistic_execution_round_trips_in_order(tmp_path):
    events = realistic_execution()
    path = write_event_log(tmp_path / "run.events.jsonl", events)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"kind": "event_log", "version": 1}
    assert len(lines) == len(events) + 1
    assert read_event_log(path) == events


def test_non_ascii_text_stays_readable_in_the_file(tmp_path):
    path = write_event_log(tmp_path / "a.events.jsonl", [dict(EVENT_CASES)["llm_call"]])
    assert "東京" in path.read_text(encoding="utf-8")


def test_a_file_without_header_is_read(tmp_path):
    event = dict(EVENT_CASES)["notice"]
    path = tmp_path / "bare.events.jsonl"
    path.write_text(json.dumps(event_to_dict(event)) + "\n\n", encoding="utf-8")
    assert read_event_log(path) == [event]


BAD_LINES = [
    ("invalid_json", '{"kind": "notice",', "invalid JSON"),
    ("unknown_kind", '{"kind": "teleported"}', "unknown event kind 'teleported'"),
    ("no_kind", '{"step_id": "x"}', "unknown event kind None"),
    ("not_an_object", "[1, 2]", "expected a JSON object"),
    ("unknown_field", '{"kind": "notice", "execution_id": "e", "step_id": null, "n": null, '
     '"at": 1.0, "name": "x", "message": "m", "colour": "red"}', "notice: unknown field 'colour'"),
    ("missing_field", '{"kind": "notice", "execution_id": "e"}', "notice: missing field"),
    ("bytes_not_wrapped", '{"kind": "attempt_dispatched", "execution_id": "e", "step_id": "s", '
     '"n": 1, "attempt_number": 1, "at": 1.0, "method": "POST", "url": "u", '
     '"request_headers": {}, "request_body": "plain text", "parameters": {}, '
     '"correction_layer": null}', "attempt_dispatched.request_body: expected"),
    ("bad_base64", '{"kind": "attempt_dispatched", "execution_id": "e", "step_id": "s", '
     '"n": 1, "attempt_number": 1, "at": 1.0, "method": "POST", "url": "u", '
     '"request_headers": {}, "request_body": {"$bytes_b64": "!!"}, "parameters": {}, '
     '"correction_layer": null}', "attempt_dispatched.request_body: invalid base64"),
    ("tuple_not_array", '{"kind": "execution_finished", "execution_id": "e", "finished_at": 1, '
     '"status": "failed", "stop_reason": null, "incomplete_steps": "step-1", "llm_calls": 0, '
     '"llm_total_tokens": 0}', "execution_finished.incomplete_steps: expected a JSON array"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("line", "expected"), [c[1:] for c in BAD_LINES], ids=[c[0] for c in BAD_LINES]
)
def test_a_bad_line_is_reported_with_file_and_line(tmp_path, line, expected):
    good = json.dumps(event_to_dict(dict(EVENT_CASES)["notice"]))
    path = tmp_path / "bad.events.jsonl"
    path.write_text(f"{good}\n{line}\n{good}\n", encoding="utf-8")
    with pytest.raises(EventLogError) as caught:
        read_event_log(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: ")
    assert expected in message


def test_header_after_events_is_an_error(tmp_path):
    good = json.dumps(event_to_dict(dict(EVENT_CASES)["notice"]))
    path = tmp_path / "late.events.jsonl"
    path.write_text(f'{good}\n{{"kind": "event_log", "version": 1}}\n', encoding="utf-8")
    with pytest.raises(EventLogError, match=r":2: the event_log header may only be the first"):
        read_event_log(path)


def test_a_newer_event_log_version_is_refused(tmp_path):
    path = tmp_path / "future.events.jsonl"
    path.write_text('{"kind": "event_log", "version": 2}\n', encoding="utf-8")
    with pytest.raises(EventLogError, match=r":1: event log version 2 is not supported"):
        read_event_log(path)


def test_non_utf8_line_is_reported(tmp_path):
    path = tmp_path / "binary.events.jsonl"
    path.write_bytes(b'{"kind": "event_log", "version": 1}\n\xff\xfe\n')
    with pytest.raises(EventLogError, match=r":2: not UTF-8 text \(invalid byte 0xff\)"):
        read_event_log(path)


def test_missing_file_is_reported(tmp_path):
    path = tmp_path / "absent.events.jsonl"
    with pytest.raises(EventLogError, match="cannot read the event log"):
        read_event_log(path)


def test_a_value_json_cannot_hold_is_refused_naming_the_file(tmp_path):
    bad = ev.Notice(
        execution_id=EXEC,
        step_id=None,
        n=None,
        at=AT,
        name="x",
        message="m",
        attrs={"blob": b"nested bytes"},
    )
    with pytest.raises(EventLogError, match="notice: a field holds a value JSON cannot"):
        event_to_dict(bad)
    with pytest.raises(EventLogError, match=r"bad\.events\.jsonl: event 0: notice"):
        write_event_log(tmp_path / "bad.events.jsonl", [bad])
    assert not (tmp_path / "bad.events.jsonl").exists()


def test_not_an_event_is_refused():
    with pytest.raises(EventLogError, match="not an executor event: dict"):
        event_to_dict({"kind": "notice"})  # type: ignore[arg-type]


def test_eventlog_imports_no_store_or_ui_libraries():
    code = (
        "import sys, executor.eventlog; "
        "bad = [m for m in ('duckdb', 'textual', 'rich', 'pyarrow') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)  # fmt: skip
    assert result.stdout.strip() == ""
