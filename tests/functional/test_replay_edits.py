"""`truva-console replay` with edited request parameters, another live LLM endpoint, and the
`↻ replay of …` marker in `ls`.

Each test records a real run (`truva-console run` against scripted loopback tool and LLM
servers, into a DuckDB file in tmp_path) and replays one of its steps through the real CLI.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from store.queries import open_store
from tests.support.demo_store import copy_store
from tests.support.llm_server import ScriptedLLMServer
from tests.support.plans import CliResult, capability, plan, run_cli, step
from tests.support.replay_runs import (
    CITY,
    HOTELS_PATH,
    analysis,
    record,
    record_paris_corrected,
    write_json,
)
from tests.support.tool_server import ScriptedToolServer, ToolReply

OK_200 = {"status": 200, "body": {"success": True, "data": {"hotels": ["Le Meurice"]}}}


def replay_cli(db: Path, *argv: str) -> CliResult:
    return run_cli("replay", *argv, "--db", str(db))


def replay_json(db: Path, *argv: str) -> dict[str, Any]:
    result = replay_cli(db, *argv, "--json")
    assert result.code == 0, result.stderr
    return result.json()


def executions_in(db: Path) -> int:
    return open_store(db).list_executions().total


def sent_bodies(db: Path, execution_id: str, step_id: str) -> list[dict[str, Any]]:
    """The request bodies the replay's executor put on the wire, as stored."""
    attempts = open_store(db).get_execution(execution_id).step(step_id).attempts
    return [json.loads(a.request_body) for a in attempts if a.dispatched]


