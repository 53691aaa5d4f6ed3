"""A real run exported over OTLP/HTTP to a real loopback receiver, configured by environment."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.events import FanoutRecorder, ListRecorder
from executor.plan import parse_plan
from executor.runtime import ExecutionOutcome, PlanExecutor
from executor.telemetry import TelemetryRecorder, telemetry_from_env, trace_id_for_execution
from tests.support.events_factory import small_execution
from tests.support.otlp_receiver import OTLPReceiver, attributes_of
from tests.support.plans import capability, plan, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply, refused_port


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as server:
        yield server


async def no_wait(seconds: float) -> None:
    return None


async def run_with_telemetry(document: dict, telemetry: TelemetryRecorder) -> ExecutionOutcome:
    """Run a plan recording into a list and telemetry, then shut telemetry down (it exports)."""
    events = ListRecorder()
    try:
        outcome = await PlanExecutor(
            parse_plan(document), recorder=FanoutRecorder(events, telemetry), env={}, sleep=no_wait
        ).run()
    finally:
        finished = telemetry.shutdown()
    assert finished
    assert telemetry.failures == []
    return outcome


def quote_plan(tool_server: ScriptedToolServer, **kwargs) -> dict:
    tool_server.script(
        "/capabilities/quote", ToolReply.error(503, "DOWN", "busy"), ToolReply.ok({"price": 1})
    )
    return plan(
        tool_server.base_url,
        {"quote": capability("quote")},
        [step("step-1", "quote", {"symbol": "TSLA"})],
        **kwargs,
    )


COMPRESSIONS = [("uncompressed", None, None), ("gzip", "gzip", "gzip")]


@pytest.mark.parametrize(
    ("name", "compression", "content_encoding"), COMPRESSIONS, ids=[c[0] for c in COMPRESSIONS]
)
async def test_a_run_reaches_an_otlp_receiver(
    name, compression, content_encoding, monkeypatch, receiver, tool_server
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    if compression is not None:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
    telemetry = telemetry_from_env()
    assert telemetry is not None

    outcome = await run_with_telemetry(quote_plan(tool_server), telemetry)

    assert sorted(receiver.span_names()) == [
        "execute_tool demo.quote",
        "execute_tool demo.quote",
        "orchestrator.execution",
        "orchestrator.step.step-1",
    ]
    spans = [span for _, span in receiver.spans()]
    assert {span.trace_id.hex() for span in spans} == {trace_id_for_execution(outcome.execution_id)}
    resource = next(resource for resource, _ in receiver.spans())
    assert resource["service.name"] == "truva-console"
    attempts = sorted(
        (attributes_of(s.attributes) for s in spans if s.name.startswith("execute_tool ")),
        key=lambda attributes: attributes["truva.attempt.n"],
    )
    assert [a["truva.decision.rule_id"] for a in attempts] == [
        "transient.retry_same",
        "success.2xx",
    ]
    assert [a.get("http.response.status_code") for a in attempts] == [503, 200]

    decisions = {
        (attributes["action"], attributes["rule_id"]): value
        for attributes, value in receiver.metric_points("truva.decisions")
    }
    assert decisions == {("retry_same", "transient.retry_same"): 1, ("success", "success.2xx"): 1}
    assert [value for _, value in receiver.metric_points("truva.dispatches")] == [2]
    for export in receiver.exports:
        assert export.headers["content-type"] == "application/x-protobuf"
        assert export.headers.get("content-encoding") == content_encoding


async def test_headers_and_service_name_come_from_the_environment(receiver, tool_server):
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint + "/",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=team-a,x-token=abc%20def",
        "OTEL_SERVICE_NAME": "checkout-agent",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci",
    }
    telemetry = telemetry_from_env(env)
    assert telemetry is not None

    await run_with_telemetry(quote_plan(tool_server), telemetry)

    assert {export.path for export in receiver.exports} == {"/v1/traces", "/v1/metrics"}
    for export in receiver.exports:
        assert (export.headers["x-tenant"], export.headers["x-token"]) == ("team-a", "abc def")
    resource = next(resource for resource, _ in receiver.spans())
    assert resource["service.name"] == "checkout-agent"
    assert resource["deployment.environment"] == "ci"


async def test_a_traces_endpoint_alone_exports_no_metrics(receiver, tool_server):
    telemetry = telemetry_from_env(
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint + "/v1/traces"}
    )
    assert telemetry is not None

    await run_with_telemetry(quote_plan(tool_server), telemetry)

    assert "orchestrator.execution" in receiver.span_names()
    assert receiver.metric_exports() == []


async def test_an_llm_correction_is_exported_with_genai_attributes(
    receiver, tool_server, llm_server
):
    tool_server.script(
        "/capabilities/hotels",
        ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE: PARIS", "INPUT_ERROR"),
        ToolReply.ok({"hotels": ["H1"]}),
    )
    llm_server.script(
        json.dumps(
            {
                "should_retry": True,
                "reason": "Paris is PAR",
                "suggested_changes": {"city_code": "PAR"},
                "is_transient_error": False,
            }
        )
    )
    document = plan(
        tool_server.base_url,
        {"hotels": capability("hotels")},
        [step("step-1", "hotels", {"city_code": "PARIS"})],
        llm_base_url=llm_server.base_url,
    )
    telemetry = telemetry_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
    assert telemetry is not None

    await run_with_telemetry(document, telemetry)

    spans = {span.name: span for _, span in receiver.spans()}
    llm_span = spans["chat scripted-model"]
    attributes = attributes_of(llm_span.attributes)
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "scripted-model"
    assert attributes["truva.llm.site"] == "error_analysis"
    assert attributes["gen_ai.usage.input_tokens"] > 0
    first_attempt = next(
        span
        for _, span in receiver.spans()
        if span.name == "execute_tool demo.hotels"
        and attributes_of(span.attributes)["truva.attempt.n"] == 1
    )
    assert llm_span.parent_span_id == first_attempt.span_id
    assert "llm_error_analysis_retry" in [event.name for event in first_attempt.events]
    retries = receiver.metric_points("orchestration.error_analysis.retry")
    assert retries == [({"module": "orchestration", "capability": "hotels", "http_status": 400}, 1)]


async def test_a_layer_4_correction_that_succeeds_counts_seed_001s_success_rate(
    receiver, tool_server, llm_server
):
    """seed 001's PromQL divides `orchestration_semantic_retry_success_total` by
    `…_attempts_total`: one re-resolver consultation whose corrected attempt succeeded."""
    tool_server.script("/capabilities/lookup", ToolReply.ok({"iata": "PAR"}))
    tool_server.script(
        "/capabilities/hotels",
        ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE: PARIS", "INPUT_ERROR"),
        ToolReply.ok({"hotels": ["H1"]}),
    )
    llm_server.script(
        json.dumps({"should_retry": False, "reason": "cannot know the code",
                    "suggested_changes": {}, "is_transient_error": False}),
        json.dumps({"should_retry": True, "analysis": "lookup says PAR",
                    "corrected_parameters": {"city_code": "PAR"}}),
    )  # fmt: skip
    document = plan(
        tool_server.base_url,
        {"hotels": capability("hotels"), "lookup": capability("lookup")},
        [step("step-0", "lookup", {"name": "Paris"}),
         step("step-1", "hotels", {"city_code": "PARIS"}, depends_on=["step-0"])],
        llm_base_url=llm_server.base_url,
    )
    telemetry = telemetry_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
    assert telemetry is not None

    outcome = await run_with_telemetry(document, telemetry)

    assert [a.rule for a in outcome.steps[1].attempts] == ["re_resolution.accept", "success.2xx"]
    labels = {"module": "orchestration", "capability": "hotels"}
    assert receiver.metric_points("orchestration.semantic_retry.attempts") == [(labels, 1)]
    assert receiver.metric_points("orchestration.semantic_retry.success") == [(labels, 1)]
    assert receiver.metric_points("orchestration.semantic_retry.applied") == [(labels, 1)]


@pytest.mark.serial  # a bound on wall-clock seconds
def test_an_unreachable_collector_costs_at_most_the_shutdown_timeout():
    with refused_port() as closed_port:
        telemetry = telemetry_from_env(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port}"}
        )
        assert telemetry is not None
        for event in small_execution("exec-unreachable"):
            telemetry.record(event)

        started = time.monotonic()
        finished = telemetry.shutdown(timeout_s=0.5)

    assert finished is False
    assert time.monotonic() - started < 3.0  # the exporter alone retries for about 7 s per signal


IMPORT_CASES = [
    ("endpoint_unset", {}, False),
    ("endpoint_set", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, True),
]


@pytest.mark.parametrize(
    ("name", "env", "exporter_imported"), IMPORT_CASES, ids=[c[0] for c in IMPORT_CASES]
)
def test_an_unset_endpoint_is_silent_and_imports_no_exporter(name, env, exporter_imported):
    code = (
        "import json, sys, executor.runtime\n"
        "from executor.telemetry import telemetry_from_env\n"
        f"recorder = telemetry_from_env({env!r})\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "print(json.dumps({'enabled': recorder is not None, 'loaded': loaded}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    assert result["enabled"] is exporter_imported
    exporter_modules = [m for m in result["loaded"] if m.startswith("opentelemetry.exporter")]
    assert bool(exporter_modules) is exporter_imported
    if not exporter_imported:
        assert result["loaded"] == []
        assert out.stderr == ""


def test_truva_console_run_exports_when_the_endpoint_is_set(
    tmp_path, tool_server, receiver, monkeypatch
):
    from tests.support.plans import run_plan_json

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    doc = run_plan_json(tmp_path, quote_plan(tool_server), "--no-store")
    names = receiver.span_names()
    assert "orchestrator.step.step-1" in names
    attempt_rules = [
        attributes_of(span.attributes).get("truva.decision.rule_id") for _, span in receiver.spans()
    ]
    assert "transient.retry_same" in attempt_rules
    assert doc["status"] == "succeeded"


REPO = Path(__file__).resolve().parents[2]
OUTPUTS = ["text", "json"]


@pytest.mark.serial  # bounds on wall-clock seconds
@pytest.mark.parametrize("output", OUTPUTS)
def test_a_completed_run_shows_its_result_before_a_hung_export_and_ctrl_c_cuts_only_that(
    output, tmp_path, tool_server
):
    # The collector takes the export and never answers: the result must already be on stdout
    # while the export waits, and a Ctrl-C then ends the export, not the completed run.
    path = write_plan(tmp_path, quote_plan(tool_server))
    argv = [sys.executable, "-m", "console.entry", "run", str(path), "--db",
            str(tmp_path / "debug.duckdb"), *(["--json"] if output == "json" else [])]
    with OTLPReceiver(hang=True) as collector:
        env = {**os.environ, "PYTHONPATH": str(REPO),
               "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=env, cwd=tmp_path)  # fmt: skip
        try:
            assert collector.wait_for_exports(1, timeout_s=30), "the export never started"
            shown, _, _ = select.select([child.stdout], [], [], 2.0)
            assert shown, "the result was not shown while the export waited"
            started = time.monotonic()
            child.send_signal(signal.SIGINT)
            stdout, stderr = child.communicate(timeout=10)
            elapsed = time.monotonic() - started
        finally:
            child.kill()
    assert child.returncode == 0, stderr
    assert elapsed < 2.0  # the exporter's own wait for an answer is 10 s
    text, errors = stdout.decode(), stderr.decode()
    if output == "json":
        assert json.loads(text)["status"] == "succeeded"
    else:
        assert text.startswith("execution ") and ": succeeded\n" in text
    assert errors.splitlines() == [
        "truva-console: Ctrl-C: the telemetry export was cut short; spans and metrics not yet "
        "sent are not exported"
    ]
