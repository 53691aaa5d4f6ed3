"""The execution screen on small terminals: the attempt under the cursor is the one shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.tui.app import TruvaConsoleApp
from console.tui.widgets.tables import AttemptTable
from tests.support.demo_store import execution_of, record_demo_store
from tests.support.tui import open_execution


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    return record_demo_store(Path(tmp_path_factory.mktemp("small")) / "demo.duckdb")


def visible_rows(table: AttemptTable) -> range:
    """The row indexes the table's viewport shows (its header row is fixed)."""
    top = round(table.scroll_y)
    return range(top, top + table.scrollable_content_region.height - table.header_height)


@pytest.mark.parametrize("size", [(80, 24), (60, 20), (120, 30), (160, 45)])
async def test_the_decisive_attempt_is_in_view_when_the_screen_opens(demo_db, size):
    """circuit-open's step stops at attempt 10 of 10 (found by an outside check: at 80×24 the
    Attempts pane showed attempt 7, not highlighted, while the detail described 10 — the
    scroll offset was the one of the table's first, taller layout)."""
    execution_id = execution_of(demo_db, "circuit-open")
    app = TruvaConsoleApp(db_path=demo_db, live_refresh=False)
    async with app.run_test(size=size) as pilot:
        screen = await open_execution(app, pilot, execution_id)
        await pilot.pause()
        table = screen.query_one(AttemptTable)
        assert table.highlighted_key() == "10"
        assert screen.attempt_n == 10
        assert table.cursor_row in visible_rows(table), (table.scroll_y, table.size)
