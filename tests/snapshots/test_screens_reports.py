"""SVG snapshots of the what-if and lint report screens at 80x24 and 200x50, on a store recorded
from the demo runs with numbered execution ids (the screens show no times)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Input

from console.tui.app import TruvaConsoleApp
from console.tui.screens.lint import CheckTable, LintScreen
from console.tui.screens.whatif import ChangeTable, WhatIfScreen
from tests.snapshots.test_screens import _settle
from tests.support.demo_store import execution_of, record_demo_store
from tests.support.tui import screen_loaded, settle_until, tui_app

SIZES = [(80, 24), (200, 50)]
IDS = ["80x24", "200x50"]
DB = "debug.duckdb"  # relative to the test's directory, so no temporary path is drawn


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    return record_demo_store(Path(tmp_path_factory.mktemp("reports")) / DB, fixed_ids=True)


@pytest.fixture
def in_tmp(tmp_path: Path, recorded: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copy(recorded, tmp_path / DB)
    return tmp_path


def console_app() -> TruvaConsoleApp:
    return tui_app(Path(DB), db_arg=DB, live_refresh=False)


async def _whatif_max_attempts_5(pilot) -> None:
    app = pilot.app
    await screen_loaded(pilot)
    await pilot.press("w")
    await settle_until(pilot, lambda: isinstance(app.screen, WhatIfScreen), "what-if")
    screen = app.screen
    screen.query_one("#whatif-config", Input).value = "max_attempts=5"
    await pilot.press("ctrl+r")
    await settle_until(pilot, lambda: screen.view is not None, "the what-if result")
    scenario_d = execution_of(Path(DB), "scenario-d-misclassified-503")
    changes = screen.query_one(ChangeTable)
    index = next(i for i, c in enumerate(screen.view.changes) if c.execution_id == scenario_d)
    changes.focus()
    changes.move_cursor(row=index, animate=False)
    await _settle(pilot)


async def _lint_on_the_failing_check(pilot) -> None:
    app = pilot.app
    await screen_loaded(pilot)
    await pilot.press("c")
    await settle_until(pilot, lambda: isinstance(app.screen, LintScreen), "lint")
    screen = app.screen
    await settle_until(pilot, lambda: screen.views is not None, "the report cards")
    screen.query_one(CheckTable).move_to_key("weather#input_error_status")
    await _settle(pilot)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_whatif_screen_at(snap_compare, in_tmp: Path, size: tuple[int, int]) -> None:
    assert snap_compare(console_app(), terminal_size=size, run_before=_whatif_max_attempts_5)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_lint_screen_at(snap_compare, in_tmp: Path, size: tuple[int, int]) -> None:
    assert snap_compare(console_app(), terminal_size=size, run_before=_lint_on_the_failing_check)
