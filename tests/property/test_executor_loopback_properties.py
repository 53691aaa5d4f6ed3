"""Properties of the real executor over loopback: a tool server answering what hypothesis drew.

Each example runs one plan through `PlanExecutor` with real HTTP to a `ScriptedToolServer` (and,
for the correction layers, the real openai client to a `ScriptedLLMServer`), a recording
recorder and an injected sleep that returns at once. One event loop, one HTTP client and one LLM
client serve every example, so an example costs milliseconds.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import hypothesis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor.events import ListRecorder
from executor.llm import LLMClient, LLMSettings
from executor.plan import parse_plan
from executor.policy import Action
from executor.runtime import PlanExecutor, encode_json_body
from executor.wire import is_transient_status, parse_retry_policy
from tests.property.strategies import (
    envelopes,
    examples,
    hostile_bodies,
    json_values,
    llm_answers,
    retry_after_headers,
    wire_statuses,
)
from tests.support.llm_server import LLMReply, ScriptedLLMServer
from tests.support.plans import FAST_BACKOFF, capability, plan, step
from tests.support.tool_server import ScriptedToolServer, ToolReply

SPEC_FINAL_ACTIONS = {
    "reject_predispatch", "success", "stop_refused", "stop_terminal", "stop_single_dispatch",
    "retry_same", "stop_budget", "stop_protected", "retry_corrected", "stop_no_correction",
    "stop_cancelled", "stop_unsafe_resend", "stop_circuit_open",
}
def tally(label: str) -> None:
    """Count `label` in --hypothesis-show-statistics (a no-op in the plain tests below)."""
    if hypothesis.currently_in_test_context():
        hypothesis.event(label)


RETRY_AFTER_MAX_MS = 60_000  # the default retry_after_max_ms
_case_numbers = itertools.count(1)


@dataclass
class Loopback:
    """The servers and clients every example shares."""

    loop: asyncio.AbstractEventLoop
    tool: ScriptedToolServer
    llm: ScriptedLLMServer
    http: httpx.AsyncClient
    llm_client: LLMClient


@pytest.fixture(scope="module")
def loopback() -> Iterator[Loopback]:
    loop = asyncio.new_event_loop()
    with ScriptedToolServer() as tool, ScriptedLLMServer() as llm:
        # No keep-alive: a server that sends a body with a 204 or 304 would otherwise leave
        # bytes on a pooled connection and break the next example's first request.
        http = httpx.AsyncClient(timeout=httpx.Timeout(5.0), follow_redirects=False,
                                 limits=httpx.Limits(max_keepalive_connections=0))
        llm_client = LLMClient(LLMSettings(base_url=llm.base_url, api_key="test-key",
                                           model="scripted-model", timeout_s=5.0))
        try:
            yield Loopback(loop, tool, llm, http, llm_client)
        finally:
            loop.run_until_complete(http.aclose())
            loop.run_until_complete(llm_client.aclose())
            loop.close()


# --- what the tool answers -----------------------------------------------------------------------

_HEADER_NAMES = st.sampled_from(["Retry-After", "retry-after", "RETRY-AFTER"])
_EXTRA_HEADERS = st.sampled_from([{}, {"Content-Type": "text/html"}, {"X-Debug": "token=abc"},
                                  {"Connection": "close"}])


# Mostly the statuses the table routes on, then anything h11 carries (200-999).
_TOOL_STATUSES = st.one_of(
    st.sampled_from([200, 201, 204, 301, 304, 400, 401, 402, 403, 404, 405, 408, 409, 418, 422,
                     429, 500, 502, 503, 504, 599, 600, 999]),
    st.sampled_from([400, 404, 422, 429, 503]),
    wire_statuses,
)


@st.composite
def tool_replies(draw: st.DrawFn, statuses: st.SearchStrategy[int] | None = None) -> ToolReply:
    """One HTTP answer: any status, any body, maybe a Retry-After, maybe a dropped connection."""
    if draw(st.integers(0, 24)) == 24:
        return ToolReply(drop=True)
    status = draw(statuses if statuses is not None else _TOOL_STATUSES)
    body = draw(st.one_of(hostile_bodies(), envelopes()))
    headers = dict(draw(_EXTRA_HEADERS))
    if draw(st.booleans()):
        headers[draw(_HEADER_NAMES)] = draw(retry_after_headers).strip(" \t")
    return ToolReply(status=status, body=body, headers=headers)


# A plan refuses a step that binds its own result, so parameters carry no `{{...}}` text.
_PARAMETERS = st.dictionaries(st.sampled_from(["city", "amount", "note"]),
                              json_values.filter(lambda value: "{{" not in json.dumps(value)),
                              max_size=3)


@st.composite
def tool_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """A one-step plan's capability and config, and the replies its path answers in turn."""
    return {
        "replies": draw(st.lists(tool_replies(), min_size=1, max_size=4)),
        "parameters": draw(_PARAMETERS),
        "orchestrator": draw(st.integers(0, 15)) == 15,
        "side_effects": draw(st.sampled_from(["none", "none", "idempotent", "unsafe"])),
        "config": {
            "max_attempts": draw(st.integers(1, 4)),
            "max_validation_retries": draw(st.integers(0, 2)),
            "max_semantic_retries": draw(st.integers(0, 2)),
            "jitter": draw(st.booleans()),
            "max_repeated_errors": draw(st.sampled_from([None, None, None, 1, 2, 3])),
        },
    }


