"""`truva-console replay`: a recorded step run again through the real executor and httpx.

Each test first records a real run (`truva-console run` against scripted loopback tool and LLM
servers, into a DuckDB file in tmp_path), then replays one of its steps with edited or recorded
responses and checks the decisions, the comparison and what was stored.
"""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from console.replay.engine import Replayer
from console.replay.setup import prepare_replay
from store.queries import open_store
from tests.support.demo_store import copy_store
from tests.support.plans import CliResult, capability, plan, run_cli, step
from tests.support.replay_runs import analysis, record, record_paris_corrected, write_json
from tests.support.tool_server import ScriptedToolServer, ToolReply

CITY = {
    "type": "object",
    "properties": {"city_code": {"type": "string"}, "nights": {"type": "integer"}},
    "required": ["city_code"],
}
WEATHER_PATH = "/capabilities/weather"
HOTELS_PATH = "/capabilities/search_hotels"


def replay_cli(*argv: str) -> CliResult:
    """`truva-console replay ARGV` in-process."""
    return run_cli("replay", *argv)


def replay_json(db: Path, *argv: str) -> dict[str, Any]:
    result = replay_cli(*argv, "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    return result.json()


def decisions(step_document: dict[str, Any]) -> list[tuple[Any, ...]]:
    """(status, transport error, action, rule, delay rounded to µs) for every attempt."""
    return [
        (
            a["status"],
            a["transport_error"],
            a["action"],
            a["rule"],
            None if a["delay_ms"] is None else round(a["delay_ms"], 3),
        )
        for a in step_document["attempts"]
    ]


def executions_in(db: Path) -> int:
    return open_store(db).list_executions().total


OK_200 = {"status": 200, "body": {"success": True, "data": {"temp_c": 21}}}
INVALID_422 = {
    "status": 422,
    "headers": {"X-Why": "bad location"},
    "body": {
        "success": False,
        "error": {
            "code": "INVALID_LOCATION",
            "message": "unknown location",
            "category": "INPUT_ERROR",
        },
    },
}


def record_busy(tmp_path: Path, tool_server: ScriptedToolServer) -> tuple[Path, dict[str, Any]]:
    """A recorded step that got 503 three times and stopped on the attempts budget."""
    tool_server.script(WEATHER_PATH, ToolReply.error(503, "BUSY", "try later", "SERVICE_ERROR"))
    db, doc = record(
        tmp_path,
        plan(
            tool_server.base_url,
            {"weather": capability("weather")},
            [step("step-1", "weather", {"location": "Flower Mound"})],
            query="Weather in Flower Mound",
        ),
    )
    assert [a["action"] for a in doc["steps"][0]["attempts"]] == [
        "retry_same",
        "retry_same",
        "stop_budget",
    ]
    return db, doc


@pytest.fixture(scope="module")
def busy_recording(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """`record_busy` once per module; its tool server is gone, so a replay that reached the
    real tool would fail to connect (test_unchanged_replay_... checks it never does)."""
    with ScriptedToolServer() as server:
        return record_busy(tmp_path_factory.mktemp("busy"), server)


@pytest.fixture
def busy_run(busy_recording, tmp_path):
    """A copy of the module's busy recording at this test's store path, and its run document."""
    db, doc = busy_recording
    return copy_store(db, tmp_path / "store" / "debug.duckdb"), copy.deepcopy(doc)


@pytest.fixture
def paris_run(tmp_path, tool_server, llm_server):
    """A recorded step the layer 3 analyzer corrected from PARIS to PAR."""
    db, doc = record_paris_corrected(tmp_path, tool_server, llm_server)
    assert [a["rule"] for a in doc["steps"][0]["attempts"]] == ["analyzer.accept", "success.2xx"]
    return db, doc


# ---------------------------------------------------------------- unchanged replays


def test_unchanged_replay_reproduces_the_original_decisions(tmp_path, tool_server):
    db, doc = record_busy(tmp_path, tool_server)
    replay = replay_json(db, doc["execution_id"], "step-1")
    assert replay["changed"] is False
    assert decisions(replay["replay"]) == decisions(replay["original"])
    assert decisions(replay["original"]) == decisions(doc["steps"][0])
    assert [d["source"] for d in replay["replay"]["dispatches"]] == ["recorded"] * 3
    assert replay["summary"] == {
        "original": "stop_budget by budget.attempts after 3 dispatches",
        "replay": "stop_budget by budget.attempts after 3 dispatches",
        "comparison": "outcome unchanged: same decisions",
    }
    assert replay["ran_out"] is False
    assert len(tool_server.received()) == 3  # the replay never reached the real tool


def test_unchanged_replay_keeps_retry_after_and_backoff_delays(tmp_path, tool_server):
    tool_server.script(
        "/capabilities/quote",
        ToolReply.error(429, "RATE_LIMIT", "slow down", "RATE_LIMIT", headers={"Retry-After": "1"}),
        ToolReply(status=502, body=b"<html>bad gateway</html>"),
        ToolReply.ok({"price": 468.285}),
    )
    db, doc = record(
        tmp_path,
        plan(
            tool_server.base_url,
            {"quote": capability("quote")},
            [step("step-1", "quote", {"symbol": "TSLA"})],
        ),
    )
    replay = replay_json(db, doc["execution_id"], "step-1")
    attempts = replay["replay"]["attempts"]
    assert [(a["action"], a["delay_source"]) for a in attempts] == [
        ("retry_same", "retry_after_header"),
        ("retry_same", "backoff"),
        ("success", None),
    ]
    assert decisions(replay["replay"]) == decisions(doc["steps"][0])
    assert replay["replay"]["response"] == {"success": True, "data": {"price": 468.285}}
    assert replay["changed"] is False


def test_recorded_gzip_response_replays_its_decoded_body(tmp_path, tool_server):
    body = json.dumps({"success": True, "data": {"temp_c": 3}}).encode()
    tool_server.script(
        WEATHER_PATH,
        ToolReply(
            status=200,
            body=gzip.compress(body),
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        ),
    )
    db, doc = record(
        tmp_path,
        plan(
            tool_server.base_url,
            {"weather": capability("weather")},
            [step("step-1", "weather", {"location": "Oslo"})],
        ),
    )
    replay = replay_json(db, doc["execution_id"], "step-1")
    assert replay["changed"] is False
    assert replay["replay"]["response"] == {"success": True, "data": {"temp_c": 3}}
    detail = open_store(db).get_execution(replay["execution_id"])
    attempt = detail.step("step-1").attempts[0]
    assert attempt.response_body == body
    assert attempt.response_headers["content-type"] == "application/json"
    assert "content-encoding" not in attempt.response_headers


def test_recorded_llm_reproduces_paris_to_par_without_a_live_llm(paris_run, llm_server):
    db, doc = paris_run
    asked_before = len(llm_server.requests)
    replay = replay_json(db, doc["execution_id"], "step-1", "--llm", "recorded")
    assert replay["changed"] is False
    attempts = replay["replay"]["attempts"]
    assert [(a["action"], a["rule"], a["layer"]) for a in attempts] == [
        ("retry_corrected", "analyzer.accept", "analyzer"),
        ("success", "success.2xx", None),
    ]
    assert attempts[1]["parameters"] == {"city_code": "PAR", "nights": 2}
    assert "PARIS is not IATA" in attempts[0]["reason"]
    assert replay["llm"] == {
        "mode": "recorded",
        "recorded_answers": 1,
        "answers_served": 1,
        "calls_unanswered": [],
    }
    assert len(llm_server.requests) == asked_before
    detail = open_store(db).get_execution(replay["execution_id"])
    original = open_store(db).get_execution(doc["execution_id"])
    [replayed_call] = detail.step("step-1").attempts[0].llm_calls
    [original_call] = original.step("step-1").attempts[0].llm_calls
    assert replayed_call.response_body == original_call.response_body
    assert replayed_call.raw_text == original_call.raw_text


# ---------------------------------------------------------------- edited responses


def test_edited_200_on_dispatch_2_recovers(busy_run, tmp_path):
    db, doc = busy_run
    ok = write_json(tmp_path, "ok.json", OK_200)
    replay = replay_json(db, doc["execution_id"], "step-1", "--response", f"2={ok}")
    assert replay["changed"] is True
    assert decisions(replay["replay"])[:2] == [
        (503, None, "retry_same", "transient.retry_same", decisions(replay["original"])[0][4]),
        (200, None, "success", "success.2xx", None),
    ]
    assert replay["replay"]["status"] == "succeeded"
    assert replay["replay"]["response"] == OK_200["body"]
    assert [(d["source"], d["response"]) for d in replay["replay"]["dispatches"]] == [
        ("recorded", "HTTP 503"),
        ("edited", "HTTP 200"),
    ]
    assert replay["summary"]["replay"] == "success after 2 dispatches"
    assert replay["edited_dispatches"] == [2]


def test_text_output_compares_side_by_side(busy_run, tmp_path):
    db, doc = busy_run
    ok = write_json(tmp_path, "ok.json", OK_200)
    result = replay_cli(doc["execution_id"], "step-1", "--response", f"2={ok}", "--db", str(db))
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "original: stop_budget by budget.attempts after 3 dispatches" in lines
    assert "replay:   success after 2 dispatches" in lines
    assert "outcome changed" in lines
    row_two = next(line for line in lines if line.startswith("2 "))
    left, right = row_two.split("│")
    assert "503" in left and "transient.retry_same" in left
    assert "200*" in right and "success.2xx" in right
    row_three = next(line for line in lines if line.startswith("3 "))
    assert "budget.attempts" in row_three and row_three.rstrip().endswith("│")


@pytest.mark.parametrize("llm_mode", ["recorded", "off"], ids=["llm_recorded", "llm_off"])
def test_422_instead_of_503_stops_without_correction_when_no_llm(busy_run, tmp_path, llm_mode):
    db, doc = busy_run
    invalid = write_json(tmp_path, "422.json", INVALID_422)
    replay = replay_json(
        db, doc["execution_id"], "step-1", "--response", f"1={invalid}", "--llm", llm_mode
    )
    assert decisions(replay["replay"]) == [
        (422, None, "stop_no_correction", "no_correction.stop", None)
    ]
    assert replay["replay"]["dispatch_count"] == 1
    assert replay["changed"] is True
    assert (
        replay["summary"]["replay"] == "stop_no_correction by no_correction.stop after 1 dispatch"
    )


def test_422_with_recorded_llm_but_no_recorded_answer_flags_it(tmp_path, tool_server, llm_server):
    tool_server.script(WEATHER_PATH, ToolReply.error(503, "BUSY", "try later"))
    db, doc = record(
        tmp_path,
        plan(
            tool_server.base_url,
            {"weather": capability("weather")},
            [step("step-1", "weather", {"location": "Flower Mound"})],
            llm_base_url=llm_server.base_url,
        ),
    )
    invalid = write_json(tmp_path, "422.json", INVALID_422)
    replay = replay_json(db, doc["execution_id"], "step-1", "--response", f"1={invalid}")
    [attempt] = replay["replay"]["attempts"]
    assert (attempt["status"], attempt["action"]) == (422, "stop_no_correction")
    assert attempt["rule"] == "analyzer.unavailable"
    assert "unavailable (HTTP 404 ×1; not retried: HTTP 404 is not transient)" in attempt["reason"]
    assert replay["llm"]["calls_unanswered"] == [1]
    assert any("LLM call 1 had no recorded answer" in note for note in replay["notes"])
    assert llm_server.requests == []


def test_drop_replays_as_a_transport_failure(busy_run, tmp_path):
    db, doc = busy_run
    drop = write_json(tmp_path, "drop.json", "drop")
    replay = replay_json(db, doc["execution_id"], "step-1", "--response", f"2={drop}")
    assert [
        (a["status"], a["transport_error"], a["action"]) for a in replay["replay"]["attempts"]
    ] == [(503, None, "retry_same"), (0, "reset", "retry_same"), (503, None, "stop_budget")]
    assert replay["changed"] is True


def test_timeout_keyword_replays_as_a_client_timeout(busy_run, tmp_path):
    db, doc = busy_run
    timeout = write_json(tmp_path, "timeout.json", "timeout")
    replay = replay_json(db, doc["execution_id"], "step-1", "--response", f"3={timeout}")
    last = replay["replay"]["attempts"][-1]
    assert (last["status"], last["transport_error"], last["rule"]) == (
        0,
        "timeout",
        "budget.attempts",
    )


def test_recorded_transport_failure_replays_the_same_failure(tmp_path, tool_server):
    tool_server.script(WEATHER_PATH, ToolReply(drop=True), ToolReply.ok({"temp_c": 3}))
    db, doc = record(
        tmp_path,
        plan(
            tool_server.base_url,
            {"weather": capability("weather")},
            [step("step-1", "weather", {"location": "Oslo"})],
        ),
    )
    replay = replay_json(db, doc["execution_id"], "step-1")
    assert [(a["status"], a["transport_error"]) for a in replay["replay"]["attempts"]] == [
        (0, "reset"),
        (200, None),
    ]
    assert replay["changed"] is False


EDITED_STATUSES = [
    ("informational_103_is_unrouted", 103, "stop_terminal", "default.unrouted", b"as-is"),
    ("no_content_204_is_a_result_parsing_failure", 204, "stop_terminal",
     "result.not_json_object", b""),
    ("redirect_302_is_not_followed", 302, "stop_terminal", "default.unrouted", b"as-is"),
    ("unassigned_599_is_transient", 599, "retry_same", "transient.retry_same", b"as-is"),
]


@pytest.mark.parametrize(
    ("status", "action", "rule", "stored_body"),
    [c[1:] for c in EDITED_STATUSES],
    ids=[c[0] for c in EDITED_STATUSES],
)
def test_edited_status_reaches_the_policy(busy_run, tmp_path, status, action, rule, stored_body):
    db, doc = busy_run
    edited = write_json(tmp_path, "edit.json", {"status": status, "body": "as-is"})
    replay = replay_json(db, doc["execution_id"], "step-1", "--response", f"1={edited}")
    first = replay["replay"]["attempts"][0]
    assert (first["status"], first["action"], first["rule"]) == (status, action, rule)
    detail = open_store(db).get_execution(replay["execution_id"])
    assert detail.step("step-1").attempts[0].response_body == stored_body


def test_edited_retry_after_header_sets_the_delay(busy_run, tmp_path):
    db, doc = busy_run
    limited = write_json(
        tmp_path,
        "429.json",
        {"status": 429, "headers": {"Retry-After": "0.003"}, "body": {"success": False}},
    )
    replay = replay_json(db, doc["execution_id"], "step-1", "--response", f"1={limited}")
    first = replay["replay"]["attempts"][0]
    assert (first["status"], first["delay_ms"], first["delay_source"]) == (
        429,
        3.0,
        "retry_after_header",
    )


# ---------------------------------------------------------------- going past the recording


def test_more_attempts_than_recorded_stop_at_the_unscripted_dispatch(busy_run):
    db, doc = busy_run
    result = replay_cli(
        doc["execution_id"], "step-1", "--config", "max_attempts=5", "--json", "--db", str(db)
    )
    assert result.code == 0, result.stderr
    replay = result.json()
    assert replay["config"]["max_attempts"] == 5
    assert [d["source"] for d in replay["replay"]["dispatches"]] == [
        "recorded",
        "recorded",
        "recorded",
        "unscripted",
    ]
    assert replay["replay"]["incomplete"] is True
    assert replay["replay"]["final_action"] == "stop_cancelled"
    assert any(
        "no recorded response for dispatch 4; pass --response 4=FILE" in note
        for note in replay["notes"]
    )
    assert replay["summary"]["replay"].endswith("(no recorded response for dispatch 4)")
    assert replay["ran_out"] is True
    assert replay["summary"]["comparison"] == (
        "ran out of scripted responses: dispatch 4 has no recorded or edited response, so the "
        "replay stopped there (give one with --response 4=FILE)"
    )


def test_text_output_of_a_replay_that_ran_out_says_so_not_outcome_changed(busy_run):
    db, doc = busy_run
    result = replay_cli(
        doc["execution_id"], "step-1", "--config", "max_attempts=5", "--db", str(db)
    )
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "outcome changed" not in lines
    assert any(line.startswith("ran out of scripted responses: dispatch 4 ") for line in lines)


def test_responses_list_answers_dispatches_past_the_recording(busy_run, tmp_path):
    db, doc = busy_run
    listed = write_json(tmp_path, "list.json", [None, None, None, OK_200])
    replay = replay_json(
        db, doc["execution_id"], "step-1", "--config", "max_attempts=5", "--responses", listed
    )
    assert [a["action"] for a in replay["replay"]["attempts"]] == [
        "retry_same",
        "retry_same",
        "retry_same",
        "success",
    ]
    assert replay["edited_dispatches"] == [4]
    assert replay["summary"]["replay"] == "success after 4 dispatches"


def test_unused_edit_is_reported(paris_run, tmp_path):
    db, doc = paris_run
    ok = write_json(tmp_path, "ok.json", OK_200)
    replay = replay_json(db, doc["execution_id"], "step-1", "--response", f"5={ok}")
    assert replay["changed"] is False
    note = "edited response for dispatch 5 not used: the replay made 2 dispatches"
    assert note in replay["notes"]


def test_cancel_stops_the_replay_at_once(busy_run):
    db, doc = busy_run
    detail = open_store(db).get_execution(doc["execution_id"])
    replayer = Replayer(prepare_replay(detail, "step-1"))
    replayer.cancel()
    result = asyncio.run(replayer.run())
    assert result.cancelled_by_user is True
    assert result.outcome.status == "cancelled"
    assert result.dispatches == ()


# ---------------------------------------------------------------- LLM modes


def test_llm_off_removes_the_correction(paris_run):
    db, doc = paris_run
    replay = replay_json(db, doc["execution_id"], "step-1", "--llm", "off")
    assert decisions(replay["replay"]) == [
        (400, None, "stop_no_correction", "no_correction.stop", None)
    ]
    assert replay["changed"] is True


def test_recorded_llm_runs_out_when_the_replay_asks_twice(paris_run, tmp_path, llm_server):
    db, doc = paris_run
    again = write_json(
        tmp_path,
        "400.json",
        {
            "status": 400,
            "body": {
                "success": False,
                "error": {
                    "code": "INVALID_CITY",
                    "message": "INVALID CITY CODE: PAR",
                    "category": "INPUT_ERROR",
                },
            },
        },
    )
    asked_before = len(llm_server.requests)
    replay = replay_json(db, doc["execution_id"], "step-1", "--response", f"2={again}")
    assert [(a["status"], a["action"]) for a in replay["replay"]["attempts"]] == [
        (400, "retry_corrected"),
        (400, "stop_no_correction"),
    ]
    assert replay["llm"]["calls_unanswered"] == [2]
    assert replay["ran_out"] is True
    assert replay["summary"]["comparison"].startswith(
        "ran out of recorded LLM answers: LLM call 2 had none"
    )
    assert len(llm_server.requests) == asked_before


def test_llm_live_asks_the_plans_endpoint(paris_run, llm_server):
    db, doc = paris_run
    llm_server.script(analysis(False, reason="cannot fix"))
    replay = replay_json(db, doc["execution_id"], "step-1", "--llm", "live")
    assert [a["action"] for a in replay["replay"]["attempts"]] == ["stop_no_correction"]
    assert "INVALID CITY CODE: PARIS" in llm_server.prompts[-1]


# ---------------------------------------------------------------- dependencies and protection


@pytest.fixture
def bound_run(tmp_path, tool_server, llm_server):
    """step-2 binds step-1's city exactly; the analyzer wants to change it and is refused."""
    tool_server.script("/capabilities/lookup", ToolReply.ok({"city": "PARIS"}))
    tool_server.script(
        HOTELS_PATH, ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE", "INPUT_ERROR")
    )
    llm_server.script(analysis(True, {"city_code": "PAR"}))
    db, doc = record(
        tmp_path,
        plan(
            tool_server.base_url,
            {"lookup": capability("lookup"), "search_hotels": capability("search_hotels")},
            [
                step("step-1", "lookup", {"q": "paris"}),
                step("step-2", "search_hotels", {"city_code": "{{step-1.data.city}}", "nights": 2}),
            ],
            llm_base_url=llm_server.base_url,
            query="Hotels in the looked-up city",
        ),
    )
    assert doc["steps"][1]["attempts"][0]["rule"] == "analyzer.protected"
    return db, doc


def test_dependency_results_and_exact_bound_protection_are_kept(bound_run):
    db, doc = bound_run
    replay = replay_json(db, doc["execution_id"], "step-2")
    assert replay["changed"] is False
    [attempt] = replay["replay"]["attempts"]
    assert (attempt["action"], attempt["rule"]) == ("stop_protected", "analyzer.protected")
    assert attempt["reason"] == doc["steps"][1]["attempts"][0]["reason"]
    assert attempt["parameters"] == {"city_code": "PARIS", "nights": 2}
    detail = open_store(db).get_execution(replay["execution_id"])
    assert [s.step_id for s in detail.steps] == ["step-1", "step-2"]
    assert detail.step("step-2").protected_keys == {"city_code": "exact_bound"}
    assert detail.step("step-1").status == "succeeded"


def test_a_step_whose_dependency_failed_cannot_be_replayed(tmp_path, tool_server):
    tool_server.script(
        "/capabilities/lookup", ToolReply.error(404, "NONE", "no city", retryable=False)
    )
    db, doc = record(
        tmp_path,
        plan(
            tool_server.base_url,
            {"lookup": capability("lookup"), "hotels": capability("hotels")},
            [
                step("step-1", "lookup", {"q": "x"}),
                step("step-2", "hotels", {"city_code": "{{step-1.data.city}}"}),
            ],
        ),
    )
    result = replay_cli(doc["execution_id"], "step-2", "--db", str(db))
    assert result.code == 2
    assert "step-2 depends on step-1, which did not succeed in the original run (failed)" in (
        result.stderr
    )


# ---------------------------------------------------------------- the store


def test_the_replay_is_recorded_as_a_findable_execution(busy_run, tmp_path):
    db, doc = busy_run
    ok = write_json(tmp_path, "ok.json", OK_200)
    replay = replay_json(db, doc["execution_id"][:15], "step-1", "--response", f"2={ok}")
    assert replay["stored"] is True
    row = open_store(db).get_execution(replay["execution_id"]).execution
    assert row.plan_path == f"replay of {doc['execution_id']} step-1"
    assert row.query == "Weather in Flower Mound"
    assert row.status == "succeeded"
    with duckdb.connect(str(db), read_only=True) as conn:
        found = conn.execute(
            "SELECT execution_id FROM executions WHERE plan_path LIKE 'replay of %'"
        ).fetchall()
    assert found == [(replay["execution_id"],)]


def test_no_store_records_nothing(busy_run):
    db, doc = busy_run
    replay = replay_json(db, doc["execution_id"], "step-1", "--no-store")
    assert replay["stored"] is False
    assert executions_in(db) == 1


# ---------------------------------------------------------------- bad input


BAD_INPUT = [
    ("unknown_execution", lambda ex, f: ["nope", "step-1"], "no execution id starts with 'nope'"),
    ("unknown_step", lambda ex, f: [ex, "step-9"], "has no step 'step-9'"),
    (
        "response_file_missing",
        lambda ex, f: [ex, "step-1", "--response", "1=/no/such.json"],
        "/no/such.json: cannot read",
    ),
    (
        "response_not_json",
        lambda ex, f: [ex, "step-1", "--response", f"1={f['not_json']}"],
        "invalid JSON at line 1",
    ),
    (
        "status_out_of_range",
        lambda ex, f: [ex, "step-1", "--response", f"1={f['status_700']}"],
        "status: expected an integer from 100 to 599, got 700",
    ),
    (
        "headers_not_strings",
        lambda ex, f: [ex, "step-1", "--response", f"1={f['header_int']}"],
        "headers.Retry-After: expected a string, got 2",
    ),
    (
        "n_zero",
        lambda ex, f: [ex, "step-1", "--response", f"0={f['ok']}"],
        "expected N to be a positive integer",
    ),
    (
        "n_not_a_number",
        lambda ex, f: [ex, "step-1", "--response", f"two={f['ok']}"],
        "expected N to be a positive integer",
    ),
    (
        "index_duplicated",
        lambda ex, f: [ex, "step-1", "--response", f"1={f['ok']}", "--response", f"1={f['ok']}"],
        "dispatch 1 is already given by --response 1=",
    ),
    (
        "index_in_list_and_option",
        lambda ex, f: [ex, "step-1", "--responses", f["list"], "--response", f"2={f['ok']}"],
        "dispatch 2 is already given by --responses",
    ),
    (
        "config_value_refused",
        lambda ex, f: [ex, "step-1", "--config", "max_attempts=0"],
        "--config max_attempts=0: expected an integer >= 1, got 0",
    ),
    (
        "config_key_unknown",
        lambda ex, f: [ex, "step-1", "--config", "max_atempts=5"],
        "did you mean 'max_attempts'?",
    ),
]


@pytest.mark.parametrize(
    ("argv", "message"), [(c[1], c[2]) for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT]
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(busy_run, tmp_path, argv, message):
    db, doc = busy_run
    (tmp_path / "not.json").write_text("{status: 422}", encoding="utf-8")
    files = {
        "not_json": str(tmp_path / "not.json"),
        "status_700": write_json(tmp_path, "700.json", {"status": 700}),
        "header_int": write_json(
            tmp_path, "hdr.json", {"status": 429, "headers": {"Retry-After": 2}}
        ),
        "ok": write_json(tmp_path, "ok.json", OK_200),
        "list": write_json(tmp_path, "list.json", [OK_200, OK_200]),
    }
    result = replay_cli(*argv(doc["execution_id"], files), "--db", str(db))
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("truva-console: ")
    assert message in result.stderr
    assert executions_in(db) == 1


def test_missing_plan_snapshot_is_bad_input(busy_run):
    db, doc = busy_run
    with duckdb.connect(str(db)) as conn:
        conn.execute(
            "DELETE FROM execution_snapshots WHERE execution_id = ?", [doc["execution_id"]]
        )
    result = replay_cli(doc["execution_id"], "step-1", "--db", str(db))
    assert result.code == 2
    assert "has no plan snapshot recorded" in result.stderr
    assert executions_in(db) == 1
