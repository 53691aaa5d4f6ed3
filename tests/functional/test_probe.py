"""`truva-console probe` against loopback tools that validate what they receive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from console.entry import main
from console.probe import NOT_JSON_BODY, derive_cases
from tests.support.plans import capability, plan, step, write_plan
from tests.support.tool_server import (
    LoopbackHTTPServer,
    ReceivedRequest,
    ScriptedToolServer,
    ToolReply,
)

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"},
                   "units": {"type": "string", "enum": ["metric", "imperial"]}},
    "required": ["city"],
}  # fmt: skip
NAMES = [
    "missing required key `city`",
    "wrong type for `city` (number instead of string)",
    "empty body",
    "body that is not JSON",
    'unknown enum value for `units` ("probe-not-in-enum" is not one of "metric", "imperial")',
]


class ValidatingTool(LoopbackHTTPServer):
    """A tool that checks each body against SCHEMA and answers a bad one with `bad(problem)`."""

    def __init__(self, bad: Callable[[str], ToolReply]) -> None:
        self.bad = bad
        super().__init__()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[ReceivedRequest]:
        with self._lock:
            return list(self._requests)

    @staticmethod
    def problem(request: ReceivedRequest) -> str | None:
        if not request.body:
            return "empty request body"
        if not isinstance(request.json, dict):
            return "request body is not JSON"
        if "city" not in request.json:
            return "required field missing: city"
        if not isinstance(request.json["city"], str):
            return "city must be a string"
        if request.json.get("units", "metric") not in ("metric", "imperial"):
            return "units must be metric or imperial"
        return None

    def _handle(self, handler: BaseHTTPRequestHandler, request: ReceivedRequest, n: int) -> None:
        problem = self.problem(request)
        reply = self.bad(problem) if problem else ToolReply.ok({"temperature": 21})
        body, content_type = reply.encoded()
        self._send(handler, reply.status, body, content_type, reply.headers)


def answers_503(problem: str) -> ToolReply:
    return ToolReply.error(503, "BAD_INPUT", problem, category="SERVICE_ERROR")


def answers_400(problem: str) -> ToolReply:
    return ToolReply.error(400, "BAD_INPUT", problem, category="INPUT_ERROR", retryable=False,
                           details={"hint": "send a JSON object with a string city"})


def _plan(tmp_path: Path, base_url: str, **capability_options: Any) -> Path:
    document = plan(base_url, {"lookup": capability("lookup", schema=SCHEMA,
                                                    **capability_options)},
                    [step("step-1", "lookup", {"city": "Tokio"})])  # fmt: skip
    document["tools"]["demo"]["headers"] = {"X-Api-Key": "plan-key"}
    return write_plan(tmp_path, document)


def _probe(capsys, *argv: str) -> tuple[int, dict, str]:
    code = main(["probe", "--json", *argv])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else {}, captured.err


def _card_check(report: dict, check: str) -> dict:
    return next(item for item in report["card"]["checks"] if item["check"] == check)


def test_a_tool_answering_503_for_a_missing_field_fails_the_input_error_check(tmp_path, capsys):
    with ValidatingTool(answers_503) as tool:
        code, report, _ = _probe(capsys, "--db", str(tmp_path / "s.duckdb"),
                                 str(_plan(tmp_path, tool.base_url)), "--step", "step-1")
    assert code == 1
    missing = report["requests"][0]
    assert missing["name"] == "missing required key `city`" and missing["http_status"] == 503
    findings = {f["check"]: f for f in missing["findings"]}
    assert findings["input_error_status"]["grade"] == "fail"
    assert "required field missing: city" in findings["input_error_status"]["message"]
    assert findings["probe_rejected"]["grade"] == "fail"
    assert "Scenario D" in findings["probe_rejected"]["message"]
    # The recorded decision is the policy's on a one-attempt run: the 503 stops on the budget.
    assert (missing["action"], missing["rule_id"]) == ("stop_budget", "budget.attempts")
    assert _card_check(report, "input_error_status")["grade"] == "fail"
    assert report["card"]["grade"] == "fail"


def test_a_tool_answering_400_with_retryable_false_and_a_hint_passes(tmp_path, capsys):
    with ValidatingTool(answers_400) as tool:
        code, report, _ = _probe(capsys, "--db", str(tmp_path / "s.duckdb"),
                                 str(_plan(tmp_path, tool.base_url)), "--step", "step-1")
        received = tool.requests()
    assert code == 0
    assert [r["name"] for r in report["requests"]] == NAMES
    assert report["skipped"] == []
    assert report["card"]["grade"] == "pass"
    assert {r["http_status"] for r in report["requests"]} == {400}
    assert all(r["rule_id"] == "refused.explicit_false" for r in report["requests"])
    assert _card_check(report, "probe_malformed_retryable")["counts"] == {
        "pass": 2, "warn": 0, "fail": 0}
    # The bytes on the wire are the ones each request is named for, with the plan's headers.
    assert [r.body for r in received] == [
        b'{}', b'{"city":12345}', b"", NOT_JSON_BODY,
        b'{"city":"Tokio","units":"probe-not-in-enum"}']
    assert all(r.headers["x-api-key"] == "plan-key" for r in received)
    assert all(r.headers["content-type"] == "application/json" for r in received)


def test_the_text_card_names_each_request_and_its_grade(tmp_path, capsys):
    with ValidatingTool(answers_503) as tool:
        code = main(["probe", "--db", str(tmp_path / "s.duckdb"),
                     str(_plan(tmp_path, tool.base_url)), "--step", "step-1"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL  missing required key `city` → HTTP 503 → stop_budget [budget.attempts]" in out
    assert "demo: FAIL — 5 responses (lookup)" in out
    assert "FAIL  a bad request gets a 4xx input error (400/422), not 2xx or 5xx  (5 fail)" in out


def test_a_tool_that_accepts_a_bad_request_fails_the_probe_check(tmp_path, capsys):
    with ScriptedToolServer() as tool:
        tool.script("/capabilities/lookup", ToolReply.ok({"temperature": 21}))
        code, report, _ = _probe(capsys, "--no-store", str(_plan(tmp_path, tool.base_url)),
                                 "--step", "step-1")
    assert code == 1 and report["execution_id"] is None
    rejected = _card_check(report, "probe_rejected")
    assert rejected["counts"]["fail"] == 5
    assert "the tool accepted it" in rejected["example"]["message"]


def test_retryable_true_for_a_body_that_is_not_json_warns(tmp_path, capsys):
    def answer(problem: str) -> ToolReply:
        return ToolReply.error(400, "BAD_INPUT", problem, category="INPUT_ERROR",
                               retryable=True, details={"hint": "send JSON"})

    with ValidatingTool(answer) as tool:
        code, report, _ = _probe(capsys, "--no-store", str(_plan(tmp_path, tool.base_url)),
                                 "--step", "step-1")
    assert code == 0
    malformed = _card_check(report, "probe_malformed_retryable")
    assert malformed["grade"] == "warn" and malformed["counts"]["warn"] == 2
    assert malformed["example"]["step_id"] == "probe-3-empty-body"


@pytest.mark.parametrize(
    ("schema", "parameters", "kinds", "skipped"),
    [
        (None, {}, ["empty_body", "not_json"],
         {"missing_required": "the capability has no schema",
          "wrong_type": "the capability has no schema",
          "unknown_enum": "the capability has no schema"}),
        ({"type": "object", "properties": {"q": {"type": "string"}}}, {},
         ["wrong_type", "empty_body", "not_json"],
         {"missing_required": "the schema lists no required key",
          "unknown_enum": "no property has an enum"}),
        ({"type": "object", "properties": {"q": {}}, "required": ["q"]}, {},
         ["missing_required", "empty_body", "not_json"],
         {"wrong_type": "no property declares a type", "unknown_enum": "no property has an enum"}),
        ({"type": "object", "properties": {"n": {"enum": [1, "a"]}}, "required": ["n"]}, {},
         ["missing_required", "empty_body", "not_json"],
         {"wrong_type": "no property declares a type",
          "unknown_enum": "no enum lists only strings or only numbers"}),
    ],
    ids=["no-schema", "no-required-no-enum", "untyped-property", "mixed-enum"],
)
def test_which_requests_a_schema_allows_deriving(schema, parameters, kinds, skipped):
    cases, skips = derive_cases(schema, parameters)
    assert [case.kind for case in cases] == kinds
    assert {skip.kind: skip.reason for skip in skips} == skipped


@pytest.mark.parametrize(
    ("schema", "parameters", "name", "body"),
    [
        ({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
         {"n": 3}, "wrong type for `n` (string instead of integer)", b'{"n":"not-a-number"}'),
        ({"type": "object", "properties": {"n": {"type": ["string", "number"]}}}, {},
         "wrong type for `n` (array instead of string or number)", b'{"n":["probe"]}'),
        ({"type": "object", "properties": {"level": {"enum": [1, 2, 3]}}, "required": ["level"]},
         {}, 'unknown enum value for `level` (4 is not one of 1, 2, 3)', b'{"level":4}'),
        ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}},
          "required": ["a", "b"]}, {"a": "{{step-0.data.a}}"},
         "missing required key `a`", b'{"b":true}'),
    ],
    ids=["integer-gets-a-string", "type-list-gets-an-array", "number-enum-gets-max-plus-one",
         "a-binding-is-replaced-by-an-example"],
)
def test_each_derived_request_breaks_one_thing(schema, parameters, name, body):
    cases, _ = derive_cases(schema, parameters)
    case = next(case for case in cases if case.name == name)
    assert case.body == body


def test_a_capability_with_side_effects_is_refused_without_yes(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    with ValidatingTool(answers_400) as tool:
        plan_file = _plan(tmp_path, tool.base_url, side_effects="unsafe")
        code, _, err = _probe(capsys, "--db", str(db), str(plan_file), "--step", "step-1")
        assert tool.requests() == []
    assert code == 2 and err.count("\n") == 1
    assert "demo.lookup: side_effects is 'unsafe', not 'none'" in err and "--yes" in err
    assert not db.exists()


def test_yes_probes_a_capability_with_side_effects(tmp_path, capsys):
    with ValidatingTool(answers_400) as tool:
        plan_file = _plan(tmp_path, tool.base_url, side_effects="idempotent")
        code, report, _ = _probe(capsys, "--no-store", str(plan_file), "--step", "step-1",
                                 "--yes")
        assert len(tool.requests()) == 5
    assert code == 0 and report["card"]["grade"] == "pass"


def test_url_capability_and_schema_with_headers_and_the_oauth_token(tmp_path, capsys, monkeypatch):
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(SCHEMA))
    monkeypatch.setenv("TRUVAG3_OAUTH_TOKEN", "tok-123")
    with ValidatingTool(answers_400) as tool:
        argv = ["--no-store", "--url", tool.base_url, "--capability", "/capabilities/lookup",
                "--schema", str(schema_file), "--tool", "weather", "--header", "X-Team: qa"]
        code, _, err = _probe(capsys, *argv)
        assert code == 2 and tool.requests() == []
        assert "weather.lookup: side_effects unknown" in err and "--side-effects none" in err
        code, report, _ = _probe(capsys, *argv, "--side-effects", "none")
        received = tool.requests()
    assert code == 0 and report["capability"] == "weather.lookup"
    assert [r["name"] for r in report["requests"]] == NAMES
    assert all(r.path == "/capabilities/lookup" for r in received)
    assert all(r.headers["authorization"] == "Bearer tok-123" for r in received)
    assert all(r.headers["x-team"] == "qa" for r in received)
    assert all(r.headers["x-truvag3-agent-name"] == "weather" for r in received)


def _bad_inputs(tmp_path: Path, base_url: str) -> dict[str, tuple[list[str], str]]:
    bad_plan = tmp_path / "bad.json"
    bad_plan.write_text('{"query": ')
    schema = tmp_path / "schema.json"
    schema.write_text("{not json")
    good = str(_plan(tmp_path, base_url))
    deep_list = tmp_path / "deep-list.json"
    deep_list.write_text("[" * 100_000 + "]" * 100_000)
    deep_schema = tmp_path / "deep-schema.json"  # readable JSON, too deep for the plan checks
    deep_schema.write_text('{"type": "object", "properties": {"a": ' * 400
                           + '{"type": "string"}' + "}}" * 400)
    typo_schema = tmp_path / "typo-schema.json"
    typo_schema.write_text('{"type": "object", "properties": {"a": {"type": "strng"}}}')
    return {
        "schema-type-typo": (["--url", base_url, "--capability", "/x", "--schema",
                              str(typo_schema), "--side-effects", "none"],
                             f"--schema {typo_schema}: properties.a.type: unknown type "
                             '"strng" (did you mean "string"?'),
        "schema-too-deep-to-read": (["--url", base_url, "--capability", "/x", "--schema",
                                     str(deep_list)],
                                    f"--schema {deep_list}: nested too deeply to be a schema"),
        "schema-too-deep-to-check": (["--url", base_url, "--capability", "/x", "--schema",
                                      str(deep_schema), "--side-effects", "none"],
                                     f"--schema {deep_schema}: nested too deeply to be a schema"),
        "bad-plan": ([str(bad_plan), "--step", "step-1"], "bad.json: invalid JSON at line 1"),
        "unknown-step": ([good, "--step", "nope"],
                         "--step nope: not a step of this plan (steps: step-1)"),
        "plan-without-step": ([good], "--step STEP is required with PLAN"),
        "unreachable-url": (["--url", "http://127.0.0.1:9", "--capability", "/x", "--schema",
                             str(tmp_path / "ok.json"), "--side-effects", "none"],
                            "http://127.0.0.1:9/x: cannot connect to 127.0.0.1:9"),
        "schema-not-json": (["--url", base_url, "--capability", "/x", "--schema", str(schema)],
                            f"--schema {schema}: invalid JSON"),
        # found by an outside check: /dev/zero was read until memory ran out, a pipe waited
        "schema-a-device": (["--url", base_url, "--capability", "/x", "--schema", "/dev/zero"],
                            "--schema /dev/zero: cannot read the schema file: not a regular "
                            "file (a device, pipe or socket)"),
        "url-without-schema": (["--url", base_url, "--capability", "/x"],
                               "--url, --capability without --schema"),
        "bad-url": (["--url", "ftp://h", "--capability", "/x", "--schema",
                     str(tmp_path / "ok.json")], "--url: "),
        "bad-path": (["--url", base_url, "--capability", "x", "--schema",
                      str(tmp_path / "ok.json")], "--capability"),
        "nothing": ([], "nothing to probe"),
        "header-with-plan": ([good, "--step", "step-1", "--header", "X: y"],
                             "--header go with --url; with PLAN the tool, its headers"),
    }


BAD_INPUTS = ["schema-type-typo", "schema-too-deep-to-read", "schema-too-deep-to-check",
              "bad-plan", "unknown-step", "plan-without-step", "unreachable-url",
              "schema-not-json", "schema-a-device", "url-without-schema", "bad-url", "bad-path",
              "nothing", "header-with-plan"]


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_is_one_line_exit_2_and_nothing_recorded(tmp_path, capsys, name):
    (tmp_path / "ok.json").write_text(json.dumps(SCHEMA))
    db = tmp_path / "s.duckdb"
    with ValidatingTool(answers_400) as tool:
        argv, expected = _bad_inputs(tmp_path, tool.base_url)[name]
        code = main(["probe", "--db", str(db), *argv])
        assert tool.requests() == []
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and expected in err, err
    assert not db.exists()


def test_a_hanging_tool_times_out_per_request(tmp_path, capsys):
    with ScriptedToolServer() as tool:
        tool.script("/capabilities/lookup", ToolReply.ok(delay_s=60))
        plan_file = str(_plan(tmp_path, tool.base_url))
        code, report, _ = _probe(capsys, "--no-store", "--timeout", "0.2", plan_file,
                                 "--step", "step-1")
        assert main(["probe", "--no-store", "--timeout", "0.1", plan_file,
                     "--step", "step-1"]) == 1
        text = capsys.readouterr().out
    assert code == 1
    assert {r["transport_error"] for r in report["requests"]} == {"timeout"}
    first = report["requests"][0]["findings"]
    assert first == [{"check": "probe_rejected", "grade": "fail",
                      "message": "no answer: no response within 0.2 s"}]
    assert _card_check(report, "probe_rejected")["example"]["http_status"] is None
    assert "FAIL  empty body → no response (timed out)" in text
    assert "#1 (no answer): no answer: no response within 0.1 s" in text


def test_ctrl_c_cancels_a_probe_in_flight(tmp_path):
    with ScriptedToolServer() as tool:
        tool.script("/capabilities/lookup", ToolReply.ok(delay_s=60))
        child = subprocess.Popen(
            [sys.executable, "-m", "console", "probe", "--no-store",
             str(_plan(tmp_path, tool.base_url)), "--step", "step-1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "OTEL_SDK_DISABLED": "true"},
        )
        try:
            assert tool.wait_for_requests(1, timeout_s=60)
            child.send_signal(signal.SIGINT)
            _, err = child.communicate(timeout=60)
        finally:
            child.kill()
    assert child.returncode == 130, err
    assert "cancelled; 0 of 5 probes graded" in err
    assert len(tool.received()) == 1


def test_the_probe_execution_is_in_the_store_and_ls_shows_it(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    with ValidatingTool(answers_503) as tool:
        _, report, _ = _probe(capsys, "--db", str(db), str(_plan(tmp_path, tool.base_url)),
                              "--step", "step-1")
    execution_id = report["execution_id"]
    assert main(["ls", "--db", str(db)]) == 0
    listed = capsys.readouterr().out
    line = next(line for line in listed.splitlines() if line.startswith(execution_id))
    assert "[probe=demo.lookup]" in line and "probe demo.lookup: deliberately bad requests" in line
    assert main(["explain", "--db", str(db), execution_id, "probe-4-not-json"]) == 0
    explained = capsys.readouterr().out
    assert "this is not JSON {" in explained and "HTTP 503" in explained
    assert "stop_budget by rule budget.attempts" in explained
    # lint reads the probe's answers as recorded responses, with the same checks.
    assert main(["lint", "--db", str(db), "--json"]) == 1
    (card,) = json.loads(capsys.readouterr().out)["tools"]
    checks = {item["check"]: item for item in card["checks"]}
    assert card["responses"] == 5
    for check in checks.values():
        assert check["counts"] == _card_check(report, check["check"])["counts"], check
    # The answers to the two unreadable bodies use words lint cannot read as an input error.
    assert checks["input_error_status"]["counts"]["fail"] == 3
    assert checks["input_error_status"]["example"]["execution_id"] == execution_id


def test_whatif_reads_the_probe_decisions_as_one_attempt_runs(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    with ValidatingTool(answers_503) as tool:
        _, report, _ = _probe(capsys, "--db", str(db), str(_plan(tmp_path, tool.base_url)),
                              "--step", "step-1")
    assert main(["whatif", "--db", str(db), "--config", "max_attempts=3", "--json"]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert {change["step_id"] for change in changes} == {r["step_id"] for r in report["requests"]}
    assert {(c["before"]["rule_id"], c["after"]["rule_id"]) for c in changes} == {
        ("budget.attempts", "transient.retry_same")}



@pytest.fixture
def probed_store(tmp_path, capsys) -> tuple[Path, dict]:
    """A store holding one probe of a tool that answers 503, and the probe's --json report."""
    db = tmp_path / "s.duckdb"
    with ValidatingTool(answers_503) as tool:
        code, report, _ = _probe(capsys, "--db", str(db), str(_plan(tmp_path, tool.base_url)),
                                 "--step", "step-1")
    assert code == 1
    return db, report


