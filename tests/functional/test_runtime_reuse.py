"""`PlanExecutor(reuse_results=…, skip_steps=…, rerun_of=…)`: seeded steps are never sent."""

from __future__ import annotations

import pytest

from executor.events import ListRecorder, Notice, StepFinished, StepStarted
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from executor.telemetry import build_spans_from_events
from tests.support.plans import capability, plan, step
from tests.support.tool_server import ToolReply

RECORDED = {"success": True, "data": {"code": "PAR", "rooms": [1, 2]}}


def _plan(base_url: str):
    return parse_plan(plan(base_url, {"search": capability("search"),
                                      "book": capability("book"),
                                      "pay": capability("pay", side_effects="unsafe"),
                                      "mail": capability("mail")},
                           [step("step-1", "search", {"city": "Paris"}),
                            step("step-2", "book", {"city": "{{step-1.data.code}}",
                                                    "room": "{{step-1.data.rooms.1}}"}),
                            step("step-3", "pay", {"amount": 9}),
                            step("step-4", "mail", {"pay": "{{step-3.data.id}}"})]))  # fmt: skip


async def test_reused_results_are_not_sent_and_their_dependents_bind_to_them(tool_server):
    tool_server.script("/capabilities/book", ToolReply.ok({"booking": "B1"}))
    tool_server.script("/capabilities/pay", ToolReply.ok({"id": "P1"}))
    tool_server.script("/capabilities/mail", ToolReply.ok({}))
    recorder = ListRecorder()
    executor = PlanExecutor(_plan(tool_server.base_url), recorder=recorder, env={},
                            reuse_results={"step-1": RECORDED},
                            skip_steps={"step-3": "held for the test"},
                            rerun_of="exec-before")  # fmt: skip
    outcome = await executor.run()

    assert tool_server.received("/capabilities/search") == []
    assert [r.json for r in tool_server.received("/capabilities/book")] == [
        {"city": "PAR", "room": 2}]
    assert tool_server.received("/capabilities/pay") == []
    assert tool_server.received("/capabilities/mail") == []
    by_id = {s.id: s for s in outcome.steps}
    assert (by_id["step-1"].status, by_id["step-1"].dispatch_count, by_id["step-1"].attempts,
            by_id["step-1"].reused_from, by_id["step-1"].result) == (
        "succeeded", 0, (), "exec-before", RECORDED)  # fmt: skip
    assert by_id["step-2"].status == "succeeded" and by_id["step-2"].reused_from is None
    assert (by_id["step-3"].status, by_id["step-3"].skip_reason) == ("skipped", "held for the test")
    assert by_id["step-4"].skip_reason == (
        "skipped due to held dependency: step-3 (held for the test)")
    assert outcome.rerun_of == "exec-before" and outcome.status == "partial"

    started = recorder.of_kind("execution_started")[0]
    assert started.rerun_of == "exec-before"
    seeded = [e for e in recorder.events if getattr(e, "step_id", None) == "step-1"]
    assert [type(e) for e in seeded] == [StepStarted, Notice, StepFinished]
    assert (seeded[1].name, seeded[1].message) == (
        "rerun.result_reused", "result reused from execution exec-before; not resent")
    assert (seeded[2].status, seeded[2].dispatch_count, seeded[2].result) == (
        "succeeded", 0, RECORDED)
    # The seeded events come before anything is dispatched, and telemetry accepts them.
    first_dispatch = next(i for i, e in enumerate(recorder.events)
                          if e.kind == "attempt_dispatched")  # fmt: skip
    assert recorder.events.index(seeded[2]) < first_dispatch
    assert build_spans_from_events(recorder.events)


@pytest.mark.parametrize(("kwargs", "message"), [
    pytest.param({"reuse_results": {"step-9": {}}, "rerun_of": "x"},
                 "reuse_results/skip_steps name steps not in the plan: ['step-9']",
                 id="unknown-reused-step"),
    pytest.param({"skip_steps": {"nope": "r"}},
                 "reuse_results/skip_steps name steps not in the plan: ['nope']",
                 id="unknown-skipped-step"),
    pytest.param({"reuse_results": {"step-1": {}}},
                 "reuse_results needs rerun_of, the execution they were recorded in",
                 id="reuse-without-rerun-of"),
])  # fmt: skip
def test_seeding_unknown_steps_or_without_a_source_is_refused(kwargs, message) -> None:
    with pytest.raises(ValueError) as raised:
        PlanExecutor(_plan("http://127.0.0.1:9"), env={}, **kwargs)
    assert str(raised.value) == message
