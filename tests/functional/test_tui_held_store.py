"""The executions list when another process holds the store file: it keeps what it last read."""

from __future__ import annotations

from pathlib import Path

from console.tui.screens.executions import ExecutionsScreen
from tests.support.holder import HOLDER_NAME, hold_file, release
from tests.support.tui import (
    listed_ids,
    record_synthetic_store,
    settle_loaded,
    status_line,
    tui_app,
)

SIZE = (120, 36)


async def test_list_keeps_its_rows_and_says_why_when_a_refresh_meets_a_held_file(
    tmp_path: Path,
) -> None:
    db = record_synthetic_store(tmp_path / "debug.duckdb")
    app = tui_app(db, live_refresh=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle_loaded(pilot)
        screen = app.screen
        assert isinstance(screen, ExecutionsScreen)
        rows = listed_ids(app)
        assert len(rows) == 3

        holder = hold_file(db)
        try:
            screen.poll_store()
            await settle_loaded(pilot)
            problem = (
                f"{HOLDER_NAME} (pid {holder.pid}) holds {db}; close it, or use "
                "'truva-console sql' to query the store"
            )
            assert screen.held_notice == problem
            assert screen.problem is None
            assert listed_ids(app) == rows
            assert screen.query_one("#executions-switcher").current == "executions-table"
            assert [n.message for n in app._notifications] == [problem]
            assert [n.title for n in app._notifications] == ["Showing what was last read"]
            assert f"last read; {HOLDER_NAME} (pid {holder.pid}) holds" in status_line(app)
        finally:
            release(holder)

        screen.poll_store()
        await settle_loaded(pilot)
        assert screen.held_notice is None
        assert "last read" not in status_line(app)
        assert listed_ids(app) == rows
        await pilot.press("q")
    assert app.return_code == 0