async def test_the_probe_execution_opens_in_the_tui(probed_store):
    from console.tui.widgets.tables import AttemptTable, StepTable
    from tests.support.tui import open_execution, tui_app

    db, report = probed_store
    app = tui_app(db, db_arg="s.duckdb", live_refresh=False)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_execution(app, pilot, report["execution_id"])
        steps = screen.query_one(StepTable)
        shown = [steps.coordinate_to_cell_key((row, 0)).row_key.value
                 for row in range(steps.row_count)]
        assert shown == [r["step_id"] for r in report["requests"]]
        http = screen.query_one(AttemptTable).get_cell("1", "http")
        assert getattr(http, "plain", str(http)).startswith("503")


def test_the_same_error_body_counts_across_probes_as_in_a_run(tmp_path, capsys):
    with ScriptedToolServer() as tool:
        tool.script("/capabilities/lookup", ToolReply.error(503, "DOWN", "busy"))
        document = plan(tool.base_url, {"lookup": capability("lookup", schema=SCHEMA)},
                        [step("step-1", "lookup", {"city": "Tokio"})],
                        config={"max_repeated_errors": 2})  # fmt: skip
        code, report, _ = _probe(capsys, "--no-store", str(write_plan(tmp_path, document)),
                                 "--step", "step-1")
    assert code == 1
    assert [r["rule_id"] for r in report["requests"]] == [
        "budget.attempts", "budget.repeated_error", "budget.repeated_error",
        "budget.repeated_error", "budget.repeated_error"]


