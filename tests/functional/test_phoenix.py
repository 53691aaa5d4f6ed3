"""A real Arize Phoenix receives a run and its span query returns the prompt and the answer.

Phoenix is heavy (a web app, SQLite, many dependencies), so it lives in its own test-only venv,
not in the dev extra. The test is skipped with a message saying how to install it:

    python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install arize-phoenix==20.26.1

(or point PHOENIX_SERVE_BIN at any `phoenix` executable). It runs `phoenix serve` on free
loopback ports with a temporary working directory, exports a run to its OTLP/HTTP endpoint with
content capture on, and reads the spans back through Phoenix's REST span query.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from executor.events import FanoutRecorder, ListRecorder
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from executor.telemetry import telemetry_from_env, trace_id_for_execution
from tests.support.phoenix import INSTALL, phoenix_bin, start_phoenix, stop_phoenix
from tests.support.plans import capability, plan, step
from tests.support.tool_server import ToolReply

STARTUP_S = 120.0


@pytest.fixture
def phoenix(tmp_path) -> Iterator[str]:
    """`http://127.0.0.1:PORT` of a Phoenix started for this test."""
    binary = phoenix_bin()
    if binary is None:
        pytest.skip(f"Arize Phoenix is not installed for tests; to run this test: {INSTALL}")
    try:
        process, base_url = start_phoenix(binary, tmp_path / "phoenix", STARTUP_S)
    except RuntimeError as error:
        pytest.fail(str(error))
    try:
        yield base_url
    finally:
        stop_phoenix(process)


def _spans(base_url: str, trace_id: str, expected: int, timeout_s: float = 60.0) -> list[Any]:
    """Phoenix's REST span query for the trace, once all `expected` spans are stored."""
    deadline = time.monotonic() + timeout_s
    found: list[Any] = []
    while time.monotonic() < deadline:  # Phoenix stores received spans in the background
        with urllib.request.urlopen(
            f"{base_url}/v1/projects/default/spans?limit=100", timeout=10
        ) as response:
            data = json.load(response)["data"]
        found = [span for span in data if span["context"]["trace_id"] == trace_id]
        if len(found) >= expected:
            return found
    pytest.fail(f"Phoenix stored {len(found)} of {expected} spans of trace {trace_id}")


async def no_wait(seconds: float) -> None:
    return None


async def test_phoenix_shows_the_prompt_answer_and_span_kinds(phoenix, tool_server, llm_server):
    tool_server.script(
        "/capabilities/hotels",
        ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE: PARIS", "INPUT_ERROR"),
        ToolReply.ok({"hotels": ["H1"]}),
    )
    answer = json.dumps({"should_retry": True, "reason": "Paris is PAR",
                         "suggested_changes": {"city_code": "PAR"}, "is_transient_error": False})
    llm_server.script(answer)
    document = plan(tool_server.base_url, {"hotels": capability("hotels")},
                    [step("step-1", "hotels", {"city_code": "PARIS"})],
                    llm_base_url=llm_server.base_url)
    warnings: list[str] = []
    telemetry = telemetry_from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,  # traces and metrics: Phoenix refuses metrics
         "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
        warn=warnings.append,
    )
    assert telemetry is not None
    try:
        outcome = await PlanExecutor(
            parse_plan(document), recorder=FanoutRecorder(ListRecorder(), telemetry), env={},
            sleep=no_wait,
        ).run()
    finally:
        assert telemetry.shutdown()

    spans = _spans(phoenix, trace_id_for_execution(outcome.execution_id), expected=5)
    kinds = {span["name"]: span["span_kind"] for span in spans}
    assert kinds == {"orchestrator.execution": "CHAIN", "orchestrator.step.step-1": "CHAIN",
                     "execute_tool demo.hotels": "TOOL", "chat scripted-model": "LLM"}
    (llm,) = [span for span in spans if span["name"] == "chat scripted-model"]
    (prompt,) = llm_server.prompts
    attributes = llm["attributes"]
    assert attributes["llm.input_messages.0.message.content"] == prompt
    assert attributes["llm.output_messages.0.message.content"] == answer
    assert attributes["output.value"] == answer
    assert attributes["llm.token_count.total"] > 0
    assert {span["attributes"]["session.id"] for span in spans} == {outcome.execution_id}
    (warning,) = warnings  # one warning for Phoenix's 405 on /v1/metrics, no stream
    assert "HTTP 405" in warning and "OTEL_METRICS_EXPORTER=none" in warning
