"""Runtime details seen from outside: headers, concurrency, budgets, coercion, warnings, legacy."""

from __future__ import annotations

import json

import pytest

from executor.events import ListRecorder
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from tests.support.plans import capability, plan, run_plan_json, step
from tests.support.tool_server import ToolReply


async def _run(document: dict, **kwargs):
    recorder = ListRecorder()
    outcome = await PlanExecutor(parse_plan(document), recorder=recorder, env={}, **kwargs).run()
    return outcome, recorder


async def test_dispatch_is_a_json_post_with_truvag3_headers(tool_server):
    tool_server.script("/capabilities/x", ToolReply.ok({"ok": True}))
    outcome, _ = await _run(plan(tool_server.base_url, {"x": capability("x")},
                                 [step("step-7", "x", {"b": 2, "a": "<&>"})]))
    (request,) = tool_server.received("/capabilities/x")
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-truvag3-step-id"] == "step-7"
    assert request.headers["x-truvag3-request-id"] == outcome.execution_id
    assert request.headers["x-truvag3-agent-name"] == "demo"
    # Go's encoding/json: sorted keys, compact, HTML-safe escapes.
    assert request.body == b'{"a":"\\u003c\\u0026\\u003e","b":2}'


async def test_ready_steps_run_concurrently_up_to_the_bound(tool_server):
    tool_server.script("/capabilities/slow", ToolReply.ok({"ok": True}, delay_s=0.5))
    steps = [step(f"step-{i}", "slow", {"i": i}) for i in range(1, 6)]
    _, recorder = await _run(plan(tool_server.base_url, {"slow": capability("slow")}, steps,
                                  config={"max_concurrency": 2}))
    sent = {e.step_id: e.at for e in recorder.of_kind("attempt_dispatched")}
    back = {e.step_id: e.at for e in recorder.of_kind("attempt_responded")}
    spans = [(sent[step_id], back[step_id]) for step_id in sent]
    overlap = max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)
    assert overlap == 2


async def test_layer_2_coercion_is_recorded_and_sent(tool_server):
    tool_server.script("/capabilities/geo", ToolReply.ok({"ok": True}))
    schema = {"type": "object", "properties": {"lat": {"type": "number"},
                                               "count": {"type": "integer"}}}
    _, recorder = await _run(plan(tool_server.base_url, {"geo": capability("geo", schema=schema)},
                                  [step("step-1", "geo", {"lat": "35.6897", "count": "5"})]))
    assert tool_server.received("/capabilities/geo")[0].json == {"lat": 35.6897, "count": 5}
    (event,) = recorder.of_kind("parameters_coerced")
    assert [c["log_line"] for c in event.coercions] == [
        "lat: string(35.6897) -> float64(35.6897)", "count: string(5) -> int64(5)"]


async def test_2xx_with_success_false_is_success_with_a_contract_warning(tool_server):
    tool_server.script("/capabilities/x", ToolReply(status=200, body={"success": False,
                                                                      "error": {"code": "E"}}))
    outcome, recorder = await _run(plan(tool_server.base_url, {"x": capability("x")},
                                        [step("step-1", "x", {})]))
    assert outcome.steps[0].status == "succeeded"
    (notice,) = recorder.of_kind("notice")
    assert notice.name == "tool_contract.success_false_on_2xx"


def test_repeated_identical_error_budget(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply(status=503, body="same outage"))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {})],
                                       config={"max_repeated_errors": 2, "max_attempts": 5}),
                        "--no-store")
    rules = [a["rule"] for a in doc["steps"][0]["attempts"]]
    assert rules == ["transient.retry_same", "budget.repeated_error"]
    assert doc["incomplete_steps"] == ["step-1"]


def test_the_same_error_from_another_tool_is_not_a_repeat(tmp_path, tool_server):
    """Two tools with a capability of the same name answer the same 500 (found by an outside
    check: they shared one count, so the second tool's first error stopped the task)."""
    tool_server.script("/alpha/capabilities/search", ToolReply(status=500, body="oops"),
                       ToolReply.ok({"a": 1}))  # fmt: skip
    tool_server.script("/beta/capabilities/search", ToolReply(status=500, body="oops"),
                       ToolReply.ok({"b": 1}))  # fmt: skip
    document = plan(tool_server.base_url, {}, [
        step("step-1", "search", {}, tool="alpha"),
        step("step-2", "search", {}, tool="beta", depends_on=["step-1"])],
        config={"max_repeated_errors": 2})  # fmt: skip
    document["tools"] = {name: {"base_url": f"{tool_server.base_url}/{name}"}
                         for name in ("alpha", "beta")}
    document["capabilities"] = {f"{name}.search": capability("search")
                                for name in ("alpha", "beta")}
    doc = run_plan_json(tmp_path, document, "--no-store")
    assert [[a["rule"] for a in s["attempts"]] for s in doc["steps"]] == [
        ["transient.retry_same", "success.2xx"], ["transient.retry_same", "success.2xx"]]
    assert doc["status"] == "succeeded"


def test_a_reset_and_a_timeout_are_two_errors_though_both_are_status_0(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply(drop=True), ToolReply(delay_s=3),
                       ToolReply.ok({"x": 1}))  # fmt: skip
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {})],
                                       config={"max_repeated_errors": 2, "timeout_s": 0.5}),
                        "--no-store")  # fmt: skip
    attempts = doc["steps"][0]["attempts"]
    assert [(a["transport_error"], a["rule"]) for a in attempts] == [
        ("reset", "transient.retry_same"), ("timeout", "transient.retry_same"),
        (None, "success.2xx")]


