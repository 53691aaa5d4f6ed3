"""SVG snapshots of every TUI screen at 120x36, on a store with fixed ids and times."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.tui.app import TruvaConsoleApp
from console.tui.screens.execution import ExecutionScreen
from tests.support.tui import (
    TRIP,
    record_synthetic_store,
    screen_loaded,
    settle_until,
    tui_app,
)

SIZE = (120, 36)
DB = "debug.duckdb"  # relative to the test's directory, so no temporary path is drawn


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def console_app() -> TruvaConsoleApp:
    return tui_app(Path(DB), db_arg=DB, live_refresh=False)


async def _settle(pilot) -> None:
    await screen_loaded(pilot)
    await pilot.wait_for_scheduled_animations()
    # A table scrolls its cursor into view after the refresh that follows the data: wait until
    # every table's scroll offset and cursor have stayed the same over three turns.
    from textual.widgets import DataTable

    last, same = None, 0
    for _ in range(100):
        await pilot.pause()
        now = tuple((table.id, table.scroll_offset, table.cursor_coordinate)
                    for table in pilot.app.screen.query(DataTable))  # fmt: skip
        same = same + 1 if now == last else 0
        if same >= 3:
            break
        last = now
    # Where a table scrolled depends on whether its cursor moved before or after its first
    # layout; scroll each from the top to its cursor again, as a fresh layout would.
    for table in pilot.app.screen.query(DataTable):
        table.scroll_to(0, 0, animate=False)
        table.move_cursor(row=table.cursor_row, column=table.cursor_column, animate=False)
    for _ in range(3):
        await pilot.pause()


def _open_trip(step_id: str | None = None, n: int | None = None, tab: str | None = None):
    """Open TRIP (where it opens, without a step), select the step and attempt, press `tab`."""

    async def run_before(pilot) -> None:
        await _settle(pilot)
        pilot.app.open_execution(TRIP)
        await settle_until(pilot, lambda: isinstance(pilot.app.screen, ExecutionScreen), TRIP)
        await _settle(pilot)
        screen = pilot.app.screen
        if step_id is not None:
            screen.select_step(step_id)
        if n is not None:
            screen.select_attempt(n)
        if tab is not None:
            await pilot.press(tab)
        await _settle(pilot)

    return run_before


def test_executions_screen(snap_compare, in_tmp: Path) -> None:
    record_synthetic_store(in_tmp / DB)
    assert snap_compare(console_app(), terminal_size=SIZE, run_before=_settle)


def test_execution_screen_decision_of_a_corrected_attempt(snap_compare, in_tmp: Path) -> None:
    record_synthetic_store(in_tmp / DB)
    assert snap_compare(console_app(), terminal_size=SIZE, run_before=_open_trip("step-2", 1))


def test_execution_screen_llm_tab(snap_compare, in_tmp: Path) -> None:
    record_synthetic_store(in_tmp / DB)
    assert snap_compare(console_app(), terminal_size=SIZE,
                        run_before=_open_trip("step-2", 1, tab="4"))  # fmt: skip


def test_execution_screen_response_of_a_rate_limited_attempt(snap_compare, in_tmp: Path) -> None:
    record_synthetic_store(in_tmp / DB)
    assert snap_compare(console_app(), terminal_size=SIZE,
                        run_before=_open_trip("step-1", 1, tab="3"))  # fmt: skip


def test_empty_store_screen(snap_compare, in_tmp: Path) -> None:
    assert snap_compare(console_app(), terminal_size=SIZE, run_before=_settle)


def test_unreadable_store_screen(snap_compare, in_tmp: Path) -> None:
    (in_tmp / DB).write_text("hello, I am not a database\n")
    assert snap_compare(console_app(), terminal_size=SIZE, run_before=_settle)


def test_help_screen_of_the_steps_pane(snap_compare, in_tmp: Path) -> None:
    record_synthetic_store(in_tmp / DB)
    assert snap_compare(console_app(), terminal_size=SIZE,
                        run_before=_open_trip("step-1", 1, tab="f1"))  # fmt: skip
