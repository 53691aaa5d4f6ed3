"""End to end through `truva-console run --json`: real HTTP tools and a real openai client.

Each scenario starts scripted tool servers (and, where the layers are used, a scripted
OpenAI-compatible server) on 127.0.0.1, runs a plan, and checks the SPEC §3.2 document.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.llm_server import LLMReply
from tests.support.plans import capability, plan, run_cli, run_plan_json, step, write_plan
from tests.support.tool_server import ToolReply

CITY = {"type": "object", "properties": {"city_code": {"type": "string"},
                                         "check_in": {"type": "string"}},
        "required": ["city_code"]}


def actions(doc: dict[str, Any], step_id: str = "step-1") -> list[tuple[Any, str, str]]:
    """(status, action, rule) for every attempt of a step."""
    found = next(s for s in doc["steps"] if s["id"] == step_id)
    return [(a["status"], a["action"], a["rule"]) for a in found["attempts"]]


def step_of(doc: dict[str, Any], step_id: str = "step-1") -> dict[str, Any]:
    return next(s for s in doc["steps"] if s["id"] == step_id)


def analysis(should_retry: bool, changes: dict | None = None, transient: bool = False,
             reason: str = "scripted") -> str:
    return json.dumps({"should_retry": should_retry, "reason": reason,
                       "suggested_changes": changes or {}, "is_transient_error": transient})


# ---------------------------------------------------------------- seed scenarios


def test_scenario_a_permitted_correction_paris_to_par(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/search_hotels",
                       ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE: PARIS",
                                       "INPUT_ERROR", retryable=True,
                                       details={"hint": "use an IATA city code"}),
                       ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(analysis(True, {"city_code": "PAR"},
                               reason="PARIS is not a valid IATA code; Paris is PAR"))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"search_hotels": capability("search_hotels", schema=CITY)},
        [step("step-1", "search_hotels", {"city_code": "PARIS", "check_in": "2026-04-01"})],
        query="Find hotels in Paris for April 1-3", llm_base_url=llm_server.base_url))
    assert doc["status"] == "succeeded"
    assert actions(doc) == [(400, "retry_corrected", "analyzer.accept"),
                            (200, "success", "success.2xx")]
    one = step_of(doc)
    assert (one["dispatch_count"], one["validation_retries"]) == (2, 1)
    assert one["attempts"][1]["parameters"]["city_code"] == "PAR"
    assert [a["attempt_number"] for a in one["attempts"]] == [1, 1]  # the attempt-- rule
    sent = [r.json for r in tool_server.received("/capabilities/search_hotels")]
    assert sent == [{"check_in": "2026-04-01", "city_code": "PARIS"},
                    {"check_in": "2026-04-01", "city_code": "PAR"}]
    assert "INVALID CITY CODE: PARIS" in llm_server.prompts[0]


def test_scenario_b_rate_limit_retries_same_payload(tmp_path, tool_server):
    tool_server.script("/capabilities/quote",
                       ToolReply.error(429, "RATE_LIMIT", "error 429: rate limit exceeded",
                                       "RATE_LIMIT", retryable=True),
                       ToolReply.ok({"price": 468.285}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"quote": capability("quote")},
        [step("step-1", "quote", {"symbol": "TSLA"})],
        config={"initial_delay_ms": 500, "max_delay_ms": 10000, "jitter": True}),
        "--no-store")
    # A real 542 ms wait: the first backoff of the TruvaG3 defaults.
    assert actions(doc) == [(429, "retry_same", "transient.retry_same"),
                            (200, "success", "success.2xx")]
    first = step_of(doc)["attempts"][0]
    assert first["delay_ms"] == pytest.approx(542.0735, abs=0.001)
    assert first["delay_source"] == "backoff"
    bodies = [r.body for r in tool_server.received("/capabilities/quote")]
    assert bodies[0] == bodies[1]


def test_scenario_c_auth_failure_stops_without_llm(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/flights",
                       ToolReply.error(401, "AUTH_ERROR", "error 401: invalid API key",
                                       "AUTH_ERROR", retryable=False))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"flights": capability("flights")},
        [step("step-1", "flights", {"from": "LHR"})], llm_base_url=llm_server.base_url))
    assert doc["status"] == "failed"
    # retryable:false is explicit here, so the refusal rule fires before the status rule.
    assert actions(doc) == [(401, "stop_refused", "refused.explicit_false")]
    assert llm_server.requests == []


def test_scenario_c_auth_failure_without_flag_is_terminal(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/flights",
                       ToolReply.error(401, "AUTH_ERROR", "error 401: invalid API key"))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"flights": capability("flights")},
        [step("step-1", "flights", {"from": "LHR"})], llm_base_url=llm_server.base_url))
    assert actions(doc) == [(401, "stop_terminal", "terminal.auth_or_method")]
    assert step_of(doc)["dispatch_count"] == 1
    assert llm_server.requests == []


@pytest.mark.parametrize("status", [403, 405])
def test_403_and_405_never_reach_layers_3_or_4(tmp_path, tool_server, llm_server, status):
    tool_server.script("/capabilities/x", ToolReply.error(status, "DENIED", "no",
                                                          retryable=True))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x")}, [step("step-1", "x", {"a": 1})],
        llm_base_url=llm_server.base_url))
    assert actions(doc) == [(status, "stop_terminal", "terminal.auth_or_method")]
    assert llm_server.requests == []


def test_scenario_d_misclassified_503_retries_same_and_fails(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/weather",
                       ToolReply(status=503, body="location not found: Flower Mound"))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"weather": capability("weather")},
        [step("step-1", "weather", {"location": "Flower Mound"})],
        llm_base_url=llm_server.base_url))
    assert actions(doc) == [(503, "retry_same", "transient.retry_same"),
                            (503, "retry_same", "transient.retry_same"),
                            (503, "stop_budget", "budget.attempts")]
    assert llm_server.requests == []
    sent = {r.body for r in tool_server.received("/capabilities/weather")}
    assert len(sent) == 1


def test_503_with_explicit_false_stops(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply.error(503, "DOWN", "maintenance",
                                                          "SERVICE_ERROR", retryable=False))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {"a": 1})]), "--no-store")
    assert actions(doc) == [(503, "stop_refused", "refused.explicit_false")]


def test_flower_mound_404_retryable_true_corrected(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/current_weather",
                       ToolReply.error(404, "LOCATION_NOT_FOUND",
                                       "Location 'Flower Mound, TX' not found in weather database",
                                       "NOT_FOUND", retryable=True,
                                       details={"original_location": "Flower Mound, TX",
                                                "hint": "Try 'City, Country' format"}),
                       ToolReply.ok({"location": "Flower Mound", "temperature": 25.3}))
    llm_server.script(analysis(True, {"location": "Flower Mound, Texas, US"},
                               reason="TX is a US state abbreviation"))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"current_weather": capability("current_weather")},
        [step("step-1", "current_weather", {"location": "Flower Mound, TX", "units": "metric"})],
        query="What's the weather in Flower Mound, TX?", llm_base_url=llm_server.base_url))
    assert actions(doc) == [(404, "retry_corrected", "analyzer.accept"),
                            (200, "success", "success.2xx")]
    assert tool_server.received("/capabilities/current_weather")[1].json == {
        "location": "Flower Mound, Texas, US", "units": "metric"}


def test_tokio_to_tokyo_with_omitted_retryable(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/geocode",
                       ToolReply.error(400, "INVALID_CITY", "unknown city Tokio"),
                       ToolReply.ok({"lat": 35.6897, "lon": 139.6917}))
    llm_server.script(analysis(True, {"city": "Tokyo"}, reason="typo: Tokio -> Tokyo"))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"geocode": capability("geocode")},
        [step("step-1", "geocode", {"city": "Tokio"})], llm_base_url=llm_server.base_url))
    assert actions(doc) == [(400, "retry_corrected", "analyzer.accept"),
                            (200, "success", "success.2xx")]
    prompt = llm_server.prompts[0]
    assert '<error_response status="400">' in prompt and "Tokio" in prompt


def test_tesla_layer_4_computes_amount(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/quote", ToolReply.ok({"symbol": "TSLA",
                                                            "price": 468.285}))
    tool_server.script("/capabilities/convert",
                       ToolReply.error(400, "INVALID_AMOUNT", "amount must be greater than 0",
                                       "INPUT_ERROR", retryable=True),
                       ToolReply.ok({"amount_eur": 40000.0}))
    llm_server.script(analysis(False, reason="cannot know the amount"),
                      json.dumps({"should_retry": True,
                                  "analysis": "Computed 100 × 468.285 = 46828.5",
                                  "corrected_parameters": {"amount": 46828.5, "from": "USD",
                                                           "to": "EUR"}}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"quote": capability("quote"), "convert": capability("convert")},
        [step("step-1", "quote", {"symbol": "TSLA"}),
         step("step-2", "convert", {"amount": 0, "from": "USD", "to": "EUR"},
              depends_on=["step-1"])],
        query="Sell 100 Tesla shares and convert the proceeds to EUR",
        llm_base_url=llm_server.base_url))
    assert doc["status"] == "succeeded"
    assert actions(doc, "step-2") == [(400, "retry_corrected", "re_resolution.accept"),
                                      (200, "success", "success.2xx")]
    two = step_of(doc, "step-2")
    assert (two["validation_retries"], two["semantic_retries"]) == (1, 1)
    assert tool_server.received("/capabilities/convert")[1].json["amount"] == 46828.5
    assert "468.285" in llm_server.prompts[1]


def test_429_retry_after_header_sets_the_wait(tmp_path, tool_server):
    tool_server.script("/capabilities/x",
                       ToolReply.error(429, "RATE_LIMIT", "slow down", "RATE_LIMIT",
                                       headers={"Retry-After": "1"}),
                       ToolReply.ok({"ok": True}))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {"a": 1})],
                                       config={"max_delay_ms": 10000}), "--no-store")
    first = step_of(doc)["attempts"][0]
    assert (first["action"], first["delay_ms"], first["delay_source"]) == (
        "retry_same", 1000.0, "retry_after_header")


def test_retry_after_in_error_details_is_waited_in_full_beyond_max_delay(tmp_path, tool_server):
    tool_server.script("/capabilities/x",
                       ToolReply.error(429, "RATE_LIMIT", "slow down", "RATE_LIMIT",
                                       retryable=True, details={"retry_after": "300ms"}),
                       ToolReply.ok({"ok": True}))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {"a": 1})],
                                       config={"max_delay_ms": 20}), "--no-store")
    first = step_of(doc)["attempts"][0]
    assert (first["delay_ms"], first["delay_source"]) == (300.0, "retry_after_details")
    gap = tool_server.received()[1].received_at - tool_server.received()[0].received_at
    assert gap >= 0.3  # the wire shows the full wait, not max_delay_ms


def test_transport_drop_retries_same_payload(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply(drop=True), ToolReply.ok({"ok": True}))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {"a": 1})]), "--no-store")
    assert actions(doc) == [(0, "retry_same", "transient.retry_same"),
                            (200, "success", "success.2xx")]
    assert step_of(doc)["attempts"][0]["transport_error"] == "reset"


@contextmanager
def raw_answers(*answers: bytes) -> Iterator[str]:
    """A loopback server that reads each request's head and answers it with bytes that need
    not be HTTP, then closes the connection; yields its base URL."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        for answer in answers:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                received = b""
                while b"\r\n\r\n" not in received:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    received += chunk
                connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        thread.join(timeout=5)


