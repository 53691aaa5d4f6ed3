"""SVG snapshots of the execution screen as a debugging instrument, at 80x24 and 200x50: where
it opens (the failing step, with its tool-contract warning), the timeline and the request diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.snapshots.test_screens import DB, _open_trip, console_app
from tests.support.tui import record_synthetic_store

SIZES = {"80x24": (80, 24), "200x50": (200, 50)}


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    record_synthetic_store(tmp_path / DB)
    return tmp_path


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_execution_opens_on_the_failing_step_with_its_warning(snap_compare, in_tmp, size) -> None:
    assert snap_compare(console_app(), terminal_size=size, run_before=_open_trip())


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_execution_screen_timeline_tab(snap_compare, in_tmp, size) -> None:
    assert snap_compare(console_app(), terminal_size=size,
                        run_before=_open_trip("step-1", 2, tab="6"))  # fmt: skip


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_execution_screen_request_diff_tab(snap_compare, in_tmp, size) -> None:
    assert snap_compare(console_app(), terminal_size=size,
                        run_before=_open_trip("step-2", 2, tab="7"))  # fmt: skip