@pytest.fixture(scope="module")
def paris_stopped_recording(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """A recorded step that sent city_code PARIS, got 400 INVALID_CITY, and (no LLM) stopped;
    recorded once per module. Its tool server is gone: a replay reaching it would not connect."""
    with ScriptedToolServer() as tool_server:
        tool_server.script(
            HOTELS_PATH,
            ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE: PARIS", "INPUT_ERROR"),
        )
        document = plan(
            tool_server.base_url,
            {"search_hotels": capability("search_hotels", schema=CITY)},
            [step("step-1", "search_hotels", {"city_code": "PARIS", "nights": 2})],
            query="Find hotels in Paris",
        )
        db, doc = record(tmp_path_factory.mktemp("paris-stopped"), document)
    assert doc["steps"][0]["status"] == "failed"
    return db, doc


@pytest.fixture
def paris_stopped(paris_stopped_recording, tmp_path):
    """A copy of the module's PARIS recording at this test's store path, and its run document."""
    db, doc = paris_stopped_recording
    return copy_store(db, tmp_path / "store" / "debug.duckdb"), copy.deepcopy(doc)


# ---------------------------------------------------------------- edited parameters


def test_param_option_sends_the_edited_value_and_the_outcome_changes(tmp_path, paris_stopped):
    db, doc = paris_stopped
    ok = write_json(tmp_path, "ok.json", OK_200)
    replay = replay_json(db, doc["execution_id"], "step-1", "--param", "city_code=PAR",
                         "--response", f"1={ok}")  # fmt: skip
    assert replay["edited_parameters"] == {"city_code": "PAR"}
    [attempt] = replay["replay"]["attempts"]
    assert (attempt["action"], attempt["rule"]) == ("success", "success.2xx")
    assert attempt["parameters"] == {"city_code": "PAR", "nights": 2}
    assert replay["changed"] is True
    # What the executor sent over HTTP to the replay server, as recorded.
    assert sent_bodies(db, replay["execution_id"], "step-1") == [{"city_code": "PAR", "nights": 2}]


def test_param_option_alone_replays_the_recorded_response_to_the_edited_request(paris_stopped):
    db, doc = paris_stopped
    replay = replay_json(db, doc["execution_id"], "step-1", "--param", "nights=5")
    [attempt] = replay["replay"]["attempts"]
    assert attempt["parameters"] == {"city_code": "PARIS", "nights": 5}
    assert attempt["status"] == 400
    served = replay["replay"]["dispatches"]
    assert served == [{"n": 1, "source": "recorded", "response": "HTTP 400"}]
    assert replay["changed"] is True  # the parameters differ, so the attempt does


def test_params_file_edits_several_keys(tmp_path, paris_stopped):
    db, doc = paris_stopped
    params = write_json(tmp_path, "params.json", {"city_code": "PAR", "nights": 3})
    replay = replay_json(db, doc["execution_id"], "step-1", "--params", params)
    assert replay["replay"]["attempts"][0]["parameters"] == {"city_code": "PAR", "nights": 3}
    assert sent_bodies(db, replay["execution_id"], "step-1") == [{"city_code": "PAR", "nights": 3}]


def test_param_edit_is_shown_in_the_text_report(paris_stopped):
    db, doc = paris_stopped
    result = replay_cli(db, doc["execution_id"], "step-1", "--param", "city_code=PAR")
    assert result.code == 0, result.stderr
    assert 'edited parameters: city_code="PAR"' in result.stdout.splitlines()


BAD_PARAMS = [
    ("unknown_key_names_the_schema", ["--param", "citycode=PAR"],
     'truva-console: parameter "citycode": step-1 (demo.search_hotels) has no such parameter '
     "(its schema names: city_code, nights)"),
    ("no_equals_sign", ["--param", "city_code"],
     "truva-console: --param city_code: expected KEY=VALUE, e.g. city_code=PAR"),
    ("empty_key", ["--param", "=PAR"],
     "truva-console: --param =PAR: expected KEY=VALUE, e.g. city_code=PAR"),
    ("key_given_twice", ["--param", "nights=1", "--param", "nights=2"],
     'truva-console: --param nights=2: "nights" is already given by --param nights=1'),
    ("binding_to_a_step_not_in_the_plan", ["--param", "city_code={{step-9.data.city}}"],
     "truva-console: parameter city_code: binds \"{{step-9.data.city}}\", but step-9 is not a "
     "step in this plan"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "options", "line"), BAD_PARAMS, ids=[c[0] for c in BAD_PARAMS])
def test_bad_parameter_edit_is_one_line_exit_2_and_nothing_written(
    name, options, line, paris_stopped
):
    db, doc = paris_stopped
    before = executions_in(db)
    result = replay_cli(db, doc["execution_id"], "step-1", *options)
    assert result.code == 2
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""
    assert executions_in(db) == before


BAD_PARAMS_FILES = [
    ("not_an_object", "[1, 2]", "expected an object of parameter → value, got an array"),
    ("not_json", "{city_code: PAR}", "invalid JSON at line 1, column 2"),
    ("duplicate_key", '{"nights": 1, "nights": 2}', 'duplicate key "nights"'),
]


@pytest.mark.parametrize(
    ("name", "text", "problem"), BAD_PARAMS_FILES, ids=[c[0] for c in BAD_PARAMS_FILES]
)
def test_bad_params_file_is_one_line_naming_the_file(name, text, problem, tmp_path, paris_stopped):
    db, doc = paris_stopped
    path = tmp_path / "params.json"
    path.write_text(text, encoding="utf-8")
    result = replay_cli(db, doc["execution_id"], "step-1", "--params", str(path))
    assert result.code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"truva-console: {path}: {problem}")


# ---------------------------------------------------------------- another live LLM endpoint


@pytest.fixture
def paris_corrected(tmp_path, tool_server, llm_server):
    """A step the layer 3 analyzer corrected from PARIS to PAR, recorded with `llm_server`."""
    return record_paris_corrected(tmp_path, tool_server, llm_server)