@pytest.mark.parametrize(("name", "answer", "kind", "message"), [
    ("not_http_at_all", b"garbage\r\n\r\n", "protocol", "illegal status line"),
    ("a_bad_header_line", b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "protocol",
     "illegal header line"),
    ("a_body_cut_short", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc", "reset",
     "peer closed connection without sending complete message body"),
    ("closed_before_answering", b"", "reset", "Server disconnected without sending a response"),
])
def test_an_answer_that_is_not_http_is_a_protocol_error_and_a_close_is_a_reset(
    name, answer, kind, message, tmp_path
):
    """Both are transport failures, resent after backoff; the record names which it was."""
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"
    with raw_answers(answer, ok) as base_url:
        doc = run_plan_json(tmp_path, plan(base_url, {"x": capability("x")},
                                           [step("step-1", "x", {"a": 1})],
                                           config={"max_delay_ms": 20}))
    assert actions(doc) == [(0, "retry_same", "transient.retry_same"),
                            (200, "success", "success.2xx")]
    first = step_of(doc)["attempts"][0]
    assert first["transport_error"] == kind
    assert first["reason"].startswith(f"transport failure ({kind}) is transient; resend")
    stored = run_cli("sql", "SELECT transport_error, transport_error_message FROM attempts "
                     "ORDER BY n LIMIT 1", "--format", "json")
    assert stored.code == 0, stored.stderr
    (row,) = json.loads(stored.stdout)
    assert row["transport_error"] == kind
    assert message in row["transport_error_message"]


