"""The demo tools and demo LLM on loopback, the bundled demo plans, and `demo` CLI actions."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.cli import demo as cmd_demo
from console.demo import DEMO_PLAN_NAMES, demo_plans, record_demo, start_demo_services
from console.demo.llm import DEMO_MODEL, UNKNOWN_PROMPT_ANSWER, answer
from console.demo.runner import (
    FAST_CONFIG,
    DemoEndpoints,
    DemoServices,
    bundled_plan,
    parse_demo_plan,
)
from executor.events import ListRecorder
from executor.llm import (
    ContextualReResolver,
    ErrorAnalyzer,
    LLMClient,
    LLMSettings,
    build_analysis_messages,
    build_legacy_correction_messages,
    build_reresolution_messages,
)
from executor.policy import INTERMEDIATE_ACTIONS, Action
from store.queries import ExecutionFilter, open_store
from tests.support.demo_outcomes import EVERY_FINAL_ACTION, EXPECTED

ABSENT = "<absent>"

@pytest.fixture
def services() -> Iterator[DemoServices]:
    with start_demo_services() as running:
        yield running


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[Any]]:
    """Every demo plan recorded once through the real executor: events by plan name."""
    recorder = ListRecorder()
    outcomes = record_demo(recorder)
    assert [o.execution_id for o in outcomes] == [
        e.execution_id for e in recorder.of_kind("execution_started")
    ]
    by_execution: dict[str, list[Any]] = {}
    for event in recorder.events:
        by_execution.setdefault(event.execution_id, []).append(event)
    return {
        name: by_execution[outcome.execution_id]
        for name, outcome in zip(DEMO_PLAN_NAMES, outcomes, strict=True)
    }


# ------------------------------------------------------------------------------- demo tools


def _call(client: httpx.Client, base: str, capability: str, params: Any,
          headers: dict[str, str]) -> tuple[int, Any, httpx.Headers]:  # fmt: skip
    response = client.post(f"{base}/capabilities/{capability}", json=params, headers=headers)
    return response.status_code, response.json(), response.headers


def _shape(status: int, body: Any) -> tuple[int, Any, Any]:
    """(status, error code or "ok", retryable as sent or ABSENT)."""
    if body.get("success") is True:
        return status, "ok", ABSENT
    error = body["error"]
    return status, error["code"], error.get("retryable", ABSENT)


# (case, tool, capability, parameters, headers, expected shape of each successive call)
TOOL_CASES = [
    ("hotels_PARIS_is_a_correctable_400", "travel", "search_hotels", {"city_code": "PARIS"}, {},
     [(400, "INVALID_CITY", True), (400, "INVALID_CITY", True)]),
    ("hotels_PAR_succeeds", "travel", "search_hotels", {"city_code": "PAR", "nights": 2}, {},
     [(200, "ok", ABSENT)]),
    ("flights_expired_key_is_401_without_retryable", "travel", "search_flights",
     {"origin": "LON", "destination": "PAR"}, {"X-Api-Key": "demo-expired-key"},
     [(401, "AUTH_ERROR", ABSENT)]),
    ("flights_valid_key_succeeds", "travel", "search_flights",
     {"origin": "LON", "destination": "PAR"}, {"X-Api-Key": "demo-valid-key"},
     [(200, "ok", ABSENT)]),
    ("quote_first_call_429_then_success", "stocks", "quote", {"symbol": "TSLA"}, {},
     [(429, "RATE_LIMIT", True), (200, "ok", ABSENT), (200, "ok", ABSENT)]),
    ("convert_amount_0_is_a_correctable_400", "currency", "convert",
     {"amount": 0, "from": "USD", "to": "EUR"}, {}, [(400, "INVALID_AMOUNT", True)]),
    ("convert_succeeds", "currency", "convert", {"amount": 46828.5, "from": "USD", "to": "EUR"},
     {}, [(200, "ok", ABSENT)]),
    ("weather_flower_mound_tx_is_404", "weather", "current", {"location": "Flower Mound, TX"},
     {}, [(404, "LOCATION_NOT_FOUND", True)]),
    ("weather_flower_mound_full_succeeds", "weather", "current",
     {"location": "Flower Mound, Texas, US"}, {}, [(200, "ok", ABSENT)]),
    ("weather_flaky_503_twice_then_success", "weather", "current", {"location": "flaky"}, {},
     [(503, "SERVICE_UNAVAILABLE", True), (503, "SERVICE_UNAVAILABLE", True),
      (200, "ok", ABSENT)]),
    ("weather_maintenance_503_refuses_retry", "weather", "current", {"location": "maintenance"},
     {}, [(503, "MAINTENANCE", False), (503, "MAINTENANCE", False)]),
    ("weather_outage_is_503_retryable_every_time", "weather", "current", {"location": "outage"},
     {}, [(503, "UPSTREAM_OUTAGE", True)] * 3),
    ("trip_planner_agent_times_out_504", "travel", "plan_trip", {"destination": "Lisbon"}, {},
     [(504, "AGENT_TIMEOUT", True)]),
    ("weather_v1_reports_a_bad_location_as_503", "weather", "current_v1",
     {"location": "Flower Mound"}, {}, [(503, "UPSTREAM_ERROR", ABSENT)] * 3),
    ("payments_charge_is_502", "payments", "charge",
     {"amount": 378.0, "currency": "EUR", "reference": "r-1"}, {},
     [(502, "GATEWAY_TIMEOUT", True)]),
    ("unknown_capability_is_404", "travel", "teleport", {}, {},
     [(404, "UNKNOWN_CAPABILITY", False)]),
    ("body_not_an_object_is_400", "currency", "convert", [1, 2], {},
     [(400, "INVALID_REQUEST", False)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("tool", "capability", "params", "headers", "expected"),
    [c[1:] for c in TOOL_CASES],
    ids=[c[0] for c in TOOL_CASES],
)
def test_demo_tool_behaves_as_documented(services, tool, capability, params, headers, expected):
    with httpx.Client() as client:
        got = [
            _shape(*_call(client, services.tools_base_urls[tool], capability, params, headers)[:2])
            for _ in expected
        ]
    assert got == expected


def test_details_hints_prices_and_retry_after_are_on_the_wire(services):
    urls = services.tools_base_urls
    with httpx.Client() as client:
        _, paris, _ = _call(client, urls["travel"], "search_hotels", {"city_code": "PARIS"}, {})
        status, _, headers = _call(client, urls["stocks"], "quote", {"symbol": "TSLA"}, {})
        _, priced, _ = _call(client, urls["stocks"], "quote", {"symbol": "TSLA"}, {})
        _, zero, _ = _call(client, urls["currency"], "convert",
                           {"amount": 0, "from": "USD", "to": "EUR"}, {})  # fmt: skip
        _, mound, _ = _call(client, urls["weather"], "current",
                            {"location": "Flower Mound, TX"}, {})  # fmt: skip
    assert paris["error"]["message"] == "INVALID CITY CODE: PARIS"
    assert "PAR for Paris" in paris["error"]["details"]["hint"]
    assert (status, headers["retry-after"]) == (429, "1")
    assert priced["data"]["price"] == 468.285
    assert zero["error"]["message"] == "amount must be greater than 0"
    assert mound["error"]["details"]["original_location"] == "Flower Mound, TX"
    assert set(paris) == {"success", "error"} and set(priced) == {"success", "data"}


def test_history_is_held_until_released_and_tells_who_is_waiting(services):
    url = services.tools_base_urls["stocks"]
    arrived = threading.Event()
    services.reports.on_arrival("exec-7", arrived.set)
    answers: queue.Queue[tuple[int, Any, httpx.Headers]] = queue.Queue()

    def ask() -> None:
        with httpx.Client(timeout=20.0) as client:
            answers.put(_call(client, url, "history", {"symbol": "TSLA"},
                              {"X-TruvaG3-Request-ID": "exec-7"}))  # fmt: skip

    threading.Thread(target=ask, daemon=True).start()
    assert arrived.wait(timeout=20.0)
    services.reports.release("exec-7")
    status, body, _ = answers.get(timeout=20.0)
    assert (status, body["data"]["symbol"], len(body["data"]["closes"])) == (200, "TSLA", 5)


def test_call_counters_are_per_execution(services):
    url = services.tools_base_urls["stocks"]
    with httpx.Client() as client:

        def status(execution: str) -> int:
            return _call(client, url, "quote", {"symbol": "AAPL"},
                         {"X-TruvaG3-Request-ID": execution})[0]  # fmt: skip

        assert [status("run-1"), status("run-2"), status("run-1"), status("run-2")] == [
            429, 429, 200, 200]  # fmt: skip


def test_payment_status_finds_a_charge_whose_response_was_lost(services):
    url = services.tools_base_urls["payments"]
    with httpx.Client() as client:
        before = _call(client, url, "status", {"reference": "r-9"}, {})
        _call(client, url, "charge", {"amount": 10, "currency": "EUR", "reference": "r-9"}, {})
        after = _call(client, url, "status", {"reference": "r-9"}, {})
    assert _shape(*before[:2]) == (404, "CHARGE_NOT_FOUND", False)
    assert after[1]["data"]["state"] == "captured"


def test_get_describes_the_tool_and_get_on_a_capability_is_405(services):
    url = services.tools_base_urls["weather"]
    with httpx.Client() as client:
        about = client.get(f"{url}/").json()
        wrong_method = client.get(f"{url}/capabilities/current")
    assert about["data"]["capabilities"] == ["/capabilities/current", "/capabilities/current_v1"]
    assert (wrong_method.status_code, wrong_method.json()["error"]["code"]) == (
        405, "METHOD_NOT_ALLOWED")  # fmt: skip


# --------------------------------------------------------------------------------- demo LLM


def _llm(services: DemoServices) -> LLMClient:
    return LLMClient(LLMSettings(base_url=services.llm_base_url, api_key="unused",
                                 model=DEMO_MODEL))  # fmt: skip


ANALYZER_CASES = [
    ("PARIS_to_PAR", 400, {"city_code": "PARIS", "check_in": "2026-04-01"},
     '{"error": "INVALID CITY CODE: PARIS"}', True, {"city_code": "PAR"}, False),
    ("Tokio_to_Tokyo", 404, {"location": "Tokio"}, "Location 'Tokio' not found", True,
     {"location": "Tokyo"}, False),
    ("Flower_Mound_TX", 404, {"location": "Flower Mound, TX", "units": "metric"},
     "Location 'Flower Mound, TX' not found", True, {"location": "Flower Mound, Texas, US"},
     False),
    ("amount_0_cannot_be_fixed", 400, {"amount": 0, "from": "USD", "to": "EUR"},
     "amount must be greater than 0", False, {}, False),
    ("unavailable_is_transient", 400, {"q": "x"}, "service unavailable", False, {}, True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("status", "request_params", "error", "should_retry", "changes", "transient"),
    [c[1:] for c in ANALYZER_CASES],
    ids=[c[0] for c in ANALYZER_CASES],
)
async def test_demo_llm_answers_the_analyzer_through_openai(
    services, status, request_params, error, should_retry, changes, transient
):
    async with _llm(services) as client:
        result = await ErrorAnalyzer(client).analyze(
            http_status=status, error_response=error, original_request=request_params,
            user_query="demo", capability_name="cap", capability_description="", step_id="s",
        )  # fmt: skip
    assert result.exchange.error is None and result.exchange.response_status == 200
    verdict = result.verdict
    assert (verdict.should_retry, verdict.suggested_changes, verdict.is_transient_error) == (
        should_retry, changes, transient)  # fmt: skip
    assert verdict.reason
    assert result.exchange.total_tokens == (
        result.exchange.prompt_tokens + result.exchange.completion_tokens) > 0  # fmt: skip
    body = json.loads(result.exchange.response_body)
    assert (body["object"], body["model"]) == ("chat.completion", DEMO_MODEL)


async def test_demo_llm_computes_the_tesla_amount_from_source_data(services):
    async with _llm(services) as client:
        result = await ContextualReResolver(client).re_resolve(
            user_query="Sell 100 Tesla shares and convert the proceeds to EUR",
            source_data={"step-1": {"success": True, "data": {"symbol": "TSLA",
                                                              "price": 468.285}}},
            step_id="step-2", capability_name="convert", capability_schema=None,
            attempted_params={"amount": 0, "from": "USD", "to": "EUR"},
            error_response="amount must be greater than 0", http_status=400,
        )  # fmt: skip
    verdict = result.verdict
    assert verdict.should_retry is True
    assert verdict.corrected_parameters == {"amount": 46828.5, "from": "USD", "to": "EUR"}
    assert "100 × 468.285 = 46828.5" in verdict.analysis


async def test_demo_llm_reresolver_without_data_cannot_fix(services):
    async with _llm(services) as client:
        result = await ContextualReResolver(client).re_resolve(
            user_query="Convert the proceeds to EUR", source_data={}, step_id="step-2",
            capability_name="convert", capability_schema=None,
            attempted_params={"amount": 0, "from": "USD", "to": "EUR"},
            error_response="amount must be greater than 0", http_status=400,
        )  # fmt: skip
    assert (result.verdict.should_retry, result.verdict.corrected_parameters) == (False, {})


def test_demo_llm_legacy_correction_unquotes_and_corrects():
    prompt = build_legacy_correction_messages(
        tool="weather", capability="current", error_text="expected number",
        original_params={"location": "Tokio", "days": "3", "alerts": "true"},
        schema={"type": "object", "properties": {"location": {"type": "string"},
                                                 "days": {"type": "integer"},
                                                 "alerts": {"type": "boolean"}}},
    )[0]["content"]  # fmt: skip
    assert json.loads(answer(prompt)) == {"location": "Tokyo", "days": 3, "alerts": True}


def test_demo_llm_answers_are_deterministic():
    prompt = build_analysis_messages(
        http_status=400, error_response="INVALID CITY CODE: PARIS",
        original_request={"city_code": "PARIS"}, user_query="q", capability_name="c",
        capability_description="", step_id="s",
    )[0]["content"]  # fmt: skip
    assert answer(prompt) == answer(prompt)
    reresolve = build_reresolution_messages(
        user_query="q", source_data={}, step_id="s", capability_name="c",
        capability_schema=None, attempted_params={"x": 1}, error_response="e",
        http_status=400, previous_errors=["earlier"],
    )[0]["content"]  # fmt: skip
    assert json.loads(answer(reresolve))["should_retry"] is False
    assert answer("Tell me a joke") == UNKNOWN_PROMPT_ANSWER


def test_demo_llm_rejects_other_paths_openai_style(services):
    base = services.llm.base_url
    with httpx.Client() as client:
        models = client.get(f"{base}/v1/models").json()
        wrong = client.post(f"{base}/v1/completions", json={})
        no_messages = client.post(f"{base}/v1/chat/completions", json={"model": "m"})
    assert models["data"][0]["id"] == DEMO_MODEL
    assert wrong.status_code == 404 and "error" in wrong.json()
    assert no_messages.status_code == 400 and "messages" in no_messages.json()["error"]["message"]


# ------------------------------------------------------------------------------ demo plans


def test_demo_plans_fill_every_placeholder_and_parse(services):
    plans = demo_plans(services)
    assert list(plans) == list(DEMO_PLAN_NAMES) == list(EXPECTED)
    for name, plan in plans.items():
        assert "demo://" not in json.dumps(plan), name
        assert plan["llm"]["base_url"] == services.llm_base_url
        for tool, spec in plan["tools"].items():
            assert spec["base_url"] == services.tools_base_urls[tool]
        parsed = parse_demo_plan(name, plan)
        assert parsed.source_path == f"demo:{name}"


def test_fast_timing_leaves_a_plans_own_config_alone():
    endpoints = DemoEndpoints.for_base_port(9100)
    fast = demo_plans(endpoints, fast=True)
    slow = demo_plans(endpoints)
    assert fast["scenario-d-misclassified-503"]["config"] == {**FAST_CONFIG, "max_attempts": 3}
    assert fast["scenario-b-rate-limit"]["config"]["retry_after_max_ms"] == 5000
    assert "initial_delay_ms" not in slow["scenario-d-misclassified-503"]["config"]
    assert endpoints.llm_base_url == "http://127.0.0.1:9105/v1"
    assert slow["flower-mound"]["tools"]["weather"]["base_url"] == "http://127.0.0.1:9103"


def test_unknown_plan_name_is_refused():
    with pytest.raises(KeyError, match="no demo plan named 'nope'"):
        bundled_plan("nope")


# --------------------------------------------------------------------------- record_demo


def _rules_by_step(events: list[Any]) -> dict[str, tuple[str, list[str]]]:
    finished = {e.step_id: e.status for e in events if e.kind == "step_finished"}
    rules: dict[str, list[str]] = {step: [] for step in finished}
    for event in events:
        if event.kind == "attempt_decided":
            rules[event.step_id].append(event.decision.rule_id)
    return {step: (finished[step], rules[step]) for step in finished}


@pytest.mark.parametrize("name", list(EXPECTED), ids=list(EXPECTED))
def test_record_demo_gives_each_plan_its_documented_story(recorded, name):
    events = recorded[name]
    status, steps = EXPECTED[name]
    assert events[0].kind == "execution_started"
    assert events[0].plan_path == f"demo:{name}"
    assert events[-1].kind == "execution_finished" and events[-1].status == status
    assert _rules_by_step(events) == steps


def test_record_demo_llm_calls_went_through_openai_to_the_demo_llm(recorded):
    calls = [e for events in recorded.values() for e in events if e.kind == "llm_call"]
    sites = sorted(c.site for c in calls)
    assert sites == ["error_analysis"] * 6 + ["semantic_retry"] * 2
    for call in calls:
        assert (call.response_status, call.model, call.error) == (200, DEMO_MODEL, None)
        assert json.loads(call.request_body)["model"] == DEMO_MODEL
        assert call.parsed is not None and call.total_tokens > 0


def test_record_demo_details(recorded):
    backoff = [e for e in recorded["scenario-b-rate-limit"] if e.kind == "backoff"]
    assert {(e.planned_ms, e.source) for e in backoff} == {(1000.0, "retry_after_header")}
    assert backoff[-1].actual_ms >= 1000.0
    tesla = [e for e in recorded["tesla-layer4"]
             if e.kind == "attempt_dispatched" and e.step_id == "step-2"]  # fmt: skip
    assert [json.loads(e.request_body)["amount"] for e in tesla] == [0, 46828.5]
    skipped = [e for e in recorded["parallel-partial"] if e.kind == "step_finished"
               and e.status == "skipped"]  # fmt: skip
    assert skipped[0].skip_reason == "skipped due to failed dependency: step-4"
    coerced = [e for e in recorded["guard-rejection"] if e.kind == "parameters_coerced"]
    assert coerced[0].coercions[0]["key"] == "amount"
    sent = [e for e in recorded["guard-rejection"] if e.kind == "attempt_dispatched"]
    assert sent == []


# ------------------------------------------------------------------------------------- CLI


def demo_cli(*argv: str) -> tuple[int, str, str]:
    """`truva-console [--db X] demo ARGV` through cmd_demo's parser, in-process."""
    parser = argparse.ArgumentParser(prog="truva-console")
    parser.add_argument("--db")
    cmd_demo.add_parser(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = args.handler(args)
    return code, out.getvalue(), err.getvalue()


def test_cli_plans_writes_runnable_plans_for_a_base_port(tmp_path):
    code, out, _ = demo_cli("demo", "plans", str(tmp_path / "plans"), "--base-port", "9200")
    assert code == 0
    written = sorted(p.stem for p in (tmp_path / "plans").glob("*.json"))
    assert written == sorted(DEMO_PLAN_NAMES)
    plan = json.loads((tmp_path / "plans" / "tesla-layer4.json").read_text(encoding="utf-8"))
    assert plan["tools"]["stocks"]["base_url"] == "http://127.0.0.1:9201"
    assert plan["llm"]["base_url"] == "http://127.0.0.1:9205/v1"
    assert "tesla-layer4.json" in out


@pytest.mark.parametrize("port", ["0", "65535", "-3"], ids=["zero", "too_high", "negative"])
def test_cli_plans_refuses_a_bad_base_port(tmp_path, port):
    code, _, err = demo_cli("demo", "plans", str(tmp_path), "--base-port", port)
    assert code == 2
    assert f"--base-port: expected a port from 1 to 65530, got {port}" in err


@pytest.fixture(scope="module")
def recorded_store(tmp_path_factory) -> tuple[Path, str]:
    """`truva-console demo record --db X` run once: the store path and what it printed."""
    db = tmp_path_factory.mktemp("demo-record") / "demo.duckdb"
    code, out, err = demo_cli("demo", "record", "--db", str(db))
    assert code == 0, err
    return db, out


def test_cli_record_fills_the_store(recorded_store):
    db, out = recorded_store
    assert f"recorded {len(DEMO_PLAN_NAMES)} demo executions into {db}" in out
    store = open_store(db)
    page = store.list_executions(limit=100)
    assert sorted(row.plan_path for row in page.executions) == sorted(
        f"demo:{name}" for name in DEMO_PLAN_NAMES)  # fmt: skip
    analyzed = store.list_executions(ExecutionFilter(rule_id="analyzer.accept"))
    assert sorted(row.plan_path for row in analyzed.executions) == [
        "demo:flower-mound", "demo:parallel-partial", "demo:scenario-a-invalid-city"]  # fmt: skip


def test_cli_record_shows_every_final_action_in_at_least_12_executions(recorded_store):
    db, _ = recorded_store
    with open_store(db).session() as conn:
        executions = conn.execute("SELECT count(*) FROM executions").fetchone()[0]
        actions = dict(conn.execute(
            "SELECT a.action, list(DISTINCT e.plan_path ORDER BY e.plan_path) FROM attempts AS a "
            "JOIN executions AS e USING (execution_id) GROUP BY a.action"
        ).fetchall())  # fmt: skip
    assert executions >= 12
    assert sorted(actions) == sorted(EVERY_FINAL_ACTION)
    assert actions["stop_cancelled"] == ["demo:cancelled-report"]
    assert actions["stop_circuit_open"] == ["demo:circuit-open"]
    assert actions["stop_protected"] == ["demo:hitl-protected"]
    assert actions["stop_single_dispatch"] == ["demo:orchestrator-timeout"]
    assert actions["stop_no_correction"] == ["demo:no-correction"]


def test_the_derived_policy_attempt_counter_is_the_one_each_decision_read(recorded_store):
    db, _ = recorded_store
    store = open_store(db)
    compared = 0
    for row in store.list_executions(limit=100).executions:
        for step in store.get_execution(row.execution_id).steps:
            for attempt in step.attempts:
                inputs = (attempt.decision or {}).get("inputs") or {}
                if "attempt_number" in inputs:
                    assert attempt.attempt_number == inputs["attempt_number"], (
                        row.plan_path, step.step_id, attempt.n)
                    compared += 1
    assert compared >= 40


def test_every_final_action_is_an_action_of_the_policy():
    assert sorted(EVERY_FINAL_ACTION) == sorted(
        str(a) for a in Action if a not in INTERMEDIATE_ACTIONS)  # fmt: skip


def test_cli_record_into_a_file_that_is_not_a_store_is_bad_input(tmp_path):
    not_a_store = tmp_path / "notes.duckdb"
    not_a_store.write_text("just text", encoding="utf-8")
    code, out, err = demo_cli("--db", str(not_a_store), "demo", "record")
    assert (code, out) == (2, "")
    assert err.startswith("truva-console: ") and "notes.duckdb" in err
    assert not_a_store.read_text(encoding="utf-8") == "just text"


SERVE = """
import argparse, sys
from console.cli import demo as cmd_demo
parser = argparse.ArgumentParser(prog="truva-console")
parser.add_argument("--db")
cmd_demo.add_parser(parser.add_subparsers())
args = parser.parse_args(sys.argv[1:])
sys.exit(args.handler(args))
"""


def _line_reader(process: subprocess.Popen[str]) -> Callable[[], str]:
    """A function returning the process's next stdout line ("" at its end), waiting up to 20 s."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    return lambda: lines.get(timeout=20.0)


def test_cli_serve_runs_until_interrupted_and_its_plans_run(tmp_path):
    from tests.support.plans import run_cli

    plans_dir = tmp_path / "plans"
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE, "demo", "serve", "--base-port", "0",
         "--plans-dir", str(plans_dir), "--fast"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    try:
        next_line = _line_reader(process)
        lines = []
        while not (line := next_line()).startswith("  truva-console run "):
            assert line, f"demo serve exited early: {process.stderr.read()}"
            lines.append(line)
        assert any(line.split()[0] == "llm" for line in lines[1:7])
        result = run_cli("run", str(plans_dir / "scenario-a-invalid-city.json"), "--json",
                         "--no-store")  # fmt: skip
        assert result.code == 0, result.stderr
        attempts = result.json()["steps"][0]["attempts"]
        assert [a["rule"] for a in attempts] == ["analyzer.accept", "success.2xx"]
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=10)
    assert code == 0
