"""W3C trace context on tool and LLM requests: loopback servers see the execution's trace.

The `traceparent` a tool server receives names the execution's trace id and the span id of the
attempt that sent it, which is the id the exported attempt span has; an LLM request made for an
attempt carries that attempt's `traceparent`. Off without telemetry and with
`TRUVA_PROPAGATE_TRACE_CONTEXT=false`.
"""

from __future__ import annotations

import json
import re

import pytest

from executor.events import FanoutRecorder, ListRecorder
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from executor.telemetry import telemetry_from_env, trace_id_for_execution
from tests.support.otlp_receiver import OTLPReceiver, attributes_of
from tests.support.plans import capability, plan, step
from tests.support.tool_server import ToolReply

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")


async def no_wait(seconds: float) -> None:
    return None


def corrected_plan(tool_server, llm_server) -> dict:
    tool_server.script(
        "/capabilities/hotels",
        ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE: PARIS", "INPUT_ERROR"),
        ToolReply.ok({"hotels": ["H1"]}),
    )
    llm_server.script(json.dumps({"should_retry": True, "reason": "Paris is PAR",
                                  "suggested_changes": {"city_code": "PAR"},
                                  "is_transient_error": False}))
    return plan(tool_server.base_url, {"hotels": capability("hotels")},
                [step("step-1", "hotels", {"city_code": "PARIS"})],
                llm_base_url=llm_server.base_url)


async def run(document: dict, env: dict[str, str]) -> tuple[str, ListRecorder]:
    events = ListRecorder()
    telemetry = telemetry_from_env(env)
    recorders = [events] + ([telemetry] if telemetry is not None else [])
    try:
        outcome = await PlanExecutor(
            parse_plan(document), recorder=FanoutRecorder(*recorders), env={}, sleep=no_wait
        ).run()
    finally:
        if telemetry is not None:
            assert telemetry.shutdown()
    return outcome.execution_id, events


async def test_tool_and_llm_requests_carry_the_attempt_traceparent(tool_server, llm_server):
    with OTLPReceiver() as receiver:
        execution_id, events = await run(
            corrected_plan(tool_server, llm_server),
            {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint},
        )
        exported = {
            attributes_of(span.attributes)["truva.attempt.n"]: span
            for _, span in receiver.spans() if span.name == "execute_tool demo.hotels"
        }

    first, second = tool_server.received("/capabilities/hotels")
    trace_id = trace_id_for_execution(execution_id)
    for n, request in ((1, first), (2, second)):
        match = TRACEPARENT.match(request.headers["traceparent"])
        assert match, request.headers["traceparent"]
        assert match.group(1) == trace_id
        assert match.group(2) == exported[n].span_id.hex()  # the tool joins under the attempt
        assert exported[n].trace_id.hex() == trace_id
    assert "tracestate" not in first.headers
    (llm_request,) = llm_server.requests
    assert llm_request.headers["traceparent"] == first.headers["traceparent"]
    dispatched = [e for e in events.events if e.kind == "attempt_dispatched"]
    assert dispatched[0].request_headers["traceparent"] == first.headers["traceparent"]


OFF_CASES = [
    ("no_telemetry", None),
    ("switched_off", "false"),
]


@pytest.mark.parametrize(("name", "switch"), OFF_CASES, ids=[c[0] for c in OFF_CASES])
async def test_no_traceparent_without_telemetry_or_when_switched_off(
    name, switch, tool_server, llm_server
):
    with OTLPReceiver() as receiver:
        env = {} if switch is None else {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                                         "TRUVA_PROPAGATE_TRACE_CONTEXT": switch}
        await run(corrected_plan(tool_server, llm_server), env)
        if switch is not None:
            assert "orchestrator.execution" in receiver.span_names()  # still exported

    for request in tool_server.received("/capabilities/hotels"):
        assert "traceparent" not in request.headers
    (llm_request,) = llm_server.requests
    assert "traceparent" not in llm_request.headers