def test_connection_refused_exhausts_attempts(tmp_path):
    doc = run_plan_json(tmp_path, plan("http://127.0.0.1:9", {"x": capability("x")},
                                       [step("step-1", "x", {"a": 1})]), "--no-store")
    assert actions(doc) == [(0, "retry_same", "transient.retry_same")] * 2 + [
        (0, "stop_budget", "budget.attempts")]
    assert step_of(doc)["attempts"][0]["transport_error"] == "connect"


def test_timeout_is_a_transport_failure(tmp_path, tool_server):
    # The timeout is far below the delay, and the retry's round trip far below the timeout.
    tool_server.script("/capabilities/x", ToolReply.ok({"slow": True}, delay_s=30.0),
                       ToolReply.ok({"ok": True}))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {"a": 1})],
                                       config={"timeout_s": 0.5}), "--no-store")
    assert actions(doc)[0] == (0, "retry_same", "transient.retry_same")
    assert step_of(doc)["attempts"][0]["transport_error"] == "timeout"
    assert doc["status"] == "succeeded"


def test_task_budget_llm_calls_stops_and_names_the_step(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/x", ToolReply.error(400, "BAD", "bad value", "INPUT_ERROR"))
    llm_server.script(analysis(True, {"a": 2}), analysis(True, {"a": 3}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x")}, [step("step-1", "x", {"a": 1})],
        config={"max_llm_calls": 1}, llm_base_url=llm_server.base_url))
    assert actions(doc) == [(400, "retry_corrected", "analyzer.accept"),
                            (400, "stop_budget", "budget.llm_calls")]
    assert doc["incomplete_steps"] == ["step-1"]
    assert "budget.llm_calls" in doc["stop_reason"]


def test_partial_failure_in_parallel_plan_keeps_siblings(tmp_path, tool_server):
    tool_server.script("/capabilities/good", ToolReply.ok({"value": 42}))
    tool_server.script("/capabilities/bad", ToolReply.error(401, "AUTH", "expired key"))
    tool_server.script("/capabilities/after_good", ToolReply.ok({"done": True}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url,
        {"good": capability("good"), "bad": capability("bad"),
         "after_good": capability("after_good")},
        [step("step-1", "good", {"q": 1}), step("step-2", "bad", {"q": 2}),
         step("step-3", "after_good", {"v": "{{step-1.data.value}}"}, depends_on=["step-1"]),
         step("step-4", "after_good", {"v": "{{step-2.data.value}}"}, depends_on=["step-2"])]),
        "--no-store")
    assert doc["status"] == "partial"
    statuses = {s["id"]: s["status"] for s in doc["steps"]}
    assert statuses == {"step-1": "succeeded", "step-2": "failed", "step-3": "succeeded",
                        "step-4": "skipped"}
    assert step_of(doc, "step-4")["skip_reason"] == "skipped due to failed dependency: step-2"
    assert tool_server.received("/capabilities/after_good")[0].json == {"v": 42}


def test_orchestrator_capability_gets_one_dispatch_even_on_500(tmp_path, tool_server):
    tool_server.script("/capabilities/delegate", ToolReply(status=500, body="boom"),
                       ToolReply.ok({"ok": True}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"delegate": capability("delegate", orchestrator=True)},
        [step("step-1", "delegate", {"task": "x"})]), "--no-store")
    assert actions(doc) == [(500, "stop_single_dispatch", "orchestrator.single_dispatch")]
    assert len(tool_server.received("/capabilities/delegate")) == 1


