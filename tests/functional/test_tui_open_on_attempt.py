"""Opening an execution on a step that is not the first, at an attempt that is not the first.

A SQL row (`execution_id, step_id, n`) or a what-if change names an attempt; the execution
screen opened on the right step but at its attempt #1: filling the steps table highlights row 0
first, and that stale highlight, handled after the screen had moved to the named step, reset the
attempt. The existing tests open step-1 (row 0) or attempt #1, where the two coincide.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from console.tui.messages import ExecutionRequested
from console.tui.screens.execution import ExecutionScreen
from console.tui.widgets.tables import AttemptTable, StepTable
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply
from tests.support.tui import settle_loaded, settle_until, tui_app


@pytest.fixture
def two_step_store(tmp_path: Path) -> tuple[Path, str]:
    """step-1 succeeds at once; step-2 gets 503 three times and stops at #3."""
    db = tmp_path / "debug.duckdb"
    with ScriptedToolServer() as tools:
        tools.script("/capabilities/ok", ToolReply.ok({"v": 1}))
        tools.script("/capabilities/flaky", ToolReply.error(503, "DOWN", "try later"))
        document = plan(tools.base_url, {"ok": capability("ok"), "flaky": capability("flaky")},
                        [step("step-1", "ok"), step("step-2", "flaky")],
                        config={"max_attempts": 3, "initial_delay_ms": 1, "max_delay_ms": 2,
                                "max_concurrency": 1})  # fmt: skip
        result = run_cli("--db", str(db), "run", str(write_plan(tmp_path, document)), "--json")
        assert result.code == 0, result.stderr
    return db, result.json()["execution_id"]


@pytest.mark.parametrize("n", [3, 2])
async def test_the_screen_opens_at_the_named_attempt_of_a_later_step(two_step_store, n) -> None:
    db, execution_id = two_step_store
    app = tui_app(db, live_refresh=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle_loaded(pilot)
        app.post_message(ExecutionRequested(execution_id, "step-2", n))
        await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), "execution")
        await settle_loaded(pilot)
        screen = app.screen
        assert (screen.step_id, screen.attempt_n) == ("step-2", n)
        assert screen.query_one(StepTable).highlighted_key() == "step-2"
        assert screen.query_one(AttemptTable).highlighted_key() == str(n)
