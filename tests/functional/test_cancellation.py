"""Cancellation stops at once, even in the middle of a long backoff wait (seed 000 §7)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor.events import ListRecorder
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from tests.support.plans import capability, plan, step, write_plan
from tests.support.tool_server import ToolReply

# Each case bounds how long the cancellation took on the wall clock.
pytestmark = pytest.mark.serial

SLOW_BACKOFF = {"initial_delay_ms": 5000, "max_delay_ms": 10000, "jitter": False}


async def test_cancel_during_a_5s_backoff_returns_at_once(tool_server):
    tool_server.script("/capabilities/x", ToolReply(status=503, body="busy"))
    document = plan(tool_server.base_url, {"x": capability("x")},
                    [step("step-1", "x", {"a": 1})], config=SLOW_BACKOFF)
    recorder = ListRecorder()
    executor = PlanExecutor(parse_plan(document), recorder=recorder, env={})
    task = asyncio.create_task(executor.run())
    for _ in range(1000):
        if recorder.of_kind("backoff") or task.done():
            break
        await asyncio.sleep(0.01)
    assert recorder.of_kind("backoff"), "the step never entered its backoff wait"
    started = time.monotonic()
    executor.cancel()
    outcome = await task
    assert time.monotonic() - started < 1.0
    assert outcome.status == "cancelled"
    attempts = outcome.steps[0].attempts
    assert [(a.action, a.rule) for a in attempts] == [
        ("retry_same", "transient.retry_same"), ("stop_cancelled", "cancel.before_dispatch")]
    assert attempts[0].delay_ms == 5000.0
    phases = [(e.phase, e.planned_ms) for e in recorder.of_kind("backoff")]
    assert phases == [("started", 5000.0), ("cancelled", 5000.0)]
    assert recorder.of_kind("backoff")[-1].actual_ms < 1000.0
    assert len(tool_server.received("/capabilities/x")) == 1


async def test_cancel_in_flight_abandons_the_request(tool_server):
    tool_server.script("/capabilities/x", ToolReply.ok({"late": True}, delay_s=5.0))
    document = plan(tool_server.base_url, {"x": capability("x")}, [step("step-1", "x", {})])
    executor = PlanExecutor(parse_plan(document), env={})
    task = asyncio.create_task(executor.run())
    await asyncio.to_thread(tool_server.wait_for_requests, 1)
    started = time.monotonic()
    executor.cancel()
    outcome = await task
    assert time.monotonic() - started < 1.0
    assert [(a.action, a.rule, a.transport_error) for a in outcome.steps[0].attempts] == [
        ("stop_cancelled", "cancel.in_flight", "cancelled")]


@pytest.mark.parametrize("side_effects", ["none", "unsafe"])
async def test_a_cancel_before_the_request_is_written_sends_nothing_and_says_so(
    tool_server, side_effects
):
    """The run's cancel event is set before it starts: the cancel arrives while the executor
    connects, before a byte of the request is written. The attempt is not dispatched
    (`cancel.before_dispatch`, dispatch count 0) and the tool saw nothing."""
    from executor.api import run_plan
    from executor.events import ListRecorder as Recorder

    tool_server.script("/capabilities/x", ToolReply.ok({"paid": True}))
    document = plan(tool_server.base_url,
                    {"x": {**capability("x"), "side_effects": side_effects}},
                    [step("step-1", "x", {"amount": 10}), step("step-2", "x", {"amount": 1},
                                                               depends_on=["step-1"])])
    cancel = asyncio.Event()
    cancel.set()
    recorder = Recorder()
    outcome = await run_plan(parse_plan(document), cancel=cancel, recorder=recorder, env={})
    assert outcome.status == "cancelled"
    first, second = outcome.steps
    assert [(a.dispatched, a.action, a.rule) for a in first.attempts] == [
        (False, "stop_cancelled", "cancel.before_dispatch")]
    assert (first.status, first.dispatch_count) == ("rejected", 0)
    assert second.status == "skipped"
    assert recorder.of_kind("attempt_dispatched") == []
    assert tool_server.received("/capabilities/x") == []


async def test_a_cancel_through_a_transport_that_reports_no_progress_stays_in_flight():
    """httpx.MockTransport (respx, ASGI) never reports httpcore's progress: a cancel while it
    answers cannot be known to be unsent, so it is `cancel.in_flight`, dispatched (found by
    review: it was recorded `cancel.before_dispatch` while the tool had the request)."""
    import httpx

    from executor.api import run_plan

    received: list[bytes] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        received.append(request.content)
        await asyncio.sleep(5)
        return httpx.Response(200, json={"ok": True})

    document = plan("http://tool.test", {"pay": {**capability("pay"), "side_effects": "unsafe"}},
                    [step("step-1", "pay", {"amount": 10})])
    cancel = asyncio.Event()
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        task = asyncio.create_task(run_plan(parse_plan(document), cancel=cancel, env={},
                                            http_client=client))
        while not received:
            await asyncio.sleep(0.01)
        cancel.set()
        outcome = await task
    (first,) = outcome.steps
    assert [(a.dispatched, a.rule) for a in first.attempts] == [(True, "cancel.in_flight")]
    assert first.dispatch_count == 1


def test_ctrl_c_on_the_cli_cancels_cleanly_and_names_incomplete_steps(tmp_path: Path,
                                                                       tool_server):
    tool_server.script("/capabilities/x", ToolReply(status=503, body="busy"))
    tool_server.script("/capabilities/y", ToolReply.ok({"y": 1}))
    path = write_plan(tmp_path, plan(
        tool_server.base_url, {"x": capability("x"), "y": capability("y")},
        [step("step-1", "x", {"a": 1}), step("step-2", "y", {"b": "{{step-1.data.v}}"},
                                              depends_on=["step-1"])],
        config=SLOW_BACKOFF))
    script = Path(sys.executable).with_name("truva-console")
    child = subprocess.Popen([str(script), "run", str(path), "--json", "--no-store"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert tool_server.wait_for_requests(1, timeout_s=20)
        time.sleep(0.3)  # let the child enter its 5 s backoff wait
        started = time.monotonic()
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=10)
        elapsed = time.monotonic() - started
    finally:
        child.kill()
    assert elapsed < 1.0
    assert child.returncode == 130
    doc = json.loads(stdout)
    assert doc["status"] == "cancelled"
    assert doc["incomplete_steps"] == ["step-1", "step-2"]
    assert "incomplete steps: step-1, step-2" in stderr