def test_unsafe_side_effect_capability_is_not_resent_after_502(tmp_path, tool_server):
    tool_server.script("/capabilities/pay", ToolReply(status=502, body="gateway"),
                       ToolReply.ok({"paid": True}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"pay": capability("pay", side_effects="unsafe")},
        [step("step-1", "pay", {"amount": 10})]), "--no-store")
    assert actions(doc) == [(502, "stop_unsafe_resend", "side_effects.unsafe_resend")]
    assert "query status" in step_of(doc)["attempts"][0]["reason"]


def test_unsafe_capability_429_is_resent(tmp_path, tool_server):
    tool_server.script("/capabilities/pay", ToolReply(status=429, body="slow"),
                       ToolReply.ok({"paid": True}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"pay": capability("pay", side_effects="unsafe")},
        [step("step-1", "pay", {"amount": 10})]), "--no-store")
    assert actions(doc)[-1] == (200, "success", "success.2xx")


MALFORMED = [
    ("not_json", "I think you should change the city."),
    ("wrong_types", '{"should_retry": "yes", "suggested_changes": {"a": 2}}'),
    ("empty", ""),
    ("changes_not_object", '{"should_retry": true, "suggested_changes": ["a"]}'),
    ("no_choices", LLMReply(body=b'{"object": "chat.completion", "choices": []}')),
]
# An LLM endpoint answering 5xx is unavailable, not malformed (see test_llm_endpoint.py).