def test_an_answer_that_does_not_decode_is_a_transport_failure_not_a_crash(tmp_path, capsys):
    """A bad request answered with a body its Content-Encoding does not decode: the probe
    grades it as a failed request (as the executor routes it), where it used to raise."""
    def undecodable(problem: str) -> ToolReply:
        return ToolReply(status=400, body=b"this is not gzip",
                         headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})

    with ValidatingTool(undecodable) as tool:
        code, report, err = _probe(capsys, "--db", str(tmp_path / "s.duckdb"),
                                   str(_plan(tmp_path, tool.base_url)), "--step", "step-1")
    assert code in (0, 1), err
    first = report["requests"][0]
    assert (first["http_status"], first["transport_error"]) == (None, "protocol")
    (finding,) = first["findings"]
    assert finding["check"] == "probe_rejected"
    assert "Content-Encoding (gzip) does not decode" in finding["message"]


def test_a_probe_that_never_gets_a_connection_records_nothing_as_sent(tmp_path, capsys):
    """The listener's accept queue holds the start-up check's connection, so every probe after
    it waits for a connection until --timeout: a failed connection, as `run` records one
    (found by review: it was a `timeout`, dispatched once)."""
    import socket

    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(SCHEMA))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        code, report, _ = _probe(capsys, "--no-store", "--url", url, "--capability", "/x",
                                 "--schema", str(schema_file), "--side-effects", "none",
                                 "--timeout", "0.3")  # fmt: skip
    assert code == 1
    assert {r["transport_error"] for r in report["requests"]} == {"connect"}
