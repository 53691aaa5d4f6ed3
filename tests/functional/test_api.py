"""The public API on loopback: run_plan / run_plan_sync / call_tool recorded through Recording.

Real HTTP to scripted tool servers, layer 3 through the real openai client to a scripted
OpenAI-compatible server, and a DuckDB store in tmp_path.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from executor import (
    LLM,
    Action,
    Decision,
    ExecutionOutcome,
    Plan,
    PlanError,
    Step,
    Tool,
    ToolCallCancelled,
    ToolCallFailed,
    ToolCallRejected,
    call_tool,
    run_plan,
    run_plan_sync,
)
from executor.events import ListRecorder
from store import AttemptRecord, ExecutionDetail, Recording, StepRecord
from tests.support.llm_server import ScriptedLLMServer
from tests.support.plans import run_cli
from tests.support.tool_server import ScriptedToolServer, ToolReply

FAST = {"initial_delay_ms": 1, "max_delay_ms": 2}
CITY_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ANALYZER_ANSWER = json.dumps({"should_retry": True, "reason": "Tokio is a typo of Tokyo",
                              "suggested_changes": {"city": "Tokyo"},
                              "is_transient_error": False})  # fmt: skip


def weather(server: ScriptedToolServer) -> Tool:
    return Tool("weather", server.base_url)


def fails_then_succeeds(server: ScriptedToolServer, failure: ToolReply, data: Any) -> None:
    """`weather.forecast` answers `failure` once, then success with `data`."""
    server.script("/capabilities/forecast", failure, ToolReply.ok(data))


class DispatchWatcher:
    """A recorder that sets `cancel` when the first request is about to leave."""

    def __init__(self, cancel: asyncio.Event) -> None:
        self.cancel = cancel

    def record(self, event: Any) -> None:
        if event.kind == "attempt_dispatched":
            self.cancel.set()


async def test_run_plan_records_into_the_store_and_returns_typed_records(
    tmp_path: Path, tool_server: ScriptedToolServer
) -> None:
    fails_then_succeeds(tool_server, ToolReply.error(429, "RATE_LIMITED", "slow down",
                                                     retryable=True), {"temp": 14})
    forecast = weather(tool_server).capability("forecast", schema=CITY_SCHEMA)
    plan = Plan([Step("step-1", forecast, {"city": "Paris"})], query="weather in Paris",
                config=FAST)  # fmt: skip
    db = tmp_path / "api.duckdb"
    async with Recording(db) as rec:
        outcome = await run_plan(plan, recorder=rec, labels={"suite": "api"})
        detail = rec.execution(outcome.execution_id)
    assert isinstance(outcome, ExecutionOutcome)
    assert outcome.status == "succeeded"
    (step,) = outcome.steps
    assert step.result == {"success": True, "data": {"temp": 14}}
    decisions = [attempt.decision for attempt in step.attempts]
    assert all(isinstance(d, Decision) for d in decisions)
    assert [(d.action, d.rule_id) for d in decisions] == [
        (Action.RETRY_SAME, "transient.retry_same"), (Action.SUCCESS, "success.2xx")]
    assert isinstance(detail, ExecutionDetail)
    assert isinstance(detail.steps[0], StepRecord)
    assert all(isinstance(a, AttemptRecord) for a in detail.steps[0].attempts)
    assert [a.rule_id for a in detail.steps[0].attempts] == ["transient.retry_same",
                                                            "success.2xx"]  # fmt: skip
    assert detail.execution.labels == {"suite": "api"}
    listed = run_cli("ls", "--db", str(db), "--json")
    assert listed.code == 0, listed.stderr
    assert [row["labels"] for row in listed.json()["executions"]] == [{"suite": "api"}]


def test_run_plan_sync_runs_without_an_event_loop(tool_server: ScriptedToolServer) -> None:
    tool_server.script("/capabilities/forecast", ToolReply.ok({"temp": 9}))
    plan = Plan([Step("step-1", weather(tool_server).capability("forecast"), {"city": "Oslo"})])
    recorder = ListRecorder()
    outcome = run_plan_sync(plan, recorder=recorder)
    assert (outcome.status, outcome.steps[0].result["data"]) == ("succeeded", {"temp": 9})
    assert recorder.events[0].kind == "execution_started"
    assert [r.json for r in tool_server.received("/capabilities/forecast")] == [{"city": "Oslo"}]


async def test_run_plan_sync_inside_an_event_loop_says_to_await_run_plan(
    tool_server: ScriptedToolServer,
) -> None:
    # Was asyncio.run()'s "cannot be called from a running event loop" and a "coroutine
    # 'run_plan_sync.<locals>.main' was never awaited" warning (found by an outside check).
    plan = Plan([Step("step-1", weather(tool_server).capability("forecast"), {"city": "Oslo"})])
    with pytest.raises(RuntimeError, match=r"use `await run_plan\(plan, \.\.\.\)` there"):
        run_plan_sync(plan)
    assert tool_server.received("/capabilities/forecast") == []


async def test_call_tool_with_parameters_not_an_object_is_a_plan_error(
    tool_server: ScriptedToolServer,
) -> None:
    expected = r"steps\[0\]\.parameters: expected an object, got an array"
    with pytest.raises(PlanError, match=expected):
        await call_tool(weather(tool_server), "forecast", ["Rome"])  # type: ignore[arg-type]
    assert tool_server.received("/capabilities/forecast") == []


async def test_call_tool_returns_the_parsed_response(tool_server: ScriptedToolServer) -> None:
    tool_server.script("/capabilities/forecast", ToolReply.ok({"temp": 21}))
    result = await call_tool(weather(tool_server), "forecast", {"city": "Rome"})
    assert result == {"success": True, "data": {"temp": 21}}


async def test_call_tool_raises_failed_with_the_final_decision(
    tmp_path: Path, tool_server: ScriptedToolServer
) -> None:
    tool_server.script("/capabilities/forecast",
                       ToolReply.error(401, "AUTH_ERROR", "invalid API key"))  # fmt: skip
    db = tmp_path / "call.duckdb"
    with Recording(db) as rec, pytest.raises(ToolCallFailed) as raised:
        await call_tool(weather(tool_server), "forecast", {"city": "Rome"}, recorder=rec)
    error = raised.value
    assert error.decision is not None
    assert (error.decision.action, error.rule_id) == (Action.STOP_TERMINAL,
                                                      "terminal.auth_or_method")  # fmt: skip
    assert str(error.decision.recovery) == "request authorization"
    assert str(error).startswith(
        f"weather.forecast failed in execution {error.execution_id}: "
        "stop_terminal [terminal.auth_or_method]: ")
    assert "\n" not in str(error)
    assert open_row(db, error.execution_id)["last_failing_rule"] == "terminal.auth_or_method"


def open_row(db: Path, execution_id: str) -> dict[str, Any]:
    result = run_cli("ls", "--db", str(db), "--json")
    assert result.code == 0, result.stderr
    (row,) = [r for r in result.json()["executions"] if r["execution_id"] == execution_id]
    return row


async def test_call_tool_raises_rejected_when_the_guard_refuses(
    tool_server: ScriptedToolServer,
) -> None:
    schema = {"type": "object", "properties": {"units": {"enum": ["metric", "imperial"]}}}
    capability = weather(tool_server).capability("forecast", schema=schema)
    with pytest.raises(ToolCallRejected) as raised:
        await call_tool(weather(tool_server), capability, {"units": "kelvin"})
    assert raised.value.rule_id == "guard.reject_predispatch"
    assert raised.value.step.dispatch_count == 0
    assert tool_server.received() == []


async def test_call_tool_is_corrected_by_layer_3_through_the_llm_option(
    tool_server: ScriptedToolServer, llm_server: ScriptedLLMServer
) -> None:
    fails_then_succeeds(tool_server, ToolReply.error(400, "INVALID_CITY", "unknown city Tokio",
                                                     retryable=True), {"temp": 18})
    llm_server.script(ANALYZER_ANSWER)
    recorder = ListRecorder()
    result = await call_tool(
        weather(tool_server), weather(tool_server).capability("forecast", schema=CITY_SCHEMA),
        {"city": "Tokio"}, recorder=recorder, query="weather in Tokyo",
        llm=LLM(base_url=llm_server.base_url, model="m", api_key="k"),
    )  # fmt: skip
    assert result["data"] == {"temp": 18}
    assert [r.json for r in tool_server.received()] == [{"city": "Tokio"}, {"city": "Tokyo"}]
    assert len(llm_server.requests) == 1
    assert "weather in Tokyo" in llm_server.prompts[0]
    decided = [e.decision.rule_id for e in recorder.of_kind("attempt_decided")]
    assert decided == ["analyzer.accept", "success.2xx"]


async def test_the_env_option_is_read_instead_of_the_process_environment(
    tool_server: ScriptedToolServer,
) -> None:
    tool_server.script("/capabilities/forecast",
                       ToolReply.error(503, "DOWN", "unavailable", retryable=True))  # fmt: skip
    with pytest.raises(ToolCallFailed) as raised:
        await call_tool(weather(tool_server), "forecast", {"city": "Rome"},
                        env={"TRUVAG3_STEP_RETRY_MAX_ATTEMPTS": "1"})  # fmt: skip
    assert raised.value.rule_id == "budget.attempts"
    assert len(tool_server.received()) == 1


async def test_setting_cancel_cancels_a_call_in_flight(tool_server: ScriptedToolServer) -> None:
    tool_server.script("/capabilities/forecast", ToolReply.ok({"temp": 1}, delay_s=30))
    cancel = asyncio.Event()
    with pytest.raises(ToolCallCancelled) as raised:
        await call_tool(weather(tool_server), "forecast", {"city": "Rome"},
                        recorder=DispatchWatcher(cancel), cancel=cancel)  # fmt: skip
    assert raised.value.execution.status == "cancelled"
    assert raised.value.decision is not None
    assert raised.value.decision.action == Action.STOP_CANCELLED


async def test_cancelling_the_task_still_records_how_the_run_ended(
    tmp_path: Path, tool_server: ScriptedToolServer
) -> None:
    tool_server.script("/capabilities/forecast", ToolReply.ok({"temp": 1}, delay_s=30))
    plan = Plan([Step("step-1", weather(tool_server).capability("forecast"), {"city": "Rome"})])
    dispatched = asyncio.Event()
    db = tmp_path / "cancelled.duckdb"
    async with Recording(db) as rec:
        from executor.events import FanoutRecorder

        task = asyncio.create_task(
            run_plan(plan, recorder=FanoutRecorder(rec, DispatchWatcher(dispatched))))
        await dispatched.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (row,) = rec.executions()
    assert (row.status, row.stop_reason) == ("cancelled", "cancelled")


async def test_the_llm_option_replaces_the_plans_endpoint(
    tool_server: ScriptedToolServer, llm_server: ScriptedLLMServer
) -> None:
    tool_server.script("/capabilities/forecast", ToolReply.ok({}))
    plan = Plan([Step("step-1", weather(tool_server).capability("forecast"), {"city": "Rome"})],
                llm=LLM(base_url="http://127.0.0.1:9/v1", model="old"))  # fmt: skip
    recorder = ListRecorder()
    await run_plan(plan, recorder=recorder,
                   llm=LLM(base_url=llm_server.base_url, model="new", api_key="k"))  # fmt: skip
    (started,) = recorder.of_kind("execution_started")
    assert (started.llm["base_url"], started.llm["model"]) == (llm_server.base_url, "new")
    assert started.plan["llm"]["model"] == "new"


def one_step_plan(server: ScriptedToolServer) -> Plan:
    return Plan([Step("step-1", weather(server).capability("forecast"), {"city": "Rome"})])


async def test_the_telemetry_option_exports_spans_as_otel_env_says(
    tool_server: ScriptedToolServer,
) -> None:
    from tests.support.otlp_receiver import OTLPReceiver

    tool_server.script("/capabilities/forecast", ToolReply.ok({}))
    with OTLPReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}  # fmt: skip
        await run_plan(one_step_plan(tool_server), env=env, telemetry=True)
        exported = receiver.span_names()
        await run_plan(one_step_plan(tool_server), env=env)
        assert receiver.span_names() == exported
    assert "orchestrator.execution" in exported


def test_runs_in_any_thread_reach_record_runs_with_run_labels(
    tool_server: ScriptedToolServer,
) -> None:
    from executor.api import record_runs, run_labels

    tool_server.script("/capabilities/forecast", ToolReply.ok({}))
    recorder, outcomes = ListRecorder(), []
    worker = threading.Thread(target=lambda: outcomes.append(
        run_plan_sync(one_step_plan(tool_server), labels={"run": "mine"})))  # fmt: skip
    with record_runs(recorder), run_labels({"test": "node-1", "run": "ambient"}):
        worker.start()
        worker.join()
    run_plan_sync(one_step_plan(tool_server))  # outside: not recorded
    (started,) = recorder.of_kind("execution_started")
    assert started.execution_id == outcomes[0].execution_id
    assert started.labels == {"test": "node-1", "run": "mine"}


class InterruptOnDispatch:
    """A recorder that sends this process SIGINT (Ctrl-C) when the request is about to leave."""

    def record(self, event: Any) -> None:
        if event.kind == "attempt_dispatched":
            os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_cancels_run_plan_sync_as_it_cancels_run(tool_server: ScriptedToolServer) -> None:
    tool_server.script("/capabilities/forecast", ToolReply.ok({}, delay_s=30))
    outcome = run_plan_sync(one_step_plan(tool_server), recorder=InterruptOnDispatch())
    assert (outcome.status, outcome.stop_reason) == ("cancelled", "cancelled")
    assert outcome.steps[0].attempts[-1].decision.action == Action.STOP_CANCELLED


async def test_runs_share_one_tls_context(
    tool_server: ScriptedToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ssl

    from executor.runtime import default_tls_context

    built: list[object] = []
    create = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(args)
        return create(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counting)
    default_tls_context.cache_clear()
    tool_server.script("/capabilities/forecast", ToolReply.ok({}))
    for _ in range(3):
        await call_tool(weather(tool_server), "forecast", {"city": "Rome"})
    assert len(built) == 1  # loading the CA bundle costs ~100 ms; once per process, not per call
