"""A tool that answers with a body its Content-Encoding does not decode: a failed request, on
the record as on the wire (it was dispatched, every attempt has an outcome and a decision)."""

from __future__ import annotations

import json

import duckdb

from tests.support.plans import capability, plan, run_subprocess, step, write_plan
from tests.support.tool_server import ToolReply


def test_a_body_that_does_not_decode_is_a_failed_request_not_a_panic(tool_server, tmp_path):
    tool_server.script("/capabilities/search", ToolReply(
        status=200, body="this is not gzip", headers={"Content-Encoding": "gzip"}))
    document = plan(tool_server.base_url, {"search": capability("search")},
                    [step("step-1", "search", {"city": "Paris"})],
                    config={"max_attempts": 2})  # fmt: skip
    db = tmp_path / "store.duckdb"

    ran = run_subprocess("run", str(write_plan(tmp_path, document)), "--db", str(db))

    assert ran.returncode == 0, ran.stderr  # the run completed (docs/run.md)
    assert "panic" not in ran.stdout + ran.stderr
    listed = json.loads(run_subprocess("ls", "--db", str(db), "--json").stdout)
    assert listed["executions"][0]["status"] == "failed"
    with duckdb.connect(str(db), read_only=True) as conn:
        (dispatches, error) = conn.execute(
            "SELECT dispatch_count, error FROM steps").fetchone()  # fmt: skip
        attempts = conn.execute(
            "SELECT n, http_status, transport_error, rule_id FROM attempts ORDER BY n"
        ).fetchall()
    assert dispatches == 2
    assert error == (
        "request failed: UndecodableResponse: the tool answered HTTP 200 with a body its "
        "Content-Encoding (gzip) does not decode: Error -3 while decompressing data: "
        "incorrect header check"
    )
    assert [row[2:] for row in attempts] == [("protocol", "transient.retry_same"),
                                             ("protocol", "budget.attempts")]  # fmt: skip


def test_a_step_panic_names_the_error_inside_a_task_group():
    from executor.events import ListRecorder
    from executor.plan import parse_plan
    from executor.runtime import PlanExecutor

    document = plan("http://127.0.0.1:9", {"search": capability("search")},
                    [step("step-1", "search", {})])  # fmt: skip
    executor = PlanExecutor(parse_plan(document), recorder=ListRecorder(), env={})
    spec = executor.plan.steps[0]
    group = ExceptionGroup("unhandled errors in a TaskGroup", [OverflowError("port 99999")])

    outcome = executor._panic_outcome(spec, group)

    assert outcome.error == "step step-1 execution panic: OverflowError: port 99999"
