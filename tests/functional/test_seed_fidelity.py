"""Seed corners through the real CLI: what the record says is what the wire shows.

Each test runs `truva-console run` against scripted loopback tools (and, where a layer is asked,
the scripted OpenAI-compatible server through the real openai client), then checks the decision
record and the requests the tool server actually received.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.support.plans import capability, plan, run_cli, run_plan_json, step, write_plan
from tests.support.tool_server import ToolReply, stalled_port

NUMBER_SCHEMA = {"type": "object", "properties": {"lat": {"type": "number"},
                                                  "exact": {"type": "boolean"}}}


def attempts(doc: dict[str, Any], step_id: str = "step-1") -> list[dict[str, Any]]:
    return next(s for s in doc["steps"] if s["id"] == step_id)["attempts"]


def rules(doc: dict[str, Any], step_id: str = "step-1") -> list[tuple[str, str]]:
    return [(a["action"], a["rule"]) for a in attempts(doc, step_id)]


def analysis(changes: dict, should_retry: bool = True) -> str:
    return json.dumps({"should_retry": should_retry, "reason": "scripted",
                       "suggested_changes": changes, "is_transient_error": False})


def bad_input() -> ToolReply:
    return ToolReply.error(400, "BAD_INPUT", "lat must be a number", "INPUT_ERROR",
                           retryable=True)


# ------------------------------------------------ 1. a correction is a change on the wire


def test_analyzer_proposal_equal_after_coercion_is_not_resent(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/geo", bad_input(), ToolReply.ok({"never": "sent"}))
    llm_server.script(analysis({"lat": "35.6", "exact": "1"}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"geo": capability("geo", schema=NUMBER_SCHEMA)},
        [step("step-1", "geo", {"lat": "35.6", "exact": True})],
        llm_base_url=llm_server.base_url), "--no-store")
    assert rules(doc) == [("stop_no_correction", "no_correction.stop")]
    assert "layer 3 proposed no change on the wire" in attempts(doc)[0]["reason"]
    assert len(tool_server.received()) == 1
    assert tool_server.received()[0].json == {"exact": True, "lat": 35.6}


def test_resolver_proposal_equal_after_coercion_is_not_resent(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/geo", bad_input(), ToolReply.ok({}))
    llm_server.script(analysis({}, should_retry=False),
                      json.dumps({"should_retry": True, "analysis": "same",
                                  "corrected_parameters": {"lat": "35.60", "exact": True}}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"geo": capability("geo", schema=NUMBER_SCHEMA)},
        [step("step-1", "geo", {"lat": 35.6, "exact": True})],
        llm_base_url=llm_server.base_url), "--no-store")
    assert rules(doc) == [("stop_no_correction", "no_correction.stop")]
    assert "layer 4 proposed no change on the wire" in attempts(doc)[0]["reason"]
    assert len(tool_server.received()) == 1


def test_legacy_proposal_equal_after_coercion_is_not_resent(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/geo", bad_input(), ToolReply.ok({}))
    llm_server.script(json.dumps({"lat": "35.6"}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"geo": capability("geo", schema=NUMBER_SCHEMA)},
        [step("step-1", "geo", {"lat": 35.6})], config={"error_analyzer_enabled": False},
        llm_base_url=llm_server.base_url), "--no-store")
    assert rules(doc) == [("stop_no_correction", "no_correction.stop")]
    assert len(tool_server.received()) == 1


# ------------------------------------------------ 2. validation feedback off


def test_validation_feedback_off_calls_no_layer(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/geo", bad_input())
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"geo": capability("geo")}, [step("step-1", "geo", {"lat": 1})],
        config={"validation_feedback_enabled": False}, llm_base_url=llm_server.base_url),
        "--no-store")
    assert rules(doc) == [("stop_no_correction", "no_correction.stop")]
    assert "validation_feedback_enabled is false" in attempts(doc)[0]["reason"]
    assert llm_server.requests == []


# ------------------------------------------------ 3. Retry-After honoured, not cut short


def test_retry_after_header_beyond_max_delay_is_waited_in_full(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply(status=429, headers={"Retry-After": "1"}),
                       ToolReply.ok({"ok": True}))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {})],
                                       config={"max_delay_ms": 5}), "--no-store")
    first = attempts(doc)[0]
    assert (first["delay_ms"], first["delay_source"]) == (1000.0, "retry_after_header")
    received = tool_server.received()
    assert received[1].received_at - received[0].received_at >= 1.0


def test_retry_after_beyond_retry_after_max_stops_without_resending(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply(status=503, headers={"Retry-After": "120"}),
                       ToolReply.ok({"never": "sent"}))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {})]), "--no-store")
    assert rules(doc) == [("stop_budget", "budget.retry_after_max")]
    assert "asks to wait 120000.0 ms (Retry-After header)" in attempts(doc)[0]["reason"]
    assert len(tool_server.received()) == 1


@pytest.mark.parametrize(
    "reply",
    [
        ToolReply(status=429, headers={"Retry-After": "1" + "0" * 306}),
        ToolReply(status=429, headers={"Retry-After": "9" * 400}),
        ToolReply(status=429, body=b'{"success":false,"error":{"code":"RATE","message":"slow",'
                                   b'"details":{"retry_after":1' + b"0" * 400 + b"}}}"),
    ],
    ids=["header_too_long_for_a_float_in_ms", "header_beyond_float_range",
         "details_number_beyond_float_range"],
)
def test_a_retry_after_too_long_for_a_float_stops_rather_than_resending_early(
    tmp_path, tool_server, reply
):
    # It was read as unreadable, so the computed backoff applied: a resend after 542 ms for a
    # wait of 1e306 s, while one of 1e20 s stopped.
    tool_server.script("/capabilities/x", reply, ToolReply.ok({"never": "sent"}))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {})]), "--no-store")
    assert rules(doc) == [("stop_budget", "budget.retry_after_max")]
    assert "asks to wait 1.798e+308 ms" in attempts(doc)[0]["reason"]
    assert len(tool_server.received()) == 1


@pytest.mark.serial  # a 2 s wall-clock budget must outlast the first answer
def test_retry_after_longer_than_the_wall_clock_left_stops(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply(status=429, headers={"Retry-After": "5"}),
                       ToolReply.ok({"never": "sent"}))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {})],
                                       config={"max_wall_clock_s": 2}), "--no-store")
    assert rules(doc) == [("stop_budget", "budget.wall_clock.wait")]
    assert "the wait of 5000.0 ms (Retry-After header) would outlast" in attempts(doc)[0]["reason"]
    assert len(tool_server.received()) == 1


# ------------------------------------------------ 4. the wall clock ends requests in flight


@pytest.mark.serial  # a bound on wall-clock seconds
def test_wall_clock_budget_ends_a_hung_request(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply.ok({"late": True}, delay_s=20.0))
    started = time.monotonic()
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {})],
                                       config={"max_wall_clock_s": 1.5}), "--no-store")
    assert time.monotonic() - started < 10
    only = attempts(doc)
    assert [(a["action"], a["rule"], a["transport_error"]) for a in only] == [
        ("stop_budget", "budget.wall_clock", "timeout")]
    assert "ended the request in flight" in only[0]["reason"]
    assert doc["steps"][0]["dispatch_count"] == 1


# ------------------------------------------------ 5. explicit null passes the guard


def test_explicit_null_is_sent_as_null(tmp_path, tool_server):
    tool_server.script("/capabilities/geo", ToolReply.ok({"ok": True}))
    schema = {"type": "object", "properties": {"lat": {"type": "number"},
                                               "opts": {"type": "object"}},
              "required": ["lat"]}
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"geo": capability("geo", schema=schema)},
        [step("step-1", "geo", {"lat": None, "opts": None})]), "--no-store")
    assert rules(doc) == [("success", "success.2xx")]
    assert tool_server.received()[0].body == b'{"lat":null,"opts":null}'


# ------------------------------------------------ 6. exact bindings protected at any depth


def test_nested_exact_binding_is_protected(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/quote", ToolReply.ok({"total": 10}))
    tool_server.script("/capabilities/pay", bad_input())
    llm_server.script(analysis({"order": {"total": 99, "note": "fixed"}}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"quote": capability("quote"), "pay": capability("pay")},
        [step("step-1", "quote", {}),
         step("step-2", "pay", {"order": {"total": "{{step-1.data.total}}", "note": "x"}},
              depends_on=["step-1"])],
        llm_base_url=llm_server.base_url), "--no-store")
    assert rules(doc, "step-2") == [("stop_protected", "analyzer.protected")]
    assert "protected input(s): order.total" in attempts(doc, "step-2")[0]["reason"]
    assert len(tool_server.received("/capabilities/pay")) == 1


# ------------------------------------------------ 7. result parsing is a failure class


def test_2xx_body_that_is_not_a_json_object_fails_the_step(tmp_path, tool_server):
    tool_server.script("/capabilities/a", ToolReply(status=200, body="<html>ok</html>"))
    tool_server.script("/capabilities/b", ToolReply.ok({}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"a": capability("a"), "b": capability("b")},
        [step("step-1", "a", {}), step("step-2", "b", {}, depends_on=["step-1"])]), "--no-store")
    assert rules(doc) == [("stop_terminal", "result.not_json_object")]
    assert doc["steps"][0]["status"] == "failed"
    assert doc["steps"][1]["skip_reason"] == "skipped due to failed dependency: step-1"
    assert attempts(doc)[0]["recovery"] == "escalate"
    assert tool_server.received("/capabilities/b") == []


# ------------------------------------------------ 8. quota is not correctable


def test_402_quota_never_reaches_an_llm(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/x",
                       ToolReply.error(402, "QUOTA", "credit exhausted", retryable=True))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {"q": 1})],
                                       llm_base_url=llm_server.base_url), "--no-store")
    assert rules(doc) == [("stop_terminal", "terminal.quota")]
    assert "rephrasing cannot fix account quota" in attempts(doc)[0]["reason"]
    assert llm_server.requests == []
    assert len(tool_server.received()) == 1


# ------------------------------------------------ 9. retries per tool


def test_retries_per_tool_bound_resends_across_steps(tmp_path, tool_server):
    down = ToolReply(status=503, body={"success": False, "error": {"code": "DOWN"}})
    tool_server.script("/capabilities/a", *[down] * 5)
    tool_server.script("/capabilities/b", *[down] * 5)
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"a": capability("a"), "b": capability("b")},
        [step("step-1", "a", {}), step("step-2", "b", {}, depends_on=[])],
        config={"max_retries_per_tool": 3, "max_attempts": 5, "max_concurrency": 1}),
        "--no-store")
    all_attempts = attempts(doc, "step-1") + attempts(doc, "step-2")
    assert sum(a["action"] == "retry_same" for a in all_attempts) == 3
    assert len(tool_server.received()) == 3 + 2  # two first tries and three resends
    stops = [a for a in all_attempts if a["rule"] == "budget.retries_per_tool"]
    assert len(stops) == 2
    assert "used 3 of 3 unchanged resends allowed per tool" in stops[0]["reason"]
    assert [a["budgets"]["tool_retries_left"] for a in attempts(doc, "step-1")] == [3, 2, 1, 0]


def test_retries_per_tool_env_twin(tmp_path, tool_server, monkeypatch):
    monkeypatch.setenv("TRUVAG3_STEP_RETRY_MAX_PER_TOOL", "1")
    tool_server.script("/capabilities/a", *[ToolReply(status=502, body="bad gateway")] * 3)
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"a": capability("a")},
                                       [step("step-1", "a", {})]), "--no-store")
    assert rules(doc) == [("retry_same", "transient.retry_same"),
                          ("stop_budget", "budget.retries_per_tool")]


# ------------------------------------------------ 13. physical dispatches only


def test_connection_refused_is_not_a_dispatch(tmp_path):
    doc = run_plan_json(tmp_path, plan("http://127.0.0.1:9", {"x": capability("x")},
                                       [step("step-1", "x", {})]), "--no-store")
    one = doc["steps"][0]
    assert one["dispatch_count"] == 0
    assert [a["sent"] for a in one["attempts"]] == [False, False, False]
    assert [a["transport_error"] for a in one["attempts"]] == ["connect"] * 3
    # SPEC §3.2: a step that never dispatched is rejected or skipped, never failed (found by an
    # outside check: it was "failed — 0 dispatches")
    assert one["status"] == "rejected"
    assert one["retry_exhausted"] is True  # TruvaG3's flag: every attempt was used


@pytest.mark.parametrize("side_effects", ["none", "unsafe"])
def test_a_timeout_while_connecting_is_not_a_dispatch(tmp_path, side_effects):
    """timeout_s ends the call before the connection is made (found by an outside check: it was
    recorded as a sent request that timed out, dispatch count 1, and an unsafe capability was
    stopped as if the tool might have accepted it). Nothing reached the tool: a failed
    connection, resent like a refused one, and explain says it was not sent."""
    with stalled_port() as port:
        document = plan(f"http://127.0.0.1:{port}",
                        {"x": {**capability("x"), "side_effects": side_effects}},
                        [step("step-1", "x", {})], config={"timeout_s": 0.3, "max_attempts": 2})
        db = tmp_path / "store.duckdb"
        doc = run_plan_json(tmp_path, document, "--db", str(db))
        explained = run_cli("explain", doc["execution_id"], "--db", str(db)).stdout
    one = doc["steps"][0]
    assert (one["status"], one["dispatch_count"]) == ("rejected", 0)
    assert [(a["sent"], a["transport_error"], a["rule"]) for a in one["attempts"]] == [
        (False, "connect", "transient.retry_same"), (False, "connect", "budget.attempts")]
    assert "request timed out (timeout_s=0.3) while connecting; nothing was sent" in one["error"]
    assert "nothing reached the wire: the connection for POST" in explained
    assert "may have been accepted" not in explained


def test_a_bound_value_with_bad_text_is_sent_as_go_reads_it(tmp_path, tool_server):
    """A tool's answer holding a lone surrogate escape and a byte that is not UTF-8: Go's
    json.Unmarshal gives U+FFFD for each, so the step that binds the value sends them (found by
    an outside check: the second step was an "execution panic" and `run --json` a traceback)."""
    tool_server.script("/capabilities/a", ToolReply(
        status=200, body=b'{"success":true,"data":{"x":"\\ud800 in Z\xfcrich"}}'))
    tool_server.script("/capabilities/b", ToolReply.ok({"done": True}))
    document = plan(tool_server.base_url, {"a": capability("a"), "b": capability("b")},
                    [step("step-1", "a", {}),
                     step("step-2", "b", {"v": "{{step-1.data.x}}", "w": "at {{step-1.data.x}}"},
                          depends_on=["step-1"])])  # fmt: skip
    doc = run_plan_json(tmp_path, document, "--no-store")
    assert [s["status"] for s in doc["steps"]] == ["succeeded", "succeeded"]
    (sent,) = tool_server.received("/capabilities/b")
    assert sent.body == '{"v":"\ufffd in Z\ufffdrich","w":"at \ufffd in Z\ufffdrich"}'.encode()


# ------------------------------------------------ 15, 16. recovery, impact, why-not layers


def test_run_and_explain_show_recovery_impact_and_layers(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply(status=401, body={"success": False}))
    db = tmp_path / "store.duckdb"
    path = write_plan(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                     [step("step-1", "x", {})]))
    text = run_cli("run", str(path), "--db", str(db))
    assert "recovery: request authorization — the tool refused the credentials" in text.stdout
    doc = run_cli("run", str(path), "--db", str(db), "--json").json()
    last = attempts(doc)[-1]
    assert (last["recovery"], doc["steps"][0]["recovery"]) == ("request authorization",) * 2
    explained = run_cli("explain", doc["execution_id"], "--db", str(db))
    lines = [" ".join(line.split()) for line in explained.stdout.splitlines()]
    assert "impact the tool refused the credentials or the method (HTTP 401): the step failed; " \
        "fix the API key or permissions, then rerun the step" in lines
    assert "recovery request authorization" in lines
    assert "analyzer: not consulted — HTTP 401 is terminal: no layer may correct it " \
        "(seed 000 §12)" in lines
    record = run_cli("explain", doc["execution_id"], "--db", str(db), "--json").json()
    decision = record["steps"][0]["attempts"][0]["decision"]
    assert decision["recovery"] == "request authorization"
    assert decision["failure_class"] == "permission"
    assert [n["consulted"] for n in decision["layers"]] == [False, False, False]


def test_transient_decision_explains_why_no_layer_is_asked(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/x", ToolReply(status=503, body="down"),
                       ToolReply.ok({"ok": True}))
    db = str(tmp_path / "store.duckdb")
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {})],
                                       llm_base_url=llm_server.base_url), "--db", db)
    record = run_cli("explain", doc["execution_id"], "--db", db, "--json")
    assert record.code == 0, record.stderr
    layers = record.json()["steps"][0]["attempts"][0]["decision"]["layers"]
    assert all("HTTP 503 is transient" in n["detail"] for n in layers)
    assert llm_server.requests == []


@pytest.mark.serial  # a bound on wall-clock seconds
def test_wall_clock_budget_ends_a_hung_llm_call(tmp_path, tool_server, llm_server):
    from tests.support.llm_server import LLMReply

    tool_server.script("/capabilities/geo", bad_input())
    llm_server.script(LLMReply(analysis({"lat": 1}), delay_s=20.0))
    started = time.monotonic()
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"geo": capability("geo")}, [step("step-1", "geo", {"lat": 2})],
        config={"max_wall_clock_s": 4.0}, llm_base_url=llm_server.base_url), "--no-store")
    assert time.monotonic() - started < 10
    assert rules(doc) == [("stop_budget", "budget.wall_clock")]
    assert len(tool_server.received()) == 1
