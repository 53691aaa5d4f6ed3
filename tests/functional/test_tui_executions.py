"""The executions screen through Pilot: list, filter, pages, live refresh, empty and bad stores."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from console.tui.app import TruvaConsoleApp
from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.executions import ExecutionsScreen
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.tables import ExecutionTable
from store.recorder import StoreRecorder
from tests.support.events_factory import START_AT, realistic_execution, small_execution
from tests.support.tui import (
    RealStore,
    cell,
    listed_ids,
    record_synthetic_store,
    settle_loaded,
    shown_text,
    status_line,
    tui_app,
)

SIZE = (120, 36)


async def apply_filter(app: TruvaConsoleApp, pilot, typed: str) -> None:
    """Focus the filter bar with `/`, put `typed` in it and press Enter."""
    await pilot.press("slash")
    assert isinstance(app.focused, FilterBar)
    app.focused.value = typed
    await pilot.press("enter")
    await settle_loaded(pilot)


def sent(messages: list[object], kind: type) -> list:
    """Messages of `kind`, each once (the hook sees a message at every node it bubbles to)."""
    return list({id(m): m for m in messages if isinstance(m, kind)}.values())


def message_panel(app: TruvaConsoleApp, width: int = 116) -> str:
    return shown_text(app.screen.query_one("#executions-message").content, width)


async def test_lists_recorded_executions_newest_first(real_store: RealStore) -> None:
    app = tui_app(real_store.db, db_arg="debug.duckdb", live_refresh=False)
    async with app.run_test(size=(200, 40)) as pilot:  # wide enough for every column
        await settle_loaded(pilot)
        assert listed_ids(app) == [real_store.refused, real_store.corrected,
                                   real_store.rate_limited]  # fmt: skip
        assert cell(app, real_store.refused, "status") == "failed"
        assert cell(app, real_store.refused, "rule") == "terminal.auth_or_method"
        assert cell(app, real_store.refused, "steps") == "0/1/1"
        assert cell(app, real_store.corrected, "llm") == "1"
        assert cell(app, real_store.rate_limited, "attempts") == "2"
        assert "1–3 of 3 executions" in status_line(app)
        assert app.screen.sub_title == "CLI: truva-console --db debug.duckdb ls"
        preview = shown_text(app.screen.query_one("#execution-preview").content)
        assert "Book a flight from LHR" in preview


@pytest.mark.parametrize(
    ("typed", "expected", "ls_args"),
    [
        ("rule:terminal.auth_or_method", ["refused"], "--rule terminal.auth_or_method"),
        ("rule:analyzer.accept", ["corrected"], "--rule analyzer.accept"),
        ("status:succeeded", ["corrected", "rate_limited"], "--status succeeded"),
        ("http:429", ["rate_limited"], "--http-status 429"),
        ("action:retry_corrected tool:demo", ["corrected"],
         "--tool demo --action retry_corrected"),
        ("text:tokio", ["corrected"], "--text tokio"),
        ("Tokio", ["corrected"], "--text Tokio"),
    ],
    ids=["rule-terminal", "rule-analyzer", "status", "http-status", "action-and-tool",
         "text-key", "bare-word-is-text"],
)  # fmt: skip
async def test_filter_narrows_the_list(
    real_store: RealStore, typed: str, expected: list[str], ls_args: str
) -> None:
    app = tui_app(real_store.db, db_arg="debug.duckdb", live_refresh=False)
    messages: list[object] = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle_loaded(pilot)
        await apply_filter(app, pilot, typed)
        assert listed_ids(app) == [getattr(real_store, name) for name in expected]
        assert isinstance(app.focused, ExecutionTable)
        twin = f"truva-console --db debug.duckdb ls {ls_args}"
        assert app.screen.sub_title == f"CLI: {twin}"
        applied = sent(messages, FilterBar.FilterApplied)
        assert [m.parsed.text for m in applied] == [typed]


async def test_a_bad_filter_names_the_problem_and_keeps_the_list(real_store: RealStore) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    messages: list[object] = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle_loaded(pilot)
        await pilot.press("slash", *"status:x", "enter")  # typed key by key once
        await settle_loaded(pilot)
        assert len(listed_ids(app)) == 3
        assert "filter status:x: expected one of running, succeeded" in status_line(app)
        assert app.screen.query_one(FilterBar).has_class("-invalid")
        assert [m.problem for m in sent(messages, FilterBar.FilterRejected)] == [
            "filter status:x: expected one of running, succeeded, partial, failed, "
            "cancelled, interrupted"
        ]


@pytest.mark.parametrize(
    ("steps", "shown", "gone"),
    [
        (["status:fialed", ""], None, ["status:fialed", "filter:"]),
        (["status:fialed", "text:success"], "filter: text:success", ["status:fialed"]),
        (["text:SUCCESS", "text:success"], "filter: text:success", ["SUCCESS"]),
        (["since:2h"], "filter: since:2h", []),
    ],
    ids=["error-then-empty", "error-then-valid", "same-rows-other-case", "since-same-rows"],
)  # fmt: skip
async def test_the_status_line_names_the_filter_applied_even_when_the_rows_are_the_same(
    real_store: RealStore, steps: list[str], shown: str | None, gone: list[str]
) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=(200, 36)) as pilot:
        await settle_loaded(pilot)
        for typed in steps:
            await apply_filter(app, pilot, typed)
        line = status_line(app)
        assert len(listed_ids(app)) == 3
        assert "1–3 of 3 executions" in line
        if shown is not None:
            assert shown in line
        for stale in gone:
            assert stale not in line


async def test_filter_that_matches_nothing_says_so(real_store: RealStore) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle_loaded(pilot)
        await apply_filter(app, pilot, "rule:budget.attempts")
        assert "No executions match this filter" in message_panel(app)
        assert "rule:budget.attempts" in message_panel(app)


async def test_enter_opens_the_highlighted_execution(real_store: RealStore) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    messages: list[object] = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle_loaded(pilot)
        await pilot.press("j", "enter")
        await settle_loaded(pilot)
        assert isinstance(app.screen, ExecutionScreen)
        assert app.screen.execution_id == real_store.corrected
        chosen = sent(messages, ExecutionTable.ExecutionChosen)
        assert [m.execution_id for m in chosen] == [real_store.corrected]
        await pilot.press("escape")
        assert isinstance(app.screen, ExecutionsScreen)


async def test_pages_through_the_store_with_limit_and_offset(real_store: RealStore) -> None:
    app = tui_app(real_store.db, db_arg="debug.duckdb", live_refresh=False, page_size=2)
    async with app.run_test(size=SIZE) as pilot:
        await settle_loaded(pilot)
        assert listed_ids(app) == [real_store.refused, real_store.corrected]
        assert "1–2 of 3 executions" in status_line(app)
        await pilot.press("n")
        await settle_loaded(pilot)
        assert listed_ids(app) == [real_store.rate_limited]
        assert "3–3 of 3 executions" in status_line(app)
        assert app.screen.sub_title.endswith("ls --limit 2 --offset 2")
        await pilot.press("n")  # no page after the last one
        await settle_loaded(pilot)
        assert listed_ids(app) == [real_store.rate_limited]
        await pilot.press("p")
        await settle_loaded(pilot)
        assert listed_ids(app) == [real_store.refused, real_store.corrected]


async def _poll_until(app, pilot, screen, condition, what: str) -> None:
    """Poll as the one-second timer does until `condition()` holds; a poll that met a busy
    store (a recorder holding the file on a loaded machine) is simply repeated."""
    for _ in range(20):
        screen.poll_store()
        await settle_loaded(pilot)
        if condition():
            return
    raise AssertionError(f"the list never showed: {what}")


async def test_live_refresh_shows_a_new_and_a_running_execution(tmp_path: Path) -> None:
    db = record_synthetic_store(tmp_path / "debug.duckdb")
    app = tui_app(db)
    async with app.run_test(size=SIZE) as pilot:
        await settle_loaded(pilot)
        screen = app.screen
        assert isinstance(screen, ExecutionsScreen)
        assert screen.refresh_interval_s == 1.0
        assert "live" in status_line(app)
        assert "exec-new" not in listed_ids(app)

        with StoreRecorder(db) as recorder:
            for event in small_execution("exec-new", start_at=START_AT + 600):
                recorder.record(event)
        await _poll_until(app, pilot, screen, lambda: listed_ids(app)[0] == "exec-new",
                          "exec-new first")

        recorder = StoreRecorder(db)
        events = realistic_execution("exec-live", start_at=START_AT + 900)
        try:
            for event in events[:-1]:
                recorder.record(event)
            recorder.flush()
            await _poll_until(app, pilot, screen, lambda: listed_ids(app)[0] == "exec-live",
                              "exec-live first")
            assert cell(app, "exec-live", "status") == "● running ⚠2"  # 400 and 401 bodies
            assert cell(app, "exec-live", "duration") == "running"
            recorder.record(events[-1])
        finally:
            recorder.close()
        await _poll_until(app, pilot, screen,
                          lambda: cell(app, "exec-live", "status") == "partial ⚠2",
                          "exec-live partial")


async def test_empty_store_says_how_to_record_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path: the hint's line fits whatever tmp_path is
    db = Path("nothing-yet.duckdb")
    app = tui_app(db, db_arg=str(db))
    async with app.run_test(size=SIZE) as pilot:
        await settle_loaded(pilot)
        panel = message_panel(app)
        assert "No executions recorded yet" in panel
        assert f"truva-console --db {db} run PLAN" in panel
        assert not db.exists()  # the console never creates a store
        record_synthetic_store(db)
        app.screen.poll_store()
        await settle_loaded(pilot)
        assert len(listed_ids(app)) == 3


def _not_duckdb(path: Path) -> str:
    path.write_text("hello, I am not a database\n")
    return "not a DuckDB database"


def _newer_schema(path: Path) -> str:
    record_synthetic_store(path)
    with duckdb.connect(str(path)) as conn:
        conn.execute("UPDATE schema_info SET value = '999' WHERE key = 'schema_version'")
    return "999"


@pytest.mark.parametrize("make_bad_store", [_not_duckdb, _newer_schema],
                         ids=["not-duckdb", "newer-schema"])  # fmt: skip
async def test_a_store_that_cannot_be_opened_shows_one_line(tmp_path: Path, make_bad_store) -> None:
    db = tmp_path / "debug.duckdb"
    expected = make_bad_store(db)
    app = tui_app(db, live_refresh=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle_loaded(pilot)
        panel = message_panel(app, width=400)
        assert panel.startswith("Cannot open the debug store")
        problem = app.store_problem
        assert problem is not None and "\n" not in problem and expected in problem
        assert problem in panel and "Traceback" not in panel
        assert [n.message for n in app._notifications] == [problem]
        await pilot.press("q")
    assert app.return_code == 2


async def test_palette_lists_grouped_commands_and_opens_an_execution(
    real_store: RealStore,
) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle_loaded(pilot)
        titles = [command.title for command in app.screen.palette_commands()]
        assert {"view: Refresh", "filter: Edit filter", "page: Next page"} <= set(titles)
        assert f"execution: Open {real_store.corrected}" in titles
        await pilot.press("ctrl+p")
        await pilot.press(*real_store.corrected[-6:])
        await settle_loaded(pilot)
        await pilot.press("enter")
        await settle_loaded(pilot)
        assert isinstance(app.screen, ExecutionScreen)
        assert app.screen.execution_id == real_store.corrected