_CORRECTABLE = st.sampled_from([400, 404, 409, 422, 400, 418, 451])
_USEFUL_ANSWERS = st.builds(
    lambda should_retry, city, transient: (
        f'{{"should_retry": {str(should_retry).lower()}, "reason": "fuzz",'
        f' "suggested_changes": {{"city": {city}}},'
        f' "corrected_parameters": {{"city": {city}, "amount": 2}},'
        f' "analysis": "fuzz", "is_transient_error": {str(transient).lower()}}}'
    ),
    st.booleans(), st.sampled_from(['"Tokyo"', "1", "null", "[1]", '{"a": 1}', '"{{step-1.x}}"']),
    st.booleans(),
)
_LLM_REPLIES = st.one_of(
    llm_answers().map(LLMReply),
    _USEFUL_ANSWERS.map(LLMReply),
    _USEFUL_ANSWERS.map(LLMReply),
    st.sampled_from([LLMReply(status=500, content="down"), LLMReply(drop=True),
                     LLMReply(content=None), LLMReply(body="not json"),
                     LLMReply(body='{"choices": []}'), LLMReply(content="")]),
)


@st.composite
def llm_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """A step failing with correctable 4xx (and others) while the LLM layers answer anything."""
    scenario = draw(tool_scenarios())
    scenario["replies"] = draw(st.lists(
        st.one_of(tool_replies(_CORRECTABLE), tool_replies(_CORRECTABLE), tool_replies()),
        min_size=1, max_size=4,
    ))
    scenario["parameters"] = {"city": "Tokio", "amount": 1}
    scenario["orchestrator"] = False
    scenario["hitl"] = draw(st.sampled_from([[], [], ["amount"], ["city", "amount"]]))
    scenario["llm_replies"] = draw(st.lists(_LLM_REPLIES, min_size=1, max_size=6))
    scenario["config"]["error_analyzer_enabled"] = draw(st.sampled_from([True, True, True, False]))
    scenario["config"]["max_validation_retries"] = draw(st.integers(1, 2))
    scenario["config"]["max_attempts"] = draw(st.integers(2, 4))
    scenario["config"]["max_repeated_errors"] = None
    scenario["config"]["semantic_retry_independent_steps"] = draw(st.booleans())
    return scenario


# --- running one example and checking what was recorded -----------------------------------------


async def _no_wait(seconds: float) -> None:
    return None


def run_scenario(loopback: Loopback, scenario: dict[str, Any], *, with_llm: bool):
    case = next(_case_numbers)
    name = f"fuzz_{case}"
    path = f"/capabilities/{name}"
    loopback.tool.script(path, *scenario["replies"])
    marker = f"fuzz-case-{case}-"
    if with_llm:
        loopback.llm.script_for(marker, *scenario["llm_replies"])
    document = plan(
        loopback.tool.base_url,
        {name: capability(name, orchestrator=scenario["orchestrator"],
                          side_effects=scenario["side_effects"])},
        [step("step-1", name, scenario["parameters"], hitl_approved=scenario.get("hitl"))],
        query=f"{marker} find hotels",
        config=scenario["config"],
    )
    recorder = ListRecorder()
    executor = PlanExecutor(
        parse_plan(document), recorder=recorder, env={}, http_client=loopback.http,
        llm_client=loopback.llm_client if with_llm else None, sleep=_no_wait,
    )
    outcome = loopback.loop.run_until_complete(executor.run())
    assert executor.recorder_error is None
    return outcome, recorder, loopback.tool.received(path), marker


