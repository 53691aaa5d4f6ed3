"""OTLP over gRPC, HTTP/protobuf and HTTP/JSON to real loopback receivers, chosen by environment.

Also: an unknown protocol is one clear error, a backend without a metrics endpoint gets one
warning, and message content reaches the receiver only when content capture is on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from executor.events import FanoutRecorder, ListRecorder
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from executor.telemetry import (
    TelemetryConfigError,
    TelemetryRecorder,
    telemetry_from_env,
    trace_id_for_execution,
)
from tests.support.events_factory import small_execution
from tests.support.otlp_grpc_receiver import OTLPGrpcReceiver
from tests.support.otlp_receiver import OTLPReceiver, attributes_of
from tests.support.plans import capability, plan, step
from tests.support.tool_server import ToolReply


async def no_wait(seconds: float) -> None:
    return None


async def run_with(document: dict, telemetry: TelemetryRecorder) -> tuple[str, ListRecorder]:
    events = ListRecorder()
    try:
        outcome = await PlanExecutor(
            parse_plan(document), recorder=FanoutRecorder(events, telemetry), env={}, sleep=no_wait
        ).run()
    finally:
        assert telemetry.shutdown()
    assert telemetry.failures == []
    return outcome.execution_id, events


def corrected_plan(tool_server, llm_server) -> dict:
    """A 400 the analyzer corrects: one LLM call, two attempts."""
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
    return plan(
        tool_server.base_url,
        {"hotels": capability("hotels")},
        [step("step-1", "hotels", {"city_code": "PARIS"})],
        llm_base_url=llm_server.base_url,
    )


@pytest.fixture
def grpc_receiver() -> Iterator[OTLPGrpcReceiver]:
    with OTLPGrpcReceiver() as server:
        yield server


@pytest.fixture
def http_receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as server:
        yield server


# name, protocol variables, receiver kind, expected HTTP content type (None for gRPC)
PROTOCOL_CASES = [
    ("grpc", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc", None),
    ("grpc_per_signal", {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                         "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
                         "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"}, "grpc", None),
    ("http_protobuf", {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "http",
     "application/x-protobuf"),
    ("http_protobuf_default", {}, "http", "application/x-protobuf"),
    ("http_json", {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "http", "application/json"),
    ("http_json_per_signal", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                              "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
                              "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json"}, "http",
     "application/json"),
]


@pytest.mark.parametrize(("capture",), [(False,), (True,)], ids=["content_off", "content_on"])
@pytest.mark.parametrize(
    ("name", "variables", "kind", "content_type"),
    PROTOCOL_CASES,
    ids=[c[0] for c in PROTOCOL_CASES],
)
async def test_each_protocol_delivers_the_run_and_content_only_when_captured(
    name, variables, kind, content_type, capture, grpc_receiver, http_receiver, tool_server,
    llm_server,
):
    receiver: Any = grpc_receiver if kind == "grpc" else http_receiver
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, **variables}
    if capture:
        env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
    telemetry = telemetry_from_env(env)
    assert telemetry is not None

    execution_id, _ = await run_with(corrected_plan(tool_server, llm_server), telemetry)

    spans = {span.name: span for _, span in receiver.spans()}
    assert {"orchestrator.execution", "orchestrator.step.step-1", "execute_tool demo.hotels",
            "chat scripted-model"} <= spans.keys()
    assert {span.trace_id.hex() for _, span in receiver.spans()} == {
        trace_id_for_execution(execution_id)
    }
    llm = attributes_of(spans["chat scripted-model"].attributes)
    assert llm["openinference.span.kind"] == "LLM"
    assert llm["llm.token_count.prompt"] == llm["gen_ai.usage.input_tokens"] > 0
    content_keys = {"gen_ai.input.messages", "gen_ai.output.messages",
                    "gen_ai.system_instructions", "input.value", "output.value",
                    "llm.input_messages.0.message.content"}
    if capture:
        # The analyzer's prompt is one user message: no system instructions to report.
        assert content_keys - {"gen_ai.system_instructions"} <= llm.keys()
        (prompt,) = llm_server.prompts
        inputs = json.loads(llm["gen_ai.input.messages"])
        assert inputs[-1]["role"] == "user"
        assert inputs[-1]["parts"][0]["content"] in prompt
        output = json.loads(llm["gen_ai.output.messages"])
        assert json.loads(output[0]["parts"][0]["content"])["suggested_changes"] == {
            "city_code": "PAR"
        }
        tool = attributes_of(spans["execute_tool demo.hotels"].attributes)
        assert "gen_ai.tool.call.arguments" in tool and "gen_ai.tool.call.result" in tool
    else:
        assert not content_keys & llm.keys()
        for _, span in receiver.spans():
            attributes = attributes_of(span.attributes)
            assert "gen_ai.tool.call.arguments" not in attributes
            assert "input.value" not in attributes
    if kind == "grpc":
        assert grpc_receiver.exports("metrics"), "metrics also go over gRPC"
    else:
        assert http_receiver.metric_exports()
        for export in http_receiver.exports:
            assert export.headers["content-type"] == content_type


BAD_PROTOCOLS = [
    ("general", "OTEL_EXPORTER_OTLP_PROTOCOL", "grcp"),
    ("traces", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/xml"),
    ("metrics", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "thrift"),
]


@pytest.mark.parametrize(("name", "variable", "value"), BAD_PROTOCOLS,
                         ids=[c[0] for c in BAD_PROTOCOLS])
def test_an_unknown_protocol_is_one_error_naming_the_variable(name, variable, value):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", variable: value}
    with pytest.raises(TelemetryConfigError) as raised:
        telemetry_from_env(env)
    message = str(raised.value)
    assert message.startswith(f"{variable}={value!r}: expected one of grpc, http/protobuf, "
                              "http/json")
    assert "\n" not in message


@pytest.mark.parametrize("value", ["0", "-5", "abc", "1.5", "٣"])
def test_a_bad_metric_export_interval_is_one_error_naming_the_variable(value):
    # 0 reached the SDK's reader, whose ValueError was a traceback; a word was ignored.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
           "OTEL_METRIC_EXPORT_INTERVAL": value}
    with pytest.raises(TelemetryConfigError) as raised:
        telemetry_from_env(env)
    assert str(raised.value) == (
        f"OTEL_METRIC_EXPORT_INTERVAL={value!r}: expected a positive whole number of "
        "milliseconds; nothing was exported"
    )


NO_METRICS_BACKENDS = [("http_405", "http"), ("grpc_unimplemented", "grpc")]


@pytest.mark.parametrize(("name", "kind"), NO_METRICS_BACKENDS,
                         ids=[c[0] for c in NO_METRICS_BACKENDS])
async def test_a_backend_without_metrics_gets_one_warning_not_a_stream(
    name, kind, capfd
):
    receiver: Any = OTLPGrpcReceiver(metrics=False) if kind == "grpc" else OTLPReceiver(
        metrics=False
    )
    warnings: list[str] = []
    with receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc" if kind == "grpc" else "http/protobuf",
        }
        telemetry = telemetry_from_env(env, warn=warnings.append)
        assert telemetry is not None
        for event in small_execution("exec-no-metrics"):
            telemetry.record(event)
        for _ in range(3):  # three metric exports (cumulative points): the first closes the gate
            telemetry.meter_provider.force_flush()
        assert telemetry.shutdown()
        spans = receiver.span_names()

    assert "orchestrator.execution" in spans
    assert len(warnings) == 1
    assert "does not accept metrics" in warnings[0]
    assert "OTEL_METRICS_EXPORTER=none" in warnings[0]
    assert ("HTTP 405" if kind == "http" else "gRPC UNIMPLEMENTED") in warnings[0]
    if kind == "http":
        assert receiver.metrics_refusals == 1
    assert "Failed to export metrics" not in capfd.readouterr().err


def test_each_recorder_gets_its_own_no_metrics_warning():
    first_warnings: list[str] = []
    second_warnings: list[str] = []
    with OTLPReceiver(metrics=False) as first, OTLPReceiver(metrics=False) as second:
        stale = telemetry_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": first.endpoint},
                                   warn=first_warnings.append)
        assert stale is not None
        for event in small_execution("exec-stale"):
            stale.record(event)
        stale.meter_provider.force_flush()  # closes its gate; never shut down (as in a test)
        fresh = telemetry_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": second.endpoint},
                                   warn=second_warnings.append)
        assert fresh is not None
        for event in small_execution("exec-fresh"):
            fresh.record(event)
        assert fresh.shutdown()
        assert stale.shutdown()

    assert [second.endpoint in w for w in second_warnings] == [True]
    assert [first.endpoint in w for w in first_warnings] == [True]
