"""Executor events as OpenTelemetry: span tree, TruvaG3 span events and metrics, GenAI attributes.

Runs use the real `PlanExecutor` against scripted loopback tool and LLM servers, recorded into
in-memory span and metric exporters; a few cases use hand-built events.
"""

from __future__ import annotations

import base64
import decimal
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from executor.events import (
    AttemptDecided,
    AttemptDispatched,
    BackoffEvent,
    ExecutionStarted,
    FanoutRecorder,
    ListRecorder,
    LLMCall,
    StepFinished,
)
from executor.plan import parse_plan
from executor.runtime import ExecutionOutcome, PlanExecutor
from executor.telemetry import (
    PREVIEW_CHARS,
    TelemetryRecorder,
    build_spans_from_events,
    spans_to_otlp_json,
    telemetry_from_env,
    trace_id_for_execution,
)
from tests.support.events_factory import (
    SECRET,
    START_AT,
    ExecutionScript,
    decision,
    realistic_execution,
    small_execution,
)
from tests.support.llm_server import LLMReply, ScriptedLLMServer, computed_usage
from tests.support.otlp_receiver import OTLPReceiver
from tests.support.plans import capability, plan, step
from tests.support.tool_server import ScriptedToolServer, ToolReply

# Span attributes are ours (truva.*) or named by OTel / OpenInference conventions: no bare names.
OWN_OR_STANDARD = ("truva.", "gen_ai.", "openinference.", "session.id", "http.", "url.",
                   "server.", "error.type", "input.", "output.", "llm.", "tool.")


