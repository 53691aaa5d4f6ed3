"""On the samples (`truva-console --samples`), a twin must work after the console has gone:
`--samples` for the sample executions it rebuilds, the copy's path for one recorded since."""

from __future__ import annotations

from pathlib import Path

from console.samples import sample_execution_ids
from console.tui.app import TruvaConsoleApp
from console.tui.widgets.cells import SAMPLES_DB_ARG
from store.recorder import StoreRecorder
from tests.support.demo_store import sample_store_copy
from tests.support.events_factory import small_execution
from tests.support.tui import open_execution, screen_loaded

NEW = "20261206-220000-recorded01"  # what a replay or re-run in the console records


async def test_a_twin_names_the_copy_for_an_execution_recorded_in_it(tmp_path: Path) -> None:
    """Found by an outside check: a replay's result said `truva-console --samples explain ID`,
    which a fresh copy of the samples does not hold ("no execution id starts with …")."""
    db = sample_store_copy(tmp_path / "samples.duckdb")
    with StoreRecorder(db) as recorder:
        for event in small_execution(NEW):
            recorder.record(event)
    sample = sorted(sample_execution_ids().values())[0]
    app = TruvaConsoleApp(db, db_arg=SAMPLES_DB_ARG, live_refresh=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await screen_loaded(pilot)
        assert app.screen.sub_title.startswith(f"CLI: truva-console --db {db} ls")
        screen = await open_execution(app, pilot, NEW)
        assert screen.sub_title.startswith(f"CLI: truva-console --db {db} explain {NEW}")
        await pilot.press("escape")
        screen = await open_execution(app, pilot, sample)
        assert screen.sub_title.startswith(f"CLI: truva-console --samples explain {sample}")


async def test_the_list_of_the_samples_alone_says_samples(tmp_path: Path) -> None:
    db = sample_store_copy(tmp_path / "samples.duckdb")
    app = TruvaConsoleApp(db, db_arg=SAMPLES_DB_ARG, live_refresh=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await screen_loaded(pilot)
        assert app.screen.sub_title == "CLI: truva-console --samples ls"