def check_recorded(outcome: Any, recorder: ListRecorder, received: list[Any]) -> None:
    """Every attempt is recorded and every decision is a SPEC action that agrees with the wire."""
    kinds = [event.kind for event in recorder.events]
    assert kinds[0] == "execution_started" and kinds[-1] == "execution_finished"
    assert kinds.count("execution_finished") == 1 and kinds.count("step_finished") == 1
    (step_outcome,) = outcome.steps
    assert step_outcome.error is None or "execution panic" not in step_outcome.error
    dispatched = recorder.of_kind("attempt_dispatched")
    responded = {event.n: event for event in recorder.of_kind("attempt_responded")}
    decided = {event.n: event for event in recorder.of_kind("attempt_decided")}
    # Every request the tool server saw is one recorded dispatch, response and decision.
    assert len(dispatched) == len(received) == step_outcome.dispatch_count
    assert [event.request_body for event in dispatched] == [r.body for r in received]
    assert set(responded) == {event.n for event in dispatched}
    assert set(decided) >= set(responded)
    assert len(step_outcome.attempts) == len(decided)
    for event in dispatched:
        response = responded[event.n]
        tally(f"response {response.status} {response.transport_error or ''}".rstrip())
        assert event.request_body == encode_json_body(event.parameters)
        decision = decided[event.n].decision
        assert decision.action in SPEC_FINAL_ACTIONS
        assert response.retry_policy == str(parse_retry_policy(response.response_body))
        status = response.status
        if decision.action == "retry_same":
            assert is_transient_status(status)
            assert decision.delay_ms >= 0
            if decision.delay_source == "backoff":
                assert decision.delay_ms <= FAST_BACKOFF["max_delay_ms"]
            else:  # seed 003: a Retry-After is waited in full, never cut short
                assert decision.delay_ms == decision.inputs["retry_after_ms"]
                assert decision.delay_ms <= RETRY_AFTER_MAX_MS
        if 400 <= status <= 499 and not is_transient_status(status):
            assert decision.action != "retry_same"
        if status in (401, 403, 405):
            assert decision.action in {"stop_refused", "stop_terminal"}
            assert not [c for c in recorder.of_kind("llm_call") if c.n == event.n]
    for call in recorder.of_kind("llm_call"):
        # seed 000 §3, §12: layers 3 and 4 only ever see a correctable 4xx.
        status = responded[call.n].status
        assert 400 <= status <= 499 and status not in (401, 403, 405, 408, 429)
    backoffs = [e for e in recorder.of_kind("backoff") if e.phase == "started"]
    retries = [a for a in step_outcome.attempts if a.action == "retry_same"]
    assert [b.planned_ms for b in backoffs] == [a.delay_ms for a in retries]
    for attempt in step_outcome.attempts:
        tally(f"decision {attempt.action} ({attempt.rule})")  # --hypothesis-show-statistics
    last = step_outcome.attempts[-1] if step_outcome.attempts else None
    assert (step_outcome.status == "succeeded") == (last is not None and last.action == "success")
    # A resend after retry_same carries the same bytes; a correction changes them.
    for before, after in itertools.pairwise(dispatched):
        action = decided[before.n].decision.action
        if action == "retry_same":
            assert after.request_body == before.request_body
        elif action == "retry_corrected":
            assert after.request_body != before.request_body


LOOPBACK_SETTINGS = settings(
    max_examples=examples(200),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large],
)


@LOOPBACK_SETTINGS
@given(scenario=tool_scenarios())
def test_executor_records_every_attempt_of_any_tool_answer(
    loopback: Loopback, scenario: dict[str, Any]
) -> None:
    outcome, recorder, received, _ = run_scenario(loopback, scenario, with_llm=False)
    check_recorded(outcome, recorder, received)
    assert recorder.of_kind("llm_call") == []