def test_llm_live_can_ask_another_endpoint_and_model(paris_corrected, llm_server):
    db, doc = paris_corrected
    asked_before = len(llm_server.requests)
    with ScriptedLLMServer() as other:
        other.script(analysis(False, reason="the other model cannot fix it"))
        replay = replay_json(
            db, doc["execution_id"], "step-1", "--llm", "live",
            "--llm-base-url", other.base_url, "--llm-model", "other-model",
        )  # fmt: skip
        requests, prompts = other.requests, other.prompts
    assert "INVALID CITY CODE: PARIS" in prompts[0]
    assert {request.json["model"] for request in requests} == {"other-model"}
    assert len(llm_server.requests) == asked_before  # the recorded endpoint was not asked
    [attempt] = replay["replay"]["attempts"]
    assert attempt["action"] == "stop_no_correction"
    assert replay["llm"]["base_url"] == other.base_url
    assert replay["llm"]["model"] == "other-model"
    detail = open_store(db).get_execution(replay["execution_id"])
    assert detail.llm["base_url"] == other.base_url


def test_llm_live_endpoint_is_named_in_the_text_report(paris_corrected):
    db, doc = paris_corrected
    with ScriptedLLMServer() as other:
        other.script(analysis(False))
        result = replay_cli(db, doc["execution_id"], "step-1", "--llm", "live",
                            "--llm-base-url", other.base_url, "--llm-model", "m2")  # fmt: skip
    assert result.code == 0, result.stderr
    assert f"LLM: live ({other.base_url}, model m2)" in result.stdout.splitlines()


BAD_ENDPOINTS = [
    ("base_url_without_live", ["--llm-base-url", "http://127.0.0.1:9/v1"],
     "truva-console: --llm-base-url: only with --llm live (the LLM mode is recorded)"),
    ("model_with_llm_off", ["--llm", "off", "--llm-model", "m"],
     "truva-console: --llm-model: only with --llm live (the LLM mode is off)"),
    ("base_url_not_http", ["--llm", "live", "--llm-base-url", "ftp://127.0.0.1/v1"],
     "truva-console: --llm-base-url 'ftp://127.0.0.1/v1': "),
    ("empty_model", ["--llm", "live", "--llm-model", ""],
     "truva-console: --llm-model '': "),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "options", "start"), BAD_ENDPOINTS, ids=[c[0] for c in BAD_ENDPOINTS]
)
def test_bad_llm_endpoint_is_one_line_exit_2(name, options, start, paris_corrected, llm_server):
    db, doc = paris_corrected
    before, asked_before = executions_in(db), len(llm_server.requests)
    result = replay_cli(db, doc["execution_id"], "step-1", *options)
    assert result.code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(start)
    assert executions_in(db) == before
    assert len(llm_server.requests) == asked_before


# ---------------------------------------------------------------- the ls marker


def test_ls_marks_a_replay_execution(paris_stopped):
    db, doc = paris_stopped
    replay = replay_json(db, doc["execution_id"], "step-1", "--param", "city_code=PAR")
    listing = run_cli("ls", "--db", str(db))
    assert listing.code == 0, listing.stderr
    [replay_line] = [line for line in listing.stdout.splitlines()
                     if line.startswith(replay["execution_id"])]  # fmt: skip
    assert f"↻ replay of {doc['execution_id']} step-1  Find hotels in Paris" in replay_line
    [original_line] = [line for line in listing.stdout.splitlines()
                       if line.startswith(doc["execution_id"])]  # fmt: skip
    assert "↻" not in original_line


@pytest.fixture
def replayed(paris_stopped):
    """The recorded run and its replay (made outside the test's event loop)."""
    db, doc = paris_stopped
    return db, doc, replay_json(db, doc["execution_id"], "step-1", "--param", "city_code=PAR")


async def test_the_tui_list_marks_a_replay_execution_as_ls_does(replayed):
    from console.tui.widgets.tables import ExecutionTable
    from tests.support.tui import screen_loaded, tui_app

    db, doc, replay = replayed
    app = tui_app(db, db_arg=str(db), live_refresh=False)
    async with app.run_test(size=(220, 36)) as pilot:
        await screen_loaded(pilot)
        query = app.screen.query_one(ExecutionTable).get_cell(replay["execution_id"], "query")
    assert query.plain == f"↻ replay of {doc['execution_id']} step-1  Find hotels in Paris"