def test_the_same_error_at_another_step_of_the_same_capability_is_a_repeat(tmp_path,
                                                                             tool_server):
    tool_server.script("/capabilities/x", *[ToolReply(status=503, body="same outage")] * 2)
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {}), step("step-2", "x", {})],
                                       config={"max_repeated_errors": 2, "max_attempts": 1}),
                        "--no-store")  # fmt: skip
    rules = sorted(a["rule"] for s in doc["steps"] for a in s["attempts"])
    assert rules == ["budget.attempts", "budget.repeated_error"]


@pytest.mark.serial  # a 0.3 s wall-clock budget must outlast the first answer
def test_a_wait_longer_than_the_wall_clock_left_stops_without_resending(tmp_path, tool_server):
    tool_server.script("/capabilities/x", ToolReply(status=503, body="down"))
    tool_server.script("/capabilities/y", ToolReply.ok({"y": 1}))
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"x": capability("x"), "y": capability("y")},
        [step("step-1", "x", {}), step("step-2", "y", {}, depends_on=["step-1"])],
        config={"max_wall_clock_s": 0.3, "initial_delay_ms": 2000, "max_delay_ms": 2000,
                "jitter": False, "max_attempts": 5}), "--no-store")
    first = doc["steps"][0]["attempts"]
    assert [(a["action"], a["rule"]) for a in first] == [("stop_budget", "budget.wall_clock.wait")]
    assert "the wait of 2000.0 ms (exponential backoff) would outlast" in first[0]["reason"]
    assert len(tool_server.received("/capabilities/x")) == 1
    assert doc["steps"][1]["status"] == "skipped"
    assert doc["incomplete_steps"] == ["step-1", "step-2"]


def test_total_token_budget_stops_before_the_next_llm_call(tmp_path, tool_server, llm_server):
    tool_server.script("/capabilities/x", ToolReply.error(400, "BAD", "bad value"))
    llm_server.script(json.dumps({"should_retry": True, "reason": "r",
                                  "suggested_changes": {"a": 2}}))
    doc = run_plan_json(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                       [step("step-1", "x", {"a": 1})],
                                       config={"max_total_tokens": 10},
                                       llm_base_url=llm_server.base_url))
    rules = [a["rule"] for a in doc["steps"][0]["attempts"]]
    assert rules == ["analyzer.accept", "budget.total_tokens"]
    assert doc["llm_total_tokens"] >= 10
    assert len(llm_server.requests) == 1


def test_legacy_correction_through_the_llm_when_the_analyzer_is_off(tmp_path, tool_server,
                                                                     llm_server):
    tool_server.script("/capabilities/geo",
                       ToolReply(status=400, body="json: cannot unmarshal string into Go struct "
                                                  "field .lat of type float64"),
                       ToolReply.ok({"ok": True}))
    llm_server.script('```json\n{"lat": 35.6897, "lon": 139.6917}\n```')
    doc = run_plan_json(tmp_path, plan(
        tool_server.base_url, {"geo": capability("geo")},
        [step("step-1", "geo", {"lat": "35.6897 N", "lon": 139.6917})],
        config={"error_analyzer_enabled": False}, llm_base_url=llm_server.base_url))
    assert [(a["action"], a["rule"], a["layer"]) for a in doc["steps"][0]["attempts"]] == [
        ("retry_corrected", "legacy.accept", "legacy"), ("success", "success.2xx", None)]
    assert "failed with a type error" in llm_server.prompts[0]


async def test_a_plain_coroutine_is_a_legacy_callback(tool_server):
    tool_server.script("/capabilities/x",
                       ToolReply.error(422, "BAD", "amount must be greater than 0"),
                       ToolReply.ok({"ok": True}))
    seen = []

    async def fix(request):
        seen.append((request.step_id, request.parameters))
        return {**request.parameters, "amount": 5}

    document = plan(tool_server.base_url, {"x": capability("x")},
                    [step("step-1", "x", {"amount": 0})],
                    config={"error_analyzer_enabled": False})
    outcome, _ = await _run(document, legacy_callback=fix)
    assert seen == [("step-1", {"amount": 0})]
    assert [a.rule for a in outcome.steps[0].attempts] == ["legacy.accept", "success.2xx"]


def test_execution_ids_sort_by_time_and_do_not_collide_within_a_second():
    from executor.runtime import new_execution_id

    ids = {new_execution_id(1_796_000_000.0) for _ in range(5000)}
    assert len(ids) == 5000
    assert all(i.startswith("20261130-") for i in ids)
    assert new_execution_id(1_796_000_000.0) < new_execution_id(1_796_000_001.0)


async def test_a_recorder_that_raises_never_stops_the_run(tool_server):
    class Broken:
        def record(self, event):
            raise RuntimeError("disk on fire")

    tool_server.script("/capabilities/x", ToolReply.ok({"ok": True}))
    executor = PlanExecutor(parse_plan(plan(tool_server.base_url, {"x": capability("x")},
                                            [step("step-1", "x", {})])),
                            recorder=Broken(), env={})
    outcome = await executor.run()
    assert outcome.status == "succeeded"
    assert str(executor.recorder_error) == "disk on fire"


async def test_a_cookie_a_tool_sets_is_sent_on_its_next_calls(tool_server):
    tool_server.script("/capabilities/login", ToolReply(
        status=200, body={"success": True}, headers={"Set-Cookie": "session=abc; Path=/"}))
    tool_server.script("/capabilities/x", ToolReply.ok({"ok": True}))
    steps = [step("step-1", "login"), step("step-2", "x", depends_on=["step-1"]),
             step("step-3", "x", depends_on=["step-2"])]
    await _run(plan(tool_server.base_url, {"login": capability("login"), "x": capability("x")},
                    steps))
    (login,) = tool_server.received("/capabilities/login")
    assert "cookie" not in login.headers
    assert [r.headers.get("cookie") for r in tool_server.received("/capabilities/x")] == [
        "session=abc", "session=abc"]