@settings(LOOPBACK_SETTINGS, max_examples=examples(80))
@given(scenario=llm_scenarios())
def test_executor_survives_any_llm_answer_in_layers_3_and_4(
    loopback: Loopback, scenario: dict[str, Any]
) -> None:
    outcome, recorder, received, _ = run_scenario(loopback, scenario, with_llm=True)
    check_recorded(outcome, recorder, received)
    tally(f"llm calls: {len(recorder.of_kind('llm_call'))}")
    for call in recorder.of_kind("llm_call"):
        assert call.parse_error is None or isinstance(call.parse_error, str)
    for event in recorder.of_kind("attempt_decided"):
        decision = event.decision
        if decision.action == "retry_corrected":
            assert decision.layer in {"analyzer", "re_resolution", "legacy"}
            assert not set(decision.inputs["protected_keys"]) & {
                key for key, value in (decision.corrected_parameters or {}).items()
                if event.parameters.get(key) != value
            }
    assert Action  # the module's action names are the SPEC's (checked in decide properties)


# --- regressions the fuzzer found in the policy and the LLM answer parsers ---------------------

DEEP_ANALYZER_ANSWER = ('{"should_retry": true, "reason": "deep", "suggested_changes": {"city": '
                        + "[" * 5000 + "]" * 5000 + "}}")


def test_a_deeply_nested_analyzer_answer_is_recorded_as_no_correction(loopback: Loopback) -> None:
    scenario = {
        "replies": [ToolReply.error(400, "BAD_CITY", "unknown city Tokio", "INPUT_ERROR")],
        "parameters": {"city": "Tokio"}, "orchestrator": False, "side_effects": "none",
        "config": {"max_attempts": 3}, "llm_replies": [LLMReply(DEEP_ANALYZER_ANSWER)],
    }
    outcome, recorder, received, _ = run_scenario(loopback, scenario, with_llm=True)
    check_recorded(outcome, recorder, received)
    (decided,) = recorder.of_kind("attempt_decided")
    assert decided.decision.rule_id == "no_correction.stop"


@pytest.mark.parametrize("body", [b"[1, 2]", b"<html>ok</html>", b"", b'"done"'],
                         ids=["array", "html", "empty", "string"])
def test_a_2xx_body_that_is_not_a_json_object_is_not_a_success(
    loopback: Loopback, body: bytes
) -> None:
    scenario = {"replies": [ToolReply(status=200, body=body)], "parameters": {},
                "orchestrator": False, "side_effects": "none", "config": {"max_attempts": 1}}
    outcome, recorder, received, _ = run_scenario(loopback, scenario, with_llm=False)
    check_recorded(outcome, recorder, received)
    (attempt,) = outcome.steps[0].attempts
    assert (attempt.action, attempt.rule) == ("stop_terminal", "result.not_json_object")


def _nested(depth: int, leaf: str) -> str:
    return "[" * depth + leaf + "]" * depth


def test_a_deeply_nested_correction_is_guarded_sent_and_recorded(loopback: Loopback) -> None:
    answer = ('{"should_retry": true, "reason": "deep", "suggested_changes": {"city": '
              + _nested(600, '"Tokyo"') + "}}")
    scenario = {
        "replies": [ToolReply.error(400, "BAD_CITY", "unknown city", "INPUT_ERROR"),
                    ToolReply.ok({"ok": True})],
        "parameters": {"city": "Tokio"}, "orchestrator": False, "side_effects": "none",
        "config": {"max_attempts": 3}, "llm_replies": [LLMReply(answer)],
    }
    outcome, recorder, received, _ = run_scenario(loopback, scenario, with_llm=True)
    check_recorded(outcome, recorder, received)
    assert [a.rule for a in outcome.steps[0].attempts] == ["analyzer.accept", "success.2xx"]
    assert received[1].body == ('{"city":' + _nested(600, '"Tokyo"') + "}").encode()


def test_a_correction_of_a_deeply_nested_parameter_is_recorded(loopback: Loopback) -> None:
    answer = ('{"should_retry": true, "reason": "deep", "suggested_changes": {"tags": '
              + _nested(450, "2") + "}}")
    scenario = {
        "replies": [ToolReply.error(400, "BAD_TAGS", "bad tags", "INPUT_ERROR"),
                    ToolReply.ok({"ok": True})],
        "parameters": {"tags": json.loads(_nested(450, "1"))}, "orchestrator": False,
        "side_effects": "none", "config": {"max_attempts": 3}, "llm_replies": [LLMReply(answer)],
    }
    outcome, recorder, received, _ = run_scenario(loopback, scenario, with_llm=True)
    check_recorded(outcome, recorder, received)
    assert [a.rule for a in outcome.steps[0].attempts] == ["analyzer.accept", "success.2xx"]