# ---------------------------------------------------------------- the first divergence


@pytest.fixture
def busy_run(tmp_path, tool_server):
    """A recorded step that got 503 three times and stopped on the attempts budget."""
    tool_server.script("/capabilities/weather",
                       ToolReply.error(503, "BUSY", "try later", "SERVICE_ERROR"))  # fmt: skip
    db, doc = record(tmp_path, plan(
        tool_server.base_url, {"weather": capability("weather")},
        [step("step-1", "weather", {"location": "Flower Mound"})], query="Weather",
    ))  # fmt: skip
    assert [a["rule"] for a in doc["steps"][0]["attempts"]] == [
        "transient.retry_same", "transient.retry_same", "budget.attempts",
    ]  # fmt: skip
    return db, doc


def test_first_divergence_names_the_attempt_and_each_field_that_differs(tmp_path, busy_run):
    db, doc = busy_run
    ok = write_json(tmp_path, "ok.json", {"status": 200, "body": {"success": True, "data": {}}})
    replay = replay_json(db, doc["execution_id"], "step-1", "--response", f"2={ok}")
    original_delay = doc["steps"][0]["attempts"][1]["delay_ms"]
    assert replay["first_divergence"] == {
        "attempt": 2,
        "missing": None,
        "fields": {
            "status": {"original": 503, "replay": 200},
            "action": {"original": "retry_same", "replay": "success"},
            "rule": {"original": "transient.retry_same", "replay": "success.2xx"},
            "delay_ms": {"original": round(original_delay, 3), "replay": None},
        },
    }


def test_first_divergence_of_a_parameter_edit_is_the_parameters(paris_stopped):
    db, doc = paris_stopped
    replay = replay_json(db, doc["execution_id"], "step-1", "--param", "nights=5")
    assert replay["first_divergence"] == {
        "attempt": 1,
        "missing": None,
        "fields": {"parameters": {"original": {"city_code": "PARIS", "nights": 2},
                                  "replay": {"city_code": "PARIS", "nights": 5}}},
    }  # fmt: skip


def test_an_unchanged_replay_has_no_divergence(busy_run):
    db, doc = busy_run
    replay = replay_json(db, doc["execution_id"], "step-1")
    assert replay["first_divergence"] is None
    text = replay_cli(db, doc["execution_id"], "step-1")
    assert not any(line.startswith("first divergence") for line in text.stdout.splitlines())


def test_text_report_says_where_the_replay_first_diverged(tmp_path, busy_run):
    db, doc = busy_run
    ok = write_json(tmp_path, "ok.json", {"status": 200, "body": {"success": True, "data": {}}})
    result = replay_cli(db, doc["execution_id"], "step-1", "--response", f"2={ok}")
    assert result.code == 0, result.stderr
    [line] = [line for line in result.stdout.splitlines() if line.startswith("first divergence")]
    assert line.startswith(
        "first divergence: attempt 2: status 503 → 200, action retry_same → success, "
        "rule transient.retry_same → success.2xx, delay_ms "
    )
    assert line.endswith(" → -")


def test_param_outside_the_schema_enum_is_rejected_by_the_guard_before_any_request(tmp_path):
    from console.samples import prepare_sample_store, sample_execution_ids

    db = prepare_sample_store(tmp_path / "samples.duckdb")
    misclassified = sample_execution_ids()["scenario-d-misclassified-503"]
    replay = replay_json(db, misclassified, "step-1", "--param", "units=kelvin")
    [attempt] = replay["replay"]["attempts"]
    assert attempt["dispatched"] is False
    assert attempt["action"] == "reject_predispatch"
    assert attempt["rule"].startswith("guard.")
    assert "kelvin" in attempt["reason"]
    assert replay["replay"]["dispatches"] == []
