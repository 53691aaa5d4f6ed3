"""SVG snapshots of the replay screen and the export dialog at 120x36, on the sample store."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.samples import sample_execution_ids
from console.tui.app import TruvaConsoleApp
from console.tui.screens.bundle import ExportDialog
from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.replay import ReplayScreen
from console.tui.widgets.replay_view import DispatchTable
from console.tui.widgets.tables import ExecutionTable
from tests.support.demo_store import sample_store_copy
from tests.support.tui import screen_loaded, settle_until, tui_app

SIZE = (120, 36)
DB = "debug.duckdb"  # relative to the test's directory, so no temporary path is drawn
MISCLASSIFIED_503 = sample_execution_ids()["scenario-d-misclassified-503"]
REPLAY_ID = "20261129-160000-replay"
OK_200 = '{"status": 200, "body": {"success": true, "data": {"temp_c": 21}}}'


@pytest.fixture
def sample_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        "executor.runtime.plan_executor.new_execution_id", lambda now=None: REPLAY_ID
    )
    return sample_store_copy(tmp_path / DB)


def console_app() -> TruvaConsoleApp:
    return tui_app(Path(DB), db_arg=DB, live_refresh=False,
                   replay_files_dir=Path("replay-files"))  # fmt: skip


async def _settle(pilot) -> None:
    await screen_loaded(pilot)
    await pilot.wait_for_scheduled_animations()


async def _replayed_with_200_on_dispatch_2(pilot) -> None:
    app = pilot.app
    await _settle(pilot)
    app.open_execution(MISCLASSIFIED_503)
    await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), MISCLASSIFIED_503)
    await _settle(pilot)
    await pilot.press("R")
    await settle_until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay screen")
    screen = app.screen
    screen.edit_response(2, OK_200)
    await pilot.press("ctrl+r")
    await settle_until(pilot, lambda: screen.result is not None, "the replay result")
    screen.query_one(DispatchTable).focus()  # no blinking cursor in the picture
    await _settle(pilot)


async def _export_dialog(pilot) -> None:
    app = pilot.app
    await _settle(pilot)
    app.screen.query_one(ExecutionTable).move_to_key(MISCLASSIFIED_503)
    await pilot.press("x")
    await settle_until(pilot, lambda: isinstance(app.screen, ExportDialog), "the export dialog")
    app.screen.query_one("#export-run").focus()  # no blinking cursor in the picture
    await _settle(pilot)


def test_replay_screen_comparison(snap_compare, sample_store: Path) -> None:
    assert snap_compare(console_app(), terminal_size=SIZE,
                        run_before=_replayed_with_200_on_dispatch_2)  # fmt: skip


def test_export_dialog(snap_compare, sample_store: Path) -> None:
    assert snap_compare(console_app(), terminal_size=SIZE, run_before=_export_dialog)
