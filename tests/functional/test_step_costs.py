"""Per-step work of the executor on loopback, counted rather than timed (issue 12).

Counts that grow with the plan are what a benchmark turns into milliseconds per step: tasks
per dispatch and decision-input dicts built. Each bound here is what the loop needs, plus a
small constant, so a regression to per-call tasks or eager encodings fails by a multiple.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from executor.events import ListRecorder
from executor.plan import parse_plan
from executor.policy import DecisionInputs
from executor.runtime import PlanExecutor
from tests.support.plans import capability, plan, step
from tests.support.tool_server import ToolReply

STEPS = 30


def _document(tool_server, concurrency: int = 1) -> dict[str, Any]:
    tool_server.script("/capabilities/echo", ToolReply.ok({"n": 1}))
    steps = [step(f"s{i}", "echo", {"n": i}) for i in range(STEPS)]
    return plan(tool_server.base_url, {"echo": capability("echo")}, steps,
                config={"max_concurrency": concurrency})


async def _run_counting_tasks(document: dict[str, Any], recorder: Any = None) -> tuple[Any, int]:
    loop = asyncio.get_running_loop()
    created = 0

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task:
        nonlocal created
        created += 1
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)
    try:
        outcome = await PlanExecutor(parse_plan(document), recorder=recorder, env={}).run()
    finally:
        loop.set_task_factory(None)
    return outcome, created


async def test_a_dispatch_runs_in_its_step_task_with_no_task_of_its_own(tool_server) -> None:
    outcome, created = await _run_counting_tasks(_document(tool_server))
    assert outcome.status == "succeeded"
    assert len(tool_server.received("/capabilities/echo")) == STEPS
    # One task per step; before, each dispatch added three (wait_for, the race, the waiter).
    assert created <= STEPS + 3, created


async def test_eight_at_once_still_one_task_per_step(tool_server) -> None:
    outcome, created = await _run_counting_tasks(_document(tool_server, concurrency=8))
    assert outcome.status == "succeeded"
    # anyio opens each of the 8 connections in a task of its own.
    assert created <= STEPS + 8 + 3, created


@pytest.mark.serial  # the cancelled run must end within 4 s
async def test_cancel_during_a_request_ends_it_and_the_step_says_cancelled(tool_server) -> None:
    tool_server.script("/capabilities/slow", ToolReply.ok({"n": 1}, delay_s=5.0))
    document = plan(tool_server.base_url, {"slow": capability("slow")},
                    [step("only", "slow", {"n": 1})])
    recorder = ListRecorder()
    executor = PlanExecutor(parse_plan(document), recorder=recorder, env={})
    run = asyncio.ensure_future(executor.run())
    await asyncio.to_thread(tool_server.wait_for_requests, 1)
    executor.cancel()
    outcome = await asyncio.wait_for(run, timeout=4.0)
    assert outcome.status == "cancelled"
    (responded,) = recorder.of_kind("attempt_responded")
    assert (responded.status, responded.transport_error) == (0, "cancelled")
    (decided,) = recorder.of_kind("attempt_decided")
    assert decided.decision.rule_id == "cancel.in_flight", decided.decision.rule_id


async def test_decision_inputs_become_a_dict_only_for_decisions_read(
    tool_server, monkeypatch
) -> None:
    built = 0
    original = DecisionInputs.to_dict

    def counting(self: DecisionInputs) -> dict[str, Any]:
        nonlocal built
        built += 1
        return original(self)

    monkeypatch.setattr(DecisionInputs, "to_dict", counting)
    recorder = ListRecorder()
    outcome = await PlanExecutor(parse_plan(_document(tool_server)), recorder=recorder,
                                 env={}).run()
    assert outcome.status == "succeeded"
    # Two decisions per step (dispatch, then success); nothing read them yet.
    assert built == 0
    decided = recorder.of_kind("attempt_decided")
    assert [d.decision.inputs["status"] for d in decided] == [200] * STEPS
    assert built == STEPS  # the recorded one per step, once each
    assert decided[0].decision.to_dict()["inputs"] == decided[0].decision.inputs
    assert built == STEPS


async def test_at_rest_header_redaction_runs_once_per_distinct_header(
    tool_server, monkeypatch
) -> None:
    import json

    import executor.redact.values as values
    from executor.redact import Place, RedactionLevel, redact
    from store.ingest import encode_records, segments

    recorder = ListRecorder()
    document = _document(tool_server)
    document["tools"]["demo"]["headers"] = {"Authorization": "Bearer sk-test-0123456789abcdef"}
    await PlanExecutor(parse_plan(document), recorder=recorder, env={}).run()
    redacted = 0
    original = values._redact_named_text

    def counting(name: str, value: str) -> str:
        nonlocal redacted
        redacted += 1
        return original(name, value)

    monkeypatch.setattr(values, "_redact_named_text", counting)
    segments._redacted_header_cached.cache_clear()
    records = encode_records(recorder.events, 1)
    # Each request carries 6 headers, one of them (the step id) new per step: per header, not
    # per header map (which was 6 per step and more for the responses).
    assert redacted < 2 * STEPS + 20, redacted
    monkeypatch.setattr(values, "_redact_named_text", original)
    dispatched = [e for e in recorder.events if e.kind == "attempt_dispatched"]
    payloads = [json.loads(r[3]) for r in records if r[1] == "attempt_dispatched"]
    assert len(payloads) == STEPS
    for event, payload in zip(dispatched, payloads, strict=True):
        expected = redact(RedactionLevel.AT_REST, Place.HEADERS, event.request_headers)
        assert payload["request_headers"] == expected
        assert payload["request_headers"]["Authorization"] == "[REDACTED]"