@pytest.mark.parametrize("answer", [m[1] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_llm_answer_means_no_correction(tmp_path, tool_server, llm_server, answer):
    tool_server.script("/capabilities/x", ToolReply.error(400, "BAD", "bad value"))
    llm_server.script(answer)
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x")}, [step("step-1", "x", {"a": 1})],
        llm_base_url=llm_server.base_url))
    assert actions(doc) == [(400, "stop_no_correction", "no_correction.stop")]
    assert "no usable answer" in step_of(doc)["attempts"][0]["reason"]
    assert len(tool_server.received("/capabilities/x")) == 1


def test_fenced_llm_answer_is_parsed(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/x", ToolReply.error(400, "BAD", "bad value"),
                       ToolReply.ok({"ok": True}))
    llm_server.script("Sure!\n```json\n" + analysis(True, {"a": 2}) + "\n```\nHope it helps.")
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x")}, [step("step-1", "x", {"a": 1})],
        llm_base_url=llm_server.base_url))
    assert actions(doc)[0] == (400, "retry_corrected", "analyzer.accept")


def test_llm_transient_claim_on_400_never_resends_unchanged(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/x", ToolReply.error(400, "BAD", "bad value"))
    llm_server.script(analysis(True, {}, transient=True))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x")}, [step("step-1", "x", {"a": 1})],
        llm_base_url=llm_server.base_url))
    assert actions(doc) == [(400, "stop_no_correction", "no_correction.stop")]
    assert len(tool_server.received("/capabilities/x")) == 1


def test_no_llm_configured_400_stops_and_says_so(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply.error(400, "BAD", "bad value",
                                                          retryable=True))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {"a": 1})]), "--no-store")
    attempt = step_of(doc)["attempts"][0]
    assert (attempt["action"], attempt["rule"]) == ("stop_no_correction", "no_correction.stop")
    assert "LLM layers are off" in attempt["reason"]


def test_hitl_approved_input_is_protected(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/x", ToolReply.error(400, "BAD", "bad city"))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x")},
        [step("step-1", "x", {"city": "Paris"}, hitl_approved=["city"])],
        llm_base_url=llm_server.base_url))
    assert actions(doc) == [(400, "stop_protected", "protected.no_mutable_inputs")]
    assert llm_server.requests == []


def test_guard_rejects_before_dispatch(tmp_path, tool_server):
    schema = {"type": "object", "properties": {"unit": {"enum": ["C", "F"]}},
              "required": ["unit"]}
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x", schema=schema)},
        [step("step-1", "x", {"unit": "K"})]), "--no-store")
    one = step_of(doc)
    assert one["status"] == "rejected" and one["dispatch_count"] == 0
    assert actions(doc) == [(None, "reject_predispatch", "guard.reject_predispatch")]
    assert tool_server.received() == []


def test_bad_plan_gets_one_line_and_exit_2(tmp_path):
    path = write_plan(tmp_path, {"tools": {}, "capabilities": {}, "steps": [],
                                 "paramters": {}})
    result = run_cli("run", str(path), "--json")
    assert result.code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "plan.json" in lines[0] and "paramters" in lines[0]


def test_layer_4_yes_without_parameters_is_no_correction(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/x", ToolReply.error(400, "BAD", "bad value"))
    llm_server.script(analysis(False, reason="cannot fix"),
                      json.dumps({"should_retry": True, "analysis": "try again",
                                  "corrected_parameters": {}}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x")}, [step("step-1", "x", {"a": 1})],
        llm_base_url=llm_server.base_url))
    (attempt,) = step_of(doc)["attempts"]
    assert (attempt["action"], attempt["rule"]) == ("stop_no_correction", "no_correction.stop")
    assert "layer 4 proposed no change" in attempt["reason"]


def test_no_semantic_budget_means_no_correction(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/x", ToolReply.error(422, "BAD", "bad value"))
    llm_server.script(analysis(False, reason="cannot fix"))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x")}, [step("step-1", "x", {"a": 1})],
        config={"max_semantic_retries": 0}, llm_base_url=llm_server.base_url))
    assert actions(doc) == [(422, "stop_no_correction", "re_resolution.budget_exhausted")]
    assert len(llm_server.requests) == 1


def test_analyzer_answer_without_should_retry_counts_as_cannot_fix(tmp_path, tool_server,
                                                                     llm_server):
    tool_server.script("/capabilities/x", ToolReply.error(400, "BAD", "bad value"),
                       ToolReply.ok({"ok": True}))
    llm_server.script('{"reason": "no idea"}',
                      json.dumps({"should_retry": True, "analysis": "a must be 2",
                                  "corrected_parameters": {"a": 2}}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x")}, [step("step-1", "x", {"a": 1})],
        llm_base_url=llm_server.base_url))
    assert actions(doc)[0] == (400, "retry_corrected", "re_resolution.accept")
