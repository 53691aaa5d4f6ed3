"""Re-running the failed steps from the execution screen, through Pilot, against loopback tools."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import Static

from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.executions import ExecutionsScreen
from console.tui.widgets.tables import ExecutionTable
from store.queries import open_store
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply
from tests.support.tui import screen_loaded, settle_until, shown_text, tui_app

SIZE = (120, 36)
SEARCH, BOOK = "/capabilities/search", "/capabilities/book"


@pytest.fixture
def partial_run(tmp_path: Path, tool_server: ScriptedToolServer) -> tuple[Path, str]:
    """step-1 succeeds, step-2 (bound to step-1) is refused; then the tool accepts step-2."""
    tool_server.script(SEARCH, ToolReply.ok({"code": "PAR"}))
    tool_server.script(BOOK, ToolReply.error(409, "FULL", "full", "CONFLICT", retryable=False))
    document = plan(tool_server.base_url, {"search": capability("search"),
                                           "book": capability("book")},
                    [step("step-1", "search", {"city": "Paris"}),
                     step("step-2", "book", {"city": "{{step-1.data.code}}"})])  # fmt: skip
    db = tmp_path / "store" / "debug.duckdb"
    result = run_cli("run", str(write_plan(tmp_path, document)), "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    tool_server.replace_script(BOOK, ToolReply.ok({"booking": "B1"}))
    return db, result.json()["execution_id"]


async def open_execution(app, pilot, execution_id: str) -> ExecutionScreen:
    await screen_loaded(pilot)
    app.open_execution(execution_id)
    await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), execution_id)
    await screen_loaded(pilot)
    return app.screen


async def test_f_reruns_the_failed_steps_and_opens_the_new_execution(partial_run, tool_server):
    db, original = partial_run
    app = tui_app(db, db_arg=str(db), live_refresh=False)
    async with app.run_test(size=(200, 40)) as pilot:  # the whole query column fits
        screen = await open_execution(app, pilot, original)
        binding = next(b for b in screen.BINDINGS if getattr(b, "id", None) == "rerun-failed")
        assert (binding.key, binding.action) == ("F", "rerun_failed") and binding.tooltip
        assert screen.check_action("rerun_failed", ()) is True

        await pilot.press("F")
        await settle_until(
            pilot,
            lambda: isinstance(app.screen, ExecutionScreen) and app.screen.execution_id != original
            and app.screen.detail is not None,
            "the new execution",
        )  # fmt: skip

        new_screen = app.screen
        assert new_screen.detail.execution.rerun_of == original
        assert new_screen.detail.execution.status == "succeeded"
        summary = shown_text(new_screen.query_one("#execution-summary").content)
        assert f"rerun of {original}" in summary
        assert new_screen.check_action("rerun_failed", ()) is False  # nothing failed any more
        new_screen.select_step("step-1")
        await pilot.pause()
        note = shown_text(new_screen.query_one("#detail-note", Static).content)
        assert f"step-1: result reused from execution {original}; not resent." in note

        new_id = new_screen.execution_id
        await pilot.press("escape", "escape")
        await settle_until(pilot, lambda: isinstance(app.screen, ExecutionsScreen), "the list")
        await screen_loaded(pilot)
        query = app.screen.query_one(ExecutionTable).get_cell(new_id, "query")
        assert query.plain == f"↻ rerun of {original}  test query"  # a Text: not markup
    assert len(tool_server.received(SEARCH)) == 1
    assert [r.json for r in tool_server.received(BOOK)] == [{"city": "PAR"}, {"city": "PAR"}]
    rows = open_store(db).list_executions().executions
    assert {row.execution_id: row.rerun_of for row in rows}[new_screen.execution_id] == original


async def test_the_palette_offers_the_rerun_with_its_cli_twin(partial_run, tool_server):
    db, original = partial_run
    app = tui_app(db, db_arg=str(db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, original)
        commands = {command.title: command for command in screen.palette_commands()}
        rerun = commands["execution: Re-run failed steps"]
        assert f"CLI: truva-console --db {db} rerun {original}" in rerun.help
        rerun.run()
        await settle_until(pilot, lambda: app.screen is not screen and
                           isinstance(app.screen, ExecutionScreen), "the new execution")
        assert app.screen.detail.execution.rerun_of == original
    # The twin does the same from the CLI: the reused step-1 is again not sent.
    twin = await asyncio.to_thread(run_cli, "--db", str(db), "rerun", original, "--json")
    assert twin.code == 0, twin.stderr
    assert twin.json()["rerun_of"] == original
    assert len(tool_server.received(SEARCH)) == 1
