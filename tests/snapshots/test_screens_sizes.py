"""SVG snapshots of the executions list, the execution screen, the help of a pane and the replay
screen (original and replay side by side) at 80x24 and 200x50."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.snapshots.test_screens import DB, _open_trip, _settle, console_app
from tests.snapshots.test_screens_replay import _replayed_with_200_on_dispatch_2, sample_store
from tests.snapshots.test_screens_replay import console_app as replay_app
from tests.support.tui import record_synthetic_store, settle_until

SIZES = [(80, 24), (200, 50)]
IDS = ["80x24", "200x50"]
__all__ = ["sample_store"]  # the replay store fixture, shared with test_screens_replay


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_executions_screen_at(snap_compare, in_tmp: Path, size: tuple[int, int]) -> None:
    record_synthetic_store(in_tmp / DB)
    assert snap_compare(console_app(), terminal_size=size, run_before=_settle)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_execution_screen_failing_step_at(
    snap_compare, in_tmp: Path, size: tuple[int, int]
) -> None:
    record_synthetic_store(in_tmp / DB)
    assert snap_compare(console_app(), terminal_size=size, run_before=_open_trip("step-3", 1))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_help_screen_of_a_pane_at(snap_compare, in_tmp: Path, size: tuple[int, int]) -> None:
    record_synthetic_store(in_tmp / DB)
    assert snap_compare(console_app(), terminal_size=size,
                        run_before=_open_trip("step-3", 1, tab="f1"))  # fmt: skip


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_replay_screen_side_by_side_at(
    snap_compare, sample_store: Path, size: tuple[int, int]
) -> None:
    assert snap_compare(replay_app(), terminal_size=size,
                        run_before=_replayed_with_200_on_dispatch_2)  # fmt: skip


async def _searched_rule_id(pilot) -> None:
    """TRIP on its failing step, ctrl+f in the Decision tab for the deciding rule's id."""
    from textual.widgets import Input

    from console.tui.widgets.search_bar import SearchBar

    await _open_trip("step-3", 1, tab="1")(pilot)
    await pilot.press("ctrl+f")
    bar = pilot.app.screen.query_one(SearchBar)
    search_input = bar.query_one(Input)
    search_input.cursor_blink = False  # no blinking cursor in the picture
    search_input.value = "terminal"
    await settle_until(pilot, lambda: bar.result is not None, "the search result")
    await pilot.press("enter")
    await settle_until(pilot, lambda: bar.current == 1, "the second match")
    await _settle(pilot)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_execution_screen_search_highlights_at(
    snap_compare, in_tmp: Path, size: tuple[int, int]
) -> None:
    record_synthetic_store(in_tmp / DB)
    assert snap_compare(console_app(), terminal_size=size, run_before=_searched_rule_id)
