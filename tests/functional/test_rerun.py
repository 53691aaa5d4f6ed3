"""`truva-console rerun`: only the steps that did not succeed run again (seed 003).

A plan runs against a loopback tool server whose replies are then switched, and is re-run
through the real CLI into a real DuckDB file; the server's request log shows what was resent.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply

SEARCH, BOOK, CONFIRM = "/capabilities/search", "/capabilities/book", "/capabilities/confirm"
CHARGE, RECEIPT = "/capabilities/charge", "/capabilities/receipt"


def _document(tool_server: ScriptedToolServer) -> dict:
    capabilities = {name: capability(name) for name in ("search", "book", "confirm", "receipt")}
    capabilities["charge"] = capability("charge", side_effects="unsafe")
    return plan(
        tool_server.base_url,
        capabilities,
        [step("step-1", "search", {"city": "Paris"}),
         step("step-2", "book", {"city": "{{step-1.data.city_code}}"}),
         step("step-3", "confirm", {"booking": "{{step-2.data.id}}",
                                    "city": "{{step-1.data.city_code}}"}),
         step("step-4", "charge", {"amount": 120}),
         step("step-5", "receipt", {"charge": "{{step-4.data.charge_id}}"})],
        query="Book a hotel in Paris and pay for it",
    )  # fmt: skip


@pytest.fixture
def original(tmp_path: Path, tool_server: ScriptedToolServer) -> tuple[Path, dict]:
    """A recorded partial run: step-1 ok, step-2 failed, step-3 skipped, step-4 unsafe stop."""
    tool_server.script(SEARCH, ToolReply.ok({"city_code": "PAR"}))
    tool_server.script(BOOK, ToolReply.error(404, "NO_ROOMS", "no rooms", "NOT_FOUND",
                                             retryable=False))  # fmt: skip
    tool_server.script(CONFIRM, ToolReply.ok({"confirmed": True}))
    tool_server.script(CHARGE, ToolReply.error(500, "GATEWAY", "gateway hiccup", "INTERNAL"))
    tool_server.script(RECEIPT, ToolReply.ok({"receipt": "R1"}))
    db = tmp_path / "store" / "debug.duckdb"
    result = run_cli("run", str(write_plan(tmp_path, _document(tool_server))), "--json",
                     "--db", str(db))  # fmt: skip
    assert result.code == 0, result.stderr
    document = result.json()
    statuses = {s["id"]: (s["status"], s["final_action"]) for s in document["steps"]}
    assert statuses == {
        "step-1": ("succeeded", "success"),
        "step-2": ("failed", "stop_refused"),
        "step-3": ("skipped", None),
        "step-4": ("failed", "stop_unsafe_resend"),
        "step-5": ("skipped", None),
    }
    # The tool works now: the booking succeeds and the charge would too.
    tool_server.replace_script(BOOK, ToolReply.ok({"id": "B-77"}))
    tool_server.replace_script(CHARGE, ToolReply.ok({"charge_id": "C-1"}))
    return db, document


def _steps(document: dict) -> dict[str, dict]:
    return {s["id"]: s for s in document["steps"]}


def test_rerun_resends_only_what_did_not_succeed(original, tool_server) -> None:
    db, first = original
    result = run_cli("rerun", first["execution_id"], "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    rerun = result.json()
    assert rerun["rerun_of"] == first["execution_id"]
    assert rerun["execution_id"] != first["execution_id"]
    assert rerun["status"] == "partial"
    steps = _steps(rerun)
    # step-1 succeeded: reused, not resent.
    assert len(tool_server.received(SEARCH)) == 1
    assert steps["step-1"]["status"] == "succeeded"
    assert steps["step-1"]["dispatch_count"] == 0
    assert steps["step-1"]["attempts"] == []
    assert steps["step-1"]["reused_from"] == first["execution_id"]
    assert steps["step-1"]["response"] == {"success": True, "data": {"city_code": "PAR"}}
    # step-2 failed: resent, bound to the recorded step-1 data.
    booked = tool_server.received(BOOK)
    assert [r.json for r in booked] == [{"city": "PAR"}, {"city": "PAR"}]
    assert steps["step-2"]["status"] == "succeeded"
    assert steps["step-2"]["reused_from"] is None
    # step-3 was skipped: it runs, bound to the new step-2 result and the recorded step-1 data.
    assert [r.json for r in tool_server.received(CONFIRM)] == [{"booking": "B-77", "city": "PAR"}]
    assert steps["step-3"]["status"] == "succeeded"
    # step-4 stopped as an unsafe resend: held, and its dependent skipped naming it.
    assert len(tool_server.received(CHARGE)) == 1
    assert steps["step-4"]["status"] == "skipped"
    held = (f"not re-run: it stopped with stop_unsafe_resend in execution "
            f"{first['execution_id']}, so the tool may have accepted the request; pass "
            "--include-unsafe to send it again")  # fmt: skip
    assert steps["step-4"]["skip_reason"] == held
    assert steps["step-5"]["status"] == "skipped"
    assert steps["step-5"]["skip_reason"] == f"skipped due to held dependency: step-4 ({held})"
    assert tool_server.received(RECEIPT) == []


def test_rerun_is_recorded_linked_with_reused_steps_sending_nothing(original) -> None:
    db, first = original
    rerun = run_cli("rerun", first["execution_id"], "--json", "--db", str(db)).json()
    with duckdb.connect(str(db), read_only=True) as conn:
        links = conn.execute(
            "SELECT execution_id, rerun_of FROM executions ORDER BY started_at"
        ).fetchall()
        reused = conn.execute(
            "SELECT status, dispatch_count, attempts, final_action, result FROM steps "
            "WHERE execution_id = ? AND step_id = 'step-1'", [rerun["execution_id"]]
        ).fetchone()
        step_1_attempts = conn.execute(
            "SELECT count(*) FROM attempts WHERE execution_id = ? AND step_id = 'step-1'",
            [rerun["execution_id"]],
        ).fetchone()
        notice = conn.execute(
            "SELECT message FROM events WHERE execution_id = ? AND step_id = 'step-1' "
            "AND name = 'rerun.result_reused'", [rerun["execution_id"]]
        ).fetchone()
    assert links == [(first["execution_id"], None), (rerun["execution_id"], first["execution_id"])]
    assert reused[:4] == ("succeeded", 0, 0, None)
    assert json.loads(reused[4]) == {"success": True, "data": {"city_code": "PAR"}}
    assert step_1_attempts == (0,)
    with duckdb.connect(str(db), read_only=True) as conn:
        unsafe_stop = conn.execute(
            "SELECT action, recovery, impact IS NOT NULL FROM attempts "
            "WHERE execution_id = ? AND step_id = 'step-4'", [first["execution_id"]]
        ).fetchall()
    assert unsafe_stop == [("stop_unsafe_resend", "query status", True)]
    assert notice == (f"result reused from execution {first['execution_id']}; not resent",)

    listed = run_cli("ls", "--json", "--db", str(db)).json()["executions"]
    assert {row["execution_id"]: row["rerun_of"] for row in listed} == {
        first["execution_id"]: None, rerun["execution_id"]: first["execution_id"]}
    by_id = {row["execution_id"]: row for row in listed}
    # Only the dispatches this execution made: step-2 and step-3, none for the reused step-1.
    assert by_id[rerun["execution_id"]]["dispatches"] == 2
    table = run_cli("ls", "--db", str(db)).stdout
    rerun_line = next(line for line in table.splitlines() if line.startswith(rerun["execution_id"]))
    assert f"↻ rerun of {first['execution_id']}" in rerun_line
    explained = run_cli("explain", rerun["execution_id"], "step-1", "--db", str(db)).stdout
    assert f"rerun of    {first['execution_id']}" in explained
    assert "(0 dispatches, 0 attempts" in explained
    assert f"rerun.result_reused: result reused from execution {first['execution_id']}" in explained


def test_rerun_with_include_unsafe_sends_the_unsafe_step_again(original, tool_server) -> None:
    db, first = original
    result = run_cli("rerun", first["execution_id"], "--include-unsafe", "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    steps = _steps(result.json())
    assert result.json()["status"] == "succeeded"
    assert len(tool_server.received(CHARGE)) == 2
    assert steps["step-4"]["status"] == "succeeded"
    assert [r.json for r in tool_server.received(RECEIPT)] == [{"charge": "C-1"}]
    assert len(tool_server.received(SEARCH)) == 1


def test_rerun_text_output_is_runs_with_the_link_and_the_reuse(original) -> None:
    db, first = original
    result = run_cli("rerun", first["execution_id"][:-3], "--db", str(db))
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("execution ") and lines[0].endswith(": partial")
    assert lines[1] == f"  rerun of {first['execution_id']}"
    assert "  step-1: succeeded — 0 dispatch(es), 0 correction(s)" in lines
    assert f"    result reused from execution {first['execution_id']}; not resent" in lines
    assert result.stderr == ""


@pytest.mark.parametrize(("argv", "message"), [
    pytest.param(["rerun", "no-such-id"], "no execution id starts with 'no-such-id'",
                 id="unknown-execution"),
    pytest.param(["rerun", ""], "no execution id starts with ''", id="empty-id"),
])  # fmt: skip
def test_rerun_of_an_unknown_execution_is_one_line_exit_2(original, argv, message) -> None:
    db, _ = original
    result = run_cli(*argv, "--db", str(db))
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr


def test_rerun_of_a_rerun_that_succeeded_has_nothing_to_do(original) -> None:
    db, first = original
    second = run_cli("rerun", first["execution_id"], "--include-unsafe", "--json", "--db", str(db))
    second_id = second.json()["execution_id"]
    result = run_cli("rerun", second_id, "--db", str(db))
    assert result.code == 2
    assert result.stderr == (
        f"truva-console: execution {second_id}: nothing to re-run; every step succeeded\n"
    )


def test_rerun_holding_only_unsafe_steps_says_so(tmp_path, tool_server) -> None:
    tool_server.script(CHARGE, ToolReply.error(500, "GATEWAY", "gateway hiccup", "INTERNAL"))
    document = plan(tool_server.base_url, {"charge": capability("charge", side_effects="unsafe")},
                    [step("step-1", "charge", {"amount": 5})])  # fmt: skip
    db = tmp_path / "store" / "debug.duckdb"
    first = run_cli("run", str(write_plan(tmp_path, document)), "--json", "--db", str(db)).json()
    result = run_cli("rerun", first["execution_id"], "--db", str(db))
    assert result.code == 2
    assert result.stderr == (
        f"truva-console: execution {first['execution_id']}: nothing to re-run; step-1 stopped "
        "with stop_unsafe_resend (pass --include-unsafe to send it again)\n"
    )
    assert len(tool_server.received(CHARGE)) == 1


def test_rerun_takes_redacted_secrets_from_the_unchanged_plan_file(tmp_path, tool_server) -> None:
    tool_server.script(SEARCH, ToolReply.error(404, "NONE", "none", "NOT_FOUND", retryable=False))
    document = plan(tool_server.base_url, {"search": capability("search")},
                    [step("step-1", "search", {"q": "x"})])  # fmt: skip
    document["tools"]["demo"]["headers"] = {"Authorization": "Bearer sk-secret-rerun-42"}
    plan_file = write_plan(tmp_path, document)
    db = tmp_path / "store" / "debug.duckdb"
    first = run_cli("run", str(plan_file), "--json", "--db", str(db)).json()
    tool_server.replace_script(SEARCH, ToolReply.ok({"hits": 1}))
    result = run_cli("rerun", first["execution_id"], "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    assert result.json()["status"] == "succeeded"
    sent = tool_server.received(SEARCH)[-1]
    assert sent.headers["authorization"] == "Bearer sk-secret-rerun-42"
    assert f"taken from {plan_file}" in result.stderr

    plan_file.unlink()
    missing = run_cli("rerun", first["execution_id"], "--db", str(db))
    assert missing.code == 2
    assert missing.stderr == (
        f"truva-console: execution {first['execution_id']}: the recorded plan has redacted "
        f"secrets at tools.demo.headers.Authorization and {plan_file} is missing or differs; "
        "it cannot be re-run without them\n"
    )
    assert len(tool_server.received(SEARCH)) == 2