@dataclass
class Telemetry:
    """A recorder on in-memory providers, and what it produced."""

    recorder: TelemetryRecorder
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span

    def metric(self, name: str, **attributes: Any) -> float:
        """Sum of a counter's points, or count of a histogram's, whose attributes include these."""
        total = 0.0
        data = self.reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        if attributes.items() <= dict(point.attributes).items():
                            total += getattr(point, "value", None) or getattr(point, "count", 0)
        return total


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    recorder = TelemetryRecorder(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield Telemetry(recorder, exporter, reader)
    recorder.shutdown()


async def no_wait(seconds: float) -> None:
    return None


async def run(document: dict[str, Any], telemetry: Telemetry) -> ExecutionOutcome:
    outcome = await PlanExecutor(
        parse_plan(document), recorder=telemetry.recorder, env={}, sleep=no_wait
    ).run()
    assert telemetry.recorder.failures == []
    return outcome


def event_names(span: ReadableSpan) -> list[str]:
    return [event.name for event in span.events]


def event_of(span: ReadableSpan, name: str) -> dict[str, Any]:
    (found,) = [dict(event.attributes or {}) for event in span.events if event.name == name]
    return found


def attempt_spans(telemetry: Telemetry, tool_name: str) -> list[ReadableSpan]:
    return sorted(
        telemetry.named(f"execute_tool {tool_name}"),
        key=lambda span: span.attributes["truva.attempt.n"],
    )


def every_string(spans: list[ReadableSpan]) -> Iterator[tuple[str, str]]:
    """(where, text) for every string in a span's name, attributes and event attributes."""
    for span in spans:
        yield span.name, span.name
        sources = [(span.name, span.attributes or {})]
        sources += [(f"{span.name}/{event.name}", event.attributes or {}) for event in span.events]
        for where, attributes in sources:
            for key, value in attributes.items():
                for item in value if isinstance(value, tuple) else (value,):
                    if isinstance(item, str):
                        yield f"{where}:{key}", item


def analysis(should_retry: bool, changes: dict | None = None, reason: str = "scripted") -> str:
    return json.dumps(
        {
            "should_retry": should_retry,
            "reason": reason,
            "suggested_changes": changes or {},
            "is_transient_error": False,
        }
    )


# ---------------------------------------------------------------------------- span tree


async def test_a_retried_503_is_a_tree_of_execution_step_and_attempt_spans(tool_server, telemetry):
    tool_server.script(
        "/capabilities/quote", ToolReply.error(503, "DOWN", "busy"), ToolReply.ok({"price": 1})
    )
    outcome = await run(
        plan(
            tool_server.base_url,
            {"quote": capability("quote")},
            [step("step-1", "quote", {"symbol": "TSLA"})],
        ),
        telemetry,
    )

    root = telemetry.one("orchestrator.execution")
    step_span = telemetry.one("orchestrator.step.step-1")
    first, second = attempt_spans(telemetry, "demo.quote")
    assert root.parent is None
    assert step_span.parent.span_id == root.context.span_id
    assert {first.parent.span_id, second.parent.span_id} == {step_span.context.span_id}
    assert len(telemetry.spans()) == 4
    assert root.attributes["truva.execution.id"] == outcome.execution_id
    assert root.attributes["truva.execution.status"] == "succeeded"
    assert event_names(root) == ["plan_execution_started", "plan_execution_completed"]
    assert event_of(root, "plan_execution_completed")["total_steps"] == 1

    assert first.attributes["gen_ai.operation.name"] == "execute_tool"
    assert first.attributes["gen_ai.tool.name"] == "demo.quote"
    assert first.attributes["truva.decision.action"] == "retry_same"
    assert first.attributes["truva.decision.rule_id"] == "transient.retry_same"
    assert first.attributes["http.response.status_code"] == 503
    assert first.attributes["error.type"] == "503"
    assert first.attributes["truva.delay_source"] == "backoff"
    assert first.attributes["truva.delay"] == pytest.approx(0.001, abs=0.0002)
    assert first.attributes["url.full"] == tool_server.url("/capabilities/quote")
    assert first.status.status_code is StatusCode.ERROR
    assert second.attributes["truva.decision.action"] == "success"
    assert second.attributes["http.request.resend_count"] == 1
    assert "error.type" not in second.attributes
    assert second.status.status_code is StatusCode.UNSET

    assert step_span.attributes["truva.step.id"] == "step-1"
    assert step_span.attributes["truva.step.tool"] == "demo"
    assert step_span.attributes["truva.step.capability"] == "quote"
    assert step_span.attributes["truva.step.success"] is True
    assert step_span.attributes["truva.step.attempts"] == 2
    assert not [key for key in step_span.attributes if not key.startswith(OWN_OR_STANDARD)]
    assert step_span.attributes["truva.dispatch_count"] == 2
    assert step_span.attributes["truva.step.status"] == "succeeded"
    assert event_names(step_span) == [
        "step_execution_started",
        "step.retry.backoff",
        "step_execution_completed",
    ]
    backoff = event_of(step_span, "step.retry.backoff")
    assert (backoff["attempt"], backoff["strategy"]) == (1, "exponential")

    assert (
        telemetry.metric("truva.decisions", action="retry_same", rule_id="transient.retry_same")
        == 1
    )
    assert telemetry.metric("truva.decisions", action="success", rule_id="success.2xx") == 1
    assert telemetry.metric("truva.dispatches", capability="quote") == 2
    assert telemetry.metric("truva.backoff.wait", outcome="finished") == 1


# ---------------------------------------------------------------- TruvaG3 events and metrics


@dataclass(frozen=True)
class Scenario:
    """A run, the span events expected on named spans, and the counters expected."""

    tool_replies: dict[str, tuple[ToolReply, ...]]
    steps: list[dict[str, Any]]
    span_events: dict[str, list[str]]
    counters: dict[tuple[str, tuple[tuple[str, Any], ...]], float]
    llm_replies: tuple[str | LLMReply, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    schema: dict[str, Any] | None = None
    absent_spans: tuple[str, ...] = ()


def labels(**attributes: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(attributes.items())


ORCH = {"module": "orchestration"}
SCENARIOS = [
    ("explicit_false_stops_non_retryable", Scenario(
        tool_replies={"/capabilities/pay": (
            ToolReply.error(500, "DECLINED", "card declined", "SERVICE_ERROR", retryable=False),)},
        steps=[step("step-1", "pay", {"amount": 5})],
        span_events={"execute_tool demo.pay": ["non_retryable_error_detected"]},
        counters={("orchestration.non_retryable_errors", labels(**ORCH, capability="pay")): 1,
                  ("truva.decisions", labels(action="stop_refused",
                                             rule_id="refused.explicit_false")): 1},
    )),
    ("analyzer_corrects_a_400", Scenario(
        tool_replies={"/capabilities/pay": (
            ToolReply.error(400, "BAD_CITY", "unknown city Tokio", "INPUT_ERROR"),
            ToolReply.ok({"ok": True}))},
        steps=[step("step-1", "pay", {"city": "Tokio"})],
        llm_replies=(analysis(True, {"city": "Tokyo"}, "Tokio is a typo"),),
        span_events={"execute_tool demo.pay": [
            "error_analyzer.llm_call_start", "error_analyzer.llm_call_completed",
            "error_analyzer.analysis_complete", "llm_error_analysis_retry"]},
        counters={("orchestration.error_analysis.retry",
                   labels(**ORCH, capability="pay", http_status=400)): 1,
                  ("orchestration.error_analysis.no_retry", ()): 0,
                  ("orchestration.error_analyzer.llm_latency_ms", labels(capability="pay")): 1,
                  ("truva.decisions", labels(action="retry_corrected",
                                             rule_id="analyzer.accept")): 1},
    )),
    ("analyzer_cannot_fix_then_re_resolution", Scenario(
        tool_replies={"/capabilities/pay": (
            ToolReply.error(400, "BAD_AMOUNT", "amount must be in cents", "INPUT_ERROR"),
            ToolReply.ok({"ok": True}))},
        steps=[step("step-1", "pay", {"amount": 1.5})],
        llm_replies=(analysis(False, reason="needs the original amount"),
                     json.dumps({"should_retry": True, "analysis": "1.5 EUR is 150 cents",
                                 "corrected_parameters": {"amount": 150}})),
        span_events={"execute_tool demo.pay": [
            "error_analyzer.llm_call_start", "error_analyzer.llm_call_completed",
            "error_analyzer.analysis_complete", "llm_error_analysis_no_retry",
            "contextual_re_resolution.start", "contextual_re_resolution.complete",
            "semantic_retry_applied"]},
        counters={("orchestration.error_analysis.no_retry",
                   labels(**ORCH, capability="pay", http_status=400)): 1,
                  ("orchestration.semantic_retry.applied", labels(**ORCH, capability="pay")): 1,
                  ("orchestration.semantic_retry.independent_step", labels(capability="pay")): 1,
                  ("orchestration.semantic_retry.llm_latency_ms", labels(capability="pay")): 1},
    )),
    ("legacy_callback_corrects", Scenario(
        tool_replies={"/capabilities/geo": (
            ToolReply(status=400, body="json: cannot unmarshal string into Go struct field "
                                       ".lat of type float64"),
            ToolReply.ok({"ok": True}))},
        steps=[step("step-1", "geo", {"lat": "35.6897 N"})],
        config={"error_analyzer_enabled": False},
        llm_replies=('{"lat": 35.6897}',),
        span_events={"execute_tool demo.geo": [
            "validation_feedback_started", "validation_feedback_success"]},
        counters={("orchestration.validation_feedback.attempts", labels(capability="geo")): 1,
                  ("orchestration.validation_feedback.success", labels(capability="geo")): 1,
                  ("orchestration.validation_feedback.failed", ()): 0},
    )),
    ("legacy_callback_fails", Scenario(
        tool_replies={"/capabilities/geo": (
            ToolReply(status=400, body="json: cannot unmarshal string into Go struct field "
                                       ".lat of type float64"),)},
        steps=[step("step-1", "geo", {"lat": "35.6897 N"})],
        config={"error_analyzer_enabled": False},
        llm_replies=("I cannot help with that",),
        span_events={"execute_tool demo.geo": [
            "validation_feedback_started", "validation_feedback_failed"]},
        counters={("orchestration.validation_feedback.failed",
                   labels(capability="geo", reason="llm_correction_failed")): 1},
    )),
    ("coercion_applied", Scenario(
        tool_replies={"/capabilities/geo": (ToolReply.ok({"ok": True}),)},
        steps=[step("step-1", "geo", {"count": "5"})],
        schema={"type": "object", "properties": {"count": {"type": "integer"}}},
        span_events={"orchestrator.step.step-1": [
            "step_execution_started", "type_coercion_applied", "step_execution_completed"]},
        counters={("orchestration.type_coercion.applied", labels(**ORCH, capability="geo")): 1},
    )),
    ("dependency_skipped", Scenario(
        tool_replies={"/capabilities/geo": (
            ToolReply.error(401, "AUTH", "invalid key", "AUTH_ERROR"),)},
        steps=[step("step-1", "geo", {"q": 1}),
               step("step-2", "geo", {"q": 2}, depends_on=["step-1"])],
        span_events={"orchestrator.execution": [
            "plan_execution_started", "truva.llm.no_api_key", "executor.step.skipped_dependency",
            "plan_execution_completed"]},
        counters={("orchestration.step.skipped",
                   labels(**ORCH, reason="failed_dependency", blocking_reason="explicit_dep")): 1,
                  ("truva.decisions", labels(action="stop_terminal",
                                             rule_id="terminal.auth_or_method")): 1},
        absent_spans=("orchestrator.step.step-2",),
    )),
    ("tool_contract_warning", Scenario(
        tool_replies={"/capabilities/geo": (
            ToolReply(status=200, body={"success": False, "error": {"code": "E"}}),)},
        steps=[step("step-1", "geo", {"q": 1})],
        span_events={"execute_tool demo.geo": ["truva.tool_contract.success_false_on_2xx"]},
        counters={("truva.decisions", labels(action="success", rule_id="success.2xx")): 1},
    )),
]  # fmt: skip


@pytest.mark.parametrize(("name", "scenario"), SCENARIOS, ids=[name for name, _ in SCENARIOS])
async def test_truvag3_span_events_and_metrics(
    name: str,
    scenario: Scenario,
    tool_server: ScriptedToolServer,
    llm_server: ScriptedLLMServer,
    telemetry: Telemetry,
) -> None:
    for path, replies in scenario.tool_replies.items():
        tool_server.script(path, *replies)
    llm_server.script(*scenario.llm_replies)
    capabilities = {
        s["capability"]: capability(s["capability"], schema=scenario.schema) for s in scenario.steps
    }
    await run(
        plan(
            tool_server.base_url,
            capabilities,
            scenario.steps,
            config=scenario.config,
            llm_base_url=llm_server.base_url,
        ),
        telemetry,
    )
    assert llm_server.pending() == 0
    for span_name, expected in scenario.span_events.items():
        spans = telemetry.named(span_name)
        assert spans, f"no span named {span_name}"
        assert event_names(spans[0]) == expected
    for (metric, attributes), expected in scenario.counters.items():
        assert telemetry.metric(metric, **dict(attributes)) == expected, metric
    for span_name in scenario.absent_spans:
        assert telemetry.named(span_name) == []


async def test_truvag3_event_attributes_of_an_analyzer_correction(
    tool_server, llm_server, telemetry
):
    tool_server.script(
        "/capabilities/pay",
        ToolReply.error(400, "BAD_CITY", "unknown city Tokio", "INPUT_ERROR"),
        ToolReply.ok({"ok": True}),
    )
    llm_server.script(analysis(True, {"city": "Tokyo"}, "Tokio is a typo"))
    await run(
        plan(
            tool_server.base_url,
            {"pay": capability("pay")},
            [step("step-1", "pay", {"city": "Tokio"})],
            llm_base_url=llm_server.base_url,
        ),
        telemetry,
    )
    first, second = attempt_spans(telemetry, "demo.pay")
    retry = event_of(first, "llm_error_analysis_retry")
    assert retry["step_id"] == "step-1"
    assert retry["capability"] == "pay"
    assert retry["http_status"] == 400
    assert retry["reason"] == "Tokio is a typo"
    assert json.loads(retry["suggested_changes"]) == {"city": "Tokyo"}
    assert retry["suggested_changes_count"] == 1
    assert "unknown city Tokio" in retry["error_response"]
    assert first.attributes["truva.decision.layer"] == "analyzer"
    assert second.attributes["truva.correction_layer"] == "analyzer"
    assert second.attributes["truva.attempt.number"] == 1  # the attempt-- rule


def test_a_cancelled_backoff_is_a_span_event_and_a_wait_point(telemetry):
    script = ExecutionScript("exec-cancelled")
    script.start({"query": "q", "steps": [{"id": "step-1"}]})
    script.step_started(
        {"id": "step-1", "tool": "t", "capability": "c", "depends_on": [], "parameters": {}}
    )
    script.attempt(
        {"id": "step-1", "capability": "c"},
        1,
        parameters={},
        status=503,
        response_body=b"{}",
        decided=decision(
            "retry_same",
            "transient.retry_same",
            "HTTP 503 is transient",
            delay_ms=542.0735,
            delay_source="backoff",
            status=503,
        ),
    )
    for phase, actual_ms in (("started", None), ("cancelled", 12.5)):
        script.events.append(
            BackoffEvent(
                execution_id=script.execution_id,
                step_id="step-1",
                n=1,
                at=script.tick(),
                phase=phase,
                planned_ms=542.0735,
                source="backoff",
                actual_ms=actual_ms,
            )
        )
    script.step_finished("step-1", "failed", final_action="stop_cancelled")
    script.finish("cancelled", incomplete=("step-1",), stop_reason="cancelled")
    for event in script.events:
        telemetry.recorder.record(event)

    step_span = telemetry.one("orchestrator.step.step-1")
    cancelled = event_of(step_span, "truva.backoff.cancelled")
    assert (cancelled["planned_ms"], cancelled["actual_ms"]) == (542.0735, 12.5)
    assert telemetry.metric("truva.backoff.wait", outcome="cancelled") == 1
    root = telemetry.one("orchestrator.execution")
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["truva.stop_reason"] == "cancelled"


def test_a_recorded_execution_places_notices_skips_and_circuit_changes(telemetry):
    for event in realistic_execution("exec-realistic"):
        telemetry.recorder.record(event)
    assert telemetry.recorder.failures == []
    root = telemetry.one("orchestrator.execution")
    assert event_names(root) == [
        "plan_execution_started",
        "truva.step.skipped",
        "circuit_breaker.state_changed",
        "plan_execution_completed",
    ]
    circuit = event_of(root, "circuit_breaker.state_changed")
    assert (circuit["breaker"], circuit["from_state"], circuit["to_state"]) == (
        "billing",
        "closed",
        "open",
    )
    (rejected,) = telemetry.named("execute_tool geo.lookup")
    assert rejected.attributes["truva.dispatched"] is False
    assert rejected.attributes["error.type"] == "reject_predispatch"
    assert rejected.attributes["truva.decision.rule_id"] == "guard.reject_predispatch"
    assert event_names(telemetry.one("orchestrator.step.step-5")) == [
        "step_execution_started",
        "truva.guard.rejected",
        "step_execution_completed",
    ]
    assert telemetry.one("orchestrator.step.step-3").status.status_code is StatusCode.ERROR
    assert telemetry.metric("orchestration.step.skipped", reason="other") == 1


def test_record_never_raises_and_keeps_the_failure(telemetry):
    broken = AttemptDecided(
        execution_id="exec-x",
        step_id="step-1",
        n=1,
        at=START_AT,
        dispatched=True,
        parameters={},
        decision=None,
    )  # type: ignore[arg-type]
    script = ExecutionScript("exec-x")
    script.start({"query": "q", "steps": []})
    script.step_started(
        {"id": "step-1", "tool": "t", "capability": "c", "depends_on": [], "parameters": {}}
    )
    for event in [*script.events, broken]:
        telemetry.recorder.record(event)
    (failure,) = telemetry.recorder.failures
    assert failure.startswith("AttemptDecided: AttributeError")


# ---------------------------------------------------------------------------- GenAI / LLM


async def test_an_llm_call_is_a_genai_inference_span_under_its_attempt(
    tool_server, llm_server, telemetry
):
    tool_server.script(
        "/capabilities/pay",
        ToolReply.error(400, "BAD_CITY", "unknown city Tokio", "INPUT_ERROR"),
        ToolReply.ok({"ok": True}),
    )
    answer = analysis(True, {"city": "Tokyo"})
    llm_server.script(answer)
    await run(
        plan(
            tool_server.base_url,
            {"pay": capability("pay")},
            [step("step-1", "pay", {"city": "Tokio"})],
            llm_base_url=llm_server.base_url,
        ),
        telemetry,
    )

    llm_span = telemetry.one("chat scripted-model")
    first, _ = attempt_spans(telemetry, "demo.pay")
    usage = computed_usage(llm_server.prompts[0], answer)
    assert llm_span.kind is SpanKind.CLIENT
    assert llm_span.parent.span_id == first.context.span_id
    expected = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "scripted-model",
        "gen_ai.request.temperature": 0.0,
        "gen_ai.request.max_tokens": 500,
        "gen_ai.usage.input_tokens": usage["prompt_tokens"],
        "gen_ai.usage.output_tokens": usage["completion_tokens"],
        "gen_ai.response.model": "scripted-model",
        "gen_ai.response.id": "chatcmpl-scripted-1",
        "gen_ai.response.finish_reasons": ("stop",),
        "server.address": "127.0.0.1",
        "server.port": llm_server.port,
        "truva.llm.site": "error_analysis",
        "truva.llm.should_retry": True,
    }
    assert {key: llm_span.attributes.get(key) for key in expected} == expected
    assert "error.type" not in llm_span.attributes
    assert llm_span.start_time <= llm_span.end_time
    assert telemetry.metric("gen_ai.client.token.usage", **{"gen_ai.token.type": "input"}) == 1
    assert telemetry.metric("gen_ai.client.operation.duration") == 1


async def test_no_full_prompt_in_any_attribute(tool_server, llm_server, telemetry):
    tool_server.script(
        "/capabilities/pay",
        ToolReply.error(400, "BAD_CITY", "unknown city Tokio", "INPUT_ERROR"),
        ToolReply.ok({"ok": True}),
    )
    llm_server.script(analysis(True, {"city": "Tokyo"}))
    await run(
        plan(
            tool_server.base_url,
            {"pay": capability("pay")},
            [step("step-1", "pay", {"city": "Tokio"})],
            llm_base_url=llm_server.base_url,
        ),
        telemetry,
    )
    (prompt,) = llm_server.prompts
    assert len(prompt) > PREVIEW_CHARS
    for where, text in every_string(telemetry.spans()):
        assert prompt not in text, where
        assert len(text) <= PREVIEW_CHARS + len("..."), where
    prompt_preview = telemetry.one("chat scripted-model").attributes["truva.llm.prompt_preview"]
    assert prompt_preview.endswith("...")
    assert prompt_preview[:-3] in prompt


LLM_FAILURES = [
    ("http_500", dict(response_status=500, error="LLM endpoint answered HTTP 500: boom"), "500"),
    ("timeout", dict(response_status=None, error="LLM request timed out after 5 s"), "timeout"),
    ("connection", dict(response_status=None,
                        error="LLM connection to http://127.0.0.1:9/v1 failed: ConnectError"),
     "connection_error"),
    ("body_not_json", dict(response_status=200, error="LLM response body is not JSON: x"),
     "invalid_response"),
    ("no_error", dict(response_status=200, error=None), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "fields", "error_type"), LLM_FAILURES, ids=[case[0] for case in LLM_FAILURES]
)
def test_a_failed_llm_call_names_its_error_type(name, fields, error_type, telemetry):
    events = realistic_execution("exec-llm")
    index = next(i for i, e in enumerate(events) if isinstance(e, LLMCall))
    events[index] = replace(events[index], **fields)
    for event in events:
        telemetry.recorder.record(event)
    llm_span = telemetry.one("chat gpt-test")
    assert llm_span.attributes.get("error.type") == error_type
    failed = error_type is not None
    assert (llm_span.status.status_code is StatusCode.ERROR) is failed
    assert telemetry.metric("orchestration.error_analyzer.llm_errors") == int(failed)


# ----------------------------------------------------------------------------- redaction


def test_a_secret_in_a_url_query_is_redacted_everywhere(telemetry):
    events = realistic_execution("exec-secret")
    index = next(i for i, e in enumerate(events) if isinstance(e, AttemptDispatched))
    url = f"http://127.0.0.1:8101/capabilities/forecast?city=Paris&api_key={SECRET}"
    events[index] = replace(events[index], url=url)
    for event in events:
        telemetry.recorder.record(event)
    first = attempt_spans(telemetry, "weather.forecast")[0]
    assert first.attributes["url.full"] == (
        "http://127.0.0.1:8101/capabilities/forecast?city=Paris&api_key=[REDACTED]"
    )
    leaks = [where for where, text in every_string(telemetry.spans()) if SECRET in text]
    assert leaks == []


# Credential shapes with no secret-ish name next to them: only value-based detection finds them.
SHAPED_SECRETS = (
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
)


@pytest.mark.parametrize("capture_content", [False, True], ids=["previews", "content_capture"])
def test_credential_shapes_in_a_query_and_a_step_error_never_reach_a_span(capture_content):
    """As a trace bundle's spans are redacted: by name and by value, whatever the place."""
    shaped = " and ".join(SHAPED_SECRETS)
    events = realistic_execution("exec-shapes")
    for index, event in enumerate(events):
        if isinstance(event, ExecutionStarted):
            events[index] = replace(event, query=f"use {shaped}")
        elif isinstance(event, StepFinished) and event.error:
            events[index] = replace(event, error=f"upstream said {shaped}")
    assert any(isinstance(e, StepFinished) and e.error for e in events)
    spans = build_spans_from_events(events, capture_content=capture_content)
    leaks = [(where, secret[:8]) for where, text in every_string(spans)
             for secret in SHAPED_SECRETS if secret in text]
    assert leaks == []
    statuses = [s.status.description or "" for s in spans]
    assert not [d for d in statuses for secret in SHAPED_SECRETS if secret in d]


# ------------------------------------------------------------------------ timing and ids


def test_span_times_are_the_event_times():
    # To the microsecond, rounded as the store rounds (`round(at * 1000000)` in DuckDB, halves
    # away from zero), so spans rebuilt from the store carry the same times.
    def stored_ns(at: float) -> int:
        return int(decimal.Decimal(at * 1e6).quantize(0, decimal.ROUND_HALF_UP)) * 1000

    events = small_execution("exec-times", steps=1)
    started, finished = events[0], events[-1]
    dispatched = [e for e in events if isinstance(e, AttemptDispatched)]
    decided = [e for e in events if isinstance(e, AttemptDecided)]
    spans = build_spans_from_events(events)
    (root,) = [span for span in spans if span.name == "orchestrator.execution"]
    attempts = sorted(
        (s for s in spans if s.name.startswith("execute_tool ")), key=lambda span: span.start_time
    )
    assert (root.start_time, root.end_time) == (
        stored_ns(started.started_at),
        stored_ns(finished.finished_at),
    )
    assert [(s.start_time, s.end_time) for s in attempts] == [
        (stored_ns(sent.at), stored_ns(done.at))
        for sent, done in zip(dispatched, decided, strict=True)
    ]


@pytest.mark.parametrize("micros", [1796412236421736.5, 1796412236421736.25,
                                    1796412236421736.75, 0.5, 2.5])
def test_to_ns_rounds_halves_away_from_zero_as_duckdb(micros: float):
    import duckdb

    from executor.telemetry.attributes import to_ns

    at = micros / 1e6
    (stored,) = duckdb.execute("SELECT CAST(round(? * 1000000) AS BIGINT)", [at]).fetchone()
    assert to_ns(at) == stored * 1000


def test_built_spans_share_the_execution_trace_id():
    first_build = build_spans_from_events(realistic_execution("exec-trace"))
    second_build = build_spans_from_events(realistic_execution("exec-trace"))
    expected = int(trace_id_for_execution("exec-trace"), 16)
    assert {span.context.trace_id for span in first_build + second_build} == {expected}
    assert len(first_build) == 12


def test_an_unfinished_run_is_ended_and_marked_interrupted():
    spans = build_spans_from_events(realistic_execution("exec-open", finish=False))
    (root,) = [span for span in spans if span.name == "orchestrator.execution"]
    assert root.attributes["truva.interrupted"] is True
    assert root.status.status_code is StatusCode.ERROR
    assert root.end_time >= max(span.end_time for span in spans if span is not root)


async def test_a_live_run_and_its_rebuilt_spans_have_the_same_shape(tool_server, telemetry):
    tool_server.script(
        "/capabilities/quote", ToolReply.error(503, "DOWN", "busy"), ToolReply.ok({"price": 1})
    )
    events = ListRecorder()
    document = plan(
        tool_server.base_url,
        {"quote": capability("quote")},
        [step("step-1", "quote", {"symbol": "TSLA"})],
    )
    await PlanExecutor(
        parse_plan(document),
        recorder=FanoutRecorder(events, telemetry.recorder),
        env={},
        sleep=no_wait,
    ).run()

    def shape(spans: list[ReadableSpan]) -> list[tuple]:
        names = {span.context.span_id: span.name for span in spans}
        return sorted(
            (
                span.name,
                names.get(span.parent.span_id) if span.parent else None,
                span.start_time,
                span.end_time,
                tuple(event_names(span)),
            )
            for span in spans
        )

    assert shape(build_spans_from_events(events.events)) == shape(telemetry.spans())


# --------------------------------------------------------------------------------- OTLP JSON

HEX_32 = re.compile(r"^[0-9a-f]{32}$")
HEX_16 = re.compile(r"^[0-9a-f]{16}$")


def test_otlp_json_document_shape():
    spans = build_spans_from_events(realistic_execution("exec-json"))
    document = spans_to_otlp_json(spans)
    assert json.loads(json.dumps(document)) == document
    (resource_spans,) = document["resourceSpans"]
    resource = {a["key"]: a["value"] for a in resource_spans["resource"]["attributes"]}
    assert resource["service.name"] == {"stringValue": "truva-console"}
    (scope_spans,) = resource_spans["scopeSpans"]
    assert scope_spans["scope"]["name"] == "truva-console.executor"
    encoded = scope_spans["spans"]
    assert len(encoded) == len(spans)
    by_id = {int(s["spanId"], 16): s for s in encoded}
    for span in spans:
        item = by_id[span.context.span_id]
        assert HEX_32.match(item["traceId"]) and HEX_16.match(item["spanId"])
        assert item["traceId"] == trace_id_for_execution("exec-json")
        assert item["startTimeUnixNano"] == str(span.start_time)
        assert item["endTimeUnixNano"] == str(span.end_time)
        assert item["name"] == span.name
        if span.parent is None:
            assert "parentSpanId" not in item
        else:
            assert item["parentSpanId"] == format(span.parent.span_id, "016x")
    root = next(s for s in encoded if s["name"] == "orchestrator.execution")
    attributes = {a["key"]: a["value"] for a in root["attributes"]}
    assert attributes["truva.plan.step_count"] == {"intValue": "5"}
    assert root["kind"] == 1 and root["status"]["code"] == 2
    assert all(event["timeUnixNano"].isdigit() for event in root["events"])


def test_otlp_json_decodes_back_to_the_exported_protobuf():
    spans = build_spans_from_events(realistic_execution("exec-roundtrip"))
    document = spans_to_otlp_json(spans)

    def ids_to_base64(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: base64.b64encode(bytes.fromhex(item)).decode()
                if key in ("traceId", "spanId", "parentSpanId")
                else ids_to_base64(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [ids_to_base64(item) for item in value]
        return value

    decoded = ParseDict(ids_to_base64(document), ExportTraceServiceRequest())
    assert decoded == encode_spans(spans)


def test_no_spans_is_an_empty_document():
    assert spans_to_otlp_json([]) == {"resourceSpans": []}


# ------------------------------------------------------------------------------ environment

ENV_CASES = [
    ("nothing_set", {}, False),
    ("base_endpoint", {"OTEL_EXPORTER_OTLP_ENDPOINT": "{endpoint}"}, True),
    ("traces_endpoint", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "{endpoint}/v1/traces"}, True),
    ("metrics_endpoint", {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "{endpoint}/v1/metrics"}, True),
    ("empty_endpoint", {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
    ("sdk_disabled", {"OTEL_EXPORTER_OTLP_ENDPOINT": "{endpoint}", "OTEL_SDK_DISABLED": "TRUE"},
     False),
    ("sdk_not_disabled", {"OTEL_EXPORTER_OTLP_ENDPOINT": "{endpoint}",
                          "OTEL_SDK_DISABLED": "false"}, True),
    ("both_exporters_none", {"OTEL_EXPORTER_OTLP_ENDPOINT": "{endpoint}",
                             "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
     False),
    ("unrelated_otel_variable", {"OTEL_SERVICE_NAME": "checkout"}, False),
]  # fmt: skip


@pytest.mark.parametrize(("name", "env", "enabled"), ENV_CASES, ids=[c[0] for c in ENV_CASES])
def test_telemetry_from_env_is_enabled_only_by_an_endpoint(name, env, enabled):
    with OTLPReceiver() as receiver:
        resolved = {key: value.format(endpoint=receiver.endpoint) for key, value in env.items()}
        recorder = telemetry_from_env(resolved)
        assert (recorder is not None) is enabled
        if recorder is not None:
            recorder.shutdown()


# ------------------------------------------------------- GenAI semconv, OpenInference, content


def _semconv_gen_ai_names() -> set[str]:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes

    return {
        value for name, value in vars(gen_ai_attributes).items()
        if name.startswith("GEN_AI_") and isinstance(value, str)
    }


CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "input.value",
                "output.value")


def _all_attributes(spans: list[ReadableSpan]) -> Iterator[tuple[ReadableSpan, str, Any]]:
    for span in spans:
        for key, value in (span.attributes or {}).items():
            yield span, key, value


async def test_a_capability_description_is_redacted_in_the_live_spans(tool_server, telemetry):
    # The live spans carried the plan's description verbatim; a bundle's spans had it redacted.
    secret = "sk-proj-DESCabcDEF1234567890ghijKLMNOP"
    tool_server.script("/capabilities/pay", ToolReply.ok({"ok": True}))
    await run(
        plan(
            tool_server.base_url,
            {"pay": capability("pay", description=f"Pay for a trip with key {secret}")},
            [step("step-1", "pay", {"city": "Tokyo"})],
        ),
        telemetry,
    )
    (attempt,) = attempt_spans(telemetry, "demo.pay")
    for key in ("gen_ai.tool.description", "tool.description"):
        assert attempt.attributes[key] == "Pay for a trip with key [REDACTED]"
    assert not [key for _, key, value in _all_attributes(telemetry.spans())
                if isinstance(value, str) and secret in value]


async def test_spans_follow_genai_semconv_and_openinference(tool_server, llm_server, telemetry):
    tool_server.script(
        "/capabilities/pay",
        ToolReply.error(400, "BAD_CITY", "unknown city Tokio", "INPUT_ERROR"),
        ToolReply.ok({"ok": True}),
    )
    llm_server.script(analysis(True, {"city": "Tokyo"}))
    outcome = await run(
        plan(
            tool_server.base_url,
            {"pay": capability("pay", description="Pay for a trip")},
            [step("step-1", "pay", {"city": "Tokio"})],
            llm_base_url=llm_server.base_url,
        ),
        telemetry,
    )
    execution_id = outcome.execution_id
    root = telemetry.one("orchestrator.execution")
    step_span = telemetry.one("orchestrator.step.step-1")
    first, second = attempt_spans(telemetry, "demo.pay")
    llm_span = telemetry.one("chat scripted-model")

    assert root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert root.attributes["gen_ai.workflow.name"] == "plan"
    assert [s.attributes["openinference.span.kind"] for s in (root, step_span, first, llm_span)] \
        == ["CHAIN", "CHAIN", "TOOL", "LLM"]
    assert {s.attributes["session.id"] for s in telemetry.spans()} == {execution_id}
    assert first.attributes["gen_ai.tool.call.id"] == f"{execution_id}:step-1:1"
    assert second.attributes["gen_ai.tool.call.id"] == f"{execution_id}:step-1:2"
    assert first.attributes["gen_ai.tool.description"] == "Pay for a trip"
    assert first.attributes["tool.description"] == "Pay for a trip"
    assert "gen_ai.output.type" not in llm_span.attributes  # no JSON output format was requested
    assert llm_span.attributes["llm.token_count.total"] == (
        llm_span.attributes["llm.token_count.prompt"]
        + llm_span.attributes["llm.token_count.completion"]
    )
    assert step_span.attributes["truva.step.duration"] == pytest.approx(
        (step_span.end_time - step_span.start_time) / 1e9, abs=1e-5
    )
    assert llm_span.attributes["truva.llm.duration"] < 5
    semconv = _semconv_gen_ai_names()
    used = {key for _, key, _ in _all_attributes(telemetry.spans()) if key.startswith("gen_ai.")}
    assert used and used <= semconv, used - semconv
    assert not [
        (span.name, key) for span, key, _ in _all_attributes(telemetry.spans())
        if not key.startswith(OWN_OR_STANDARD)
    ]
    assert not [key for _, key, _ in _all_attributes(telemetry.spans()) if key in CONTENT_KEYS]


def test_message_content_is_captured_only_when_switched_on_redacted_and_capped():
    from executor.telemetry import CONTENT_CHARS

    long_tail = " and more" * (CONTENT_CHARS // 5)
    events = realistic_execution("exec-content", prompt_extra=f" api_key={SECRET}{long_tail}")
    (llm_event,) = [e for e in events if isinstance(e, LLMCall)][:1]

    off = build_spans_from_events(events)
    on = build_spans_from_events(events, capture_content=True)

    assert not [key for _, key, _ in _all_attributes(off) if key in CONTENT_KEYS]
    (llm_span,) = [s for s in on if s.attributes.get("truva.llm.call_id") == llm_event.call_id]
    system = json.loads(llm_span.attributes["gen_ai.system_instructions"])
    assert system == [{"type": "text", "content": llm_event.messages[0]["content"]}]
    (user,) = json.loads(llm_span.attributes["gen_ai.input.messages"])
    text = user["parts"][0]["content"]
    assert user["role"] == "user"
    marker = f"…[truncated: {CONTENT_CHARS} of "
    assert marker in text
    assert text.endswith(f"the whole text is in the debug store, llm_calls {llm_event.call_id}]")
    assert len(text) < CONTENT_CHARS + 200
    assert llm_span.attributes["llm.input_messages.1.message.content"] == text
    assert llm_span.attributes["llm.input_messages.0.message.role"] == "system"
    (answer,) = json.loads(llm_span.attributes["gen_ai.output.messages"])
    assert answer["parts"][0]["content"] == llm_event.raw_text
    assert llm_span.attributes["output.value"] == llm_event.raw_text
    for where, value in every_string(on):
        assert SECRET not in value, where
    tools = [s for s in on if s.name.startswith("execute_tool ")]
    assert all("gen_ai.tool.call.arguments" in s.attributes for s in tools
               if s.attributes.get("truva.dispatched"))


def test_span_ids_derive_from_the_recorded_ids():
    from executor.telemetry import span_id_for

    events = realistic_execution("exec-ids")
    first = build_spans_from_events(events)
    again = build_spans_from_events(events, capture_content=True)

    assert [s.context.span_id for s in first] == [s.context.span_id for s in again]
    ids = {s.name: format(s.context.span_id, "016x") for s in first}
    assert ids["orchestrator.execution"] == span_id_for("exec-ids", "execution")
    assert ids["orchestrator.step.step-1"] == span_id_for("exec-ids", "step", "step-1")
    assert len({s.context.span_id for s in first}) == len(first)  # no collisions
    other = build_spans_from_events(realistic_execution("exec-ids-2"))
    assert not {s.context.span_id for s in first} & {s.context.span_id for s in other}


def test_otel_attributes_keep_scalars_and_their_subclasses_and_make_the_rest_text():
    import enum

    from executor.telemetry.attributes import otel_attributes

    class Level(enum.StrEnum):
        HIGH = "high"

    class Count(enum.IntEnum):
        ONE = 1

    clean = otel_attributes(
        {
            "none": None,
            "s": "x",
            "b": True,
            "i": 3,
            "f": 0.5,
            "level": Level.HIGH,
            "count": Count.ONE,
            "list": ["a", None, "b"],
            "mixed": (1, None, "a"),
            "empty": [],
            "dict": {"b": 1, "a": [2]},
        }
    )
    assert list(clean) == ["s", "b", "i", "f", "level", "count", "list", "mixed", "empty", "dict"]
    assert clean["level"] is Level.HIGH and clean["count"] is Count.ONE and clean["b"] is True
    assert clean["list"] == ("a", "b")
    assert clean["mixed"] == ("1", '"a"')
    assert clean["empty"] == ()
    assert clean["dict"] == '{"a": [2], "b": 1}'


def test_a_recorder_without_a_meter_provider_makes_no_metric_points(monkeypatch):
    import executor.telemetry.spans as recorder_module

    def no_points(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("metric points made for a no-op meter")

    monkeypatch.setattr(recorder_module, "llm_metric_points", no_points)
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    recorder = TelemetryRecorder(tracer_provider=tracer_provider)
    for event in realistic_execution("exec-no-meter"):
        recorder.record(event)
    recorder.end_open_spans()
    assert recorder.failures == []
    assert exporter.get_finished_spans()
    metered = TelemetryRecorder(tracer_provider=tracer_provider, meter_provider=MeterProvider())
    metered.record(next(e for e in realistic_execution("exec-meter") if e.kind == "llm_call"))
    assert metered.failures and "metric points made" in metered.failures[0]
