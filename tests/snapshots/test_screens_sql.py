"""SVG snapshots of the SQL screen at 80x24 and 200x50, on the synthetic store."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.tui.screens.sql import SqlScreen
from console.tui.widgets.sql_results import SqlResultTable
from tests.snapshots.test_screens import DB, _settle, console_app
from tests.support.tui import record_synthetic_store, settle_until

SIZES = [(80, 24), (200, 50)]
IDS = ["80x24", "200x50"]
QUERY = ("SELECT execution_id, step_id, n, http_status, action, rule_id\nFROM attempts\n"
         "ORDER BY execution_id, step_id, n;")  # fmt: skip


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


async def _ran_query(pilot) -> None:
    await _settle(pilot)
    # A clock that stands still, so the status line's timing is the same on every run.
    screen = SqlScreen(Path(DB), db_arg=DB, clock=lambda: 0.0)
    pilot.app.push_screen(screen)
    await settle_until(pilot, lambda: pilot.app.screen is screen, "the SQL screen")
    screen.editor.load_text(QUERY)
    await pilot.press("f5")
    await settle_until(pilot, lambda: not screen.running and screen.outcome is not None,
                       "the query's rows")  # fmt: skip
    screen.query_one(SqlResultTable).focus()  # no blinking editor cursor in the picture
    await _settle(pilot)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_sql_screen_with_a_result_at(snap_compare, in_tmp: Path, size: tuple[int, int]) -> None:
    record_synthetic_store(in_tmp / DB)
    assert snap_compare(console_app(), terminal_size=size, run_before=_ran_query)
