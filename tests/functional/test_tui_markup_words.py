"""Text from the store that looks like Rich markup (`[/INST]`, `[bold]`) is shown as typed.

A `str` given to a DataTable cell, an OptionList option or a Rich Table cell is read as
markup: `[probe=x]` vanished, and an unmatched closing tag such as `[/INST]` (a chat template's
word, in an agent's query) raised MarkupError and took the whole console down, at launch for a
query in the store, and on every opening of the SQL screen once such a query was in the history.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import duckdb
import pytest

from console.tui.screens.help import HelpScreen
from console.tui.screens.sql import SqlScreen
from console.tui.sql_book import history_path
from console.tui.widgets.sql_results import SqlBook, SqlResultTable
from console.tui.widgets.tables import StepTable
from tests.functional.test_tui_sql import SIZE, open_sql, run_query
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply
from tests.support.tui import listed_ids, open_execution, settle_loaded, settle_until, tui_app

MARKUP_QUERY = "Answer [/INST] then [bold]x[/bold] with [probe=x] left in"
MARKUP_SQL = "SELECT '[/bold] [probe=x] [error] kept' AS words, 1 AS n"


def screen_text(app) -> str:
    """The terminal as plain text (the screenshot's SVG text runs, unescaped)."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


@pytest.fixture
def markup_store(tmp_path: Path) -> Path:
    db = tmp_path / "debug.duckdb"
    with ScriptedToolServer() as tools:
        tools.script("/capabilities/echo", ToolReply.ok({"said": "[/oops]"}))
        document = plan(tools.base_url, {"echo": capability("echo")},
                        [step("step-1", "echo", {"text": "[/p]"})], query=MARKUP_QUERY)
        result = run_cli("--db", str(db), "run", str(write_plan(tmp_path, document)))
        assert result.code == 0, result.stderr
    return db


async def test_a_query_with_markup_words_is_listed_as_typed(markup_store: Path) -> None:
    app = tui_app(markup_store, live_refresh=False)
    async with app.run_test(size=(200, 30)) as pilot:
        await settle_loaded(pilot)
        assert MARKUP_QUERY in screen_text(app)


async def test_a_history_entry_with_markup_words_keeps_the_sql_screen_open(
    markup_store: Path,
) -> None:
    app = tui_app(markup_store, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, MARKUP_SQL)
        table = screen.query_one(SqlResultTable)
        assert [c.plain for c in table.get_row_at(0)] == ["[/bold] [probe=x] [error] kept", "1"]
        assert "[/bold] [probe=x] [error] kept" in screen_text(app)
    assert MARKUP_SQL in history_path().read_text(encoding="utf-8")
    # A new session lists the entry (and draws it) instead of crashing.
    app = tui_app(markup_store, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        assert [entry.query for entry in screen.query_one(SqlBook).history] == [MARKUP_SQL]
        assert "SELECT '[/bold] [probe=x]" in screen_text(app)
        assert isinstance(app.screen, SqlScreen)


async def test_help_shows_the_sql_twin_with_its_brackets(markup_store: Path) -> None:
    app = tui_app(markup_store, live_refresh=False)
    async with app.run_test(size=(160, 60)) as pilot:
        screen = await open_sql(app, pilot)
        screen.editor.load_text("SELECT '[probe=x]' AS w")
        await pilot.press("f1")
        await settle_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        text = screen_text(app)
        help_text = text[text.index("Keys of the SQL pane"):]
        assert "'\"'\"'[probe=x]'\"'\"' AS w'" in help_text  # the shell-quoted twin


async def test_the_palette_lists_a_history_entry_with_markup_words(markup_store: Path) -> None:
    app = tui_app(markup_store, live_refresh=False)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, MARKUP_SQL)
        await pilot.press("ctrl+p", *"history")
        await settle_until(pilot, lambda: "history: SELECT '[/bold]" in screen_text(app),
                           "the history entry in the palette")  # fmt: skip
        await pilot.press("escape")


async def test_the_execution_screen_shows_parameters_and_bodies_with_markup_words(
    markup_store: Path,
) -> None:
    app = tui_app(markup_store, live_refresh=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle_loaded(pilot)
        (execution_id,) = listed_ids(app)
        screen = await open_execution(app, pilot, execution_id)
        assert '"[/p]"' in screen_text(app)  # the step line's parameters, and the decision's
        for tab in "234567":
            await pilot.press(tab)
            await pilot.pause()
            text = screen_text(app)
            if tab == "2":
                assert '"text": "[/p]"' in text
            if tab == "3":
                assert "[/oops]" in text
        assert app.screen is screen


MARKUP_STEP_IDS = {"step-1": "[bold]x", "step-2": "s[/i]1"}


@pytest.fixture
def markup_steps_store(tmp_path: Path) -> Path:
    """A store whose step ids look like markup. A plan's ids are plain, so they come as an
    imported bundle's or an edited store's would."""
    db = tmp_path / "debug.duckdb"
    ids = MARKUP_STEP_IDS
    with ScriptedToolServer() as tools:
        document = plan(tools.base_url, {"echo": capability("echo")},
                        [step(step_id, "echo", {"n": 1}) for step_id in ids])  # fmt: skip
        result = run_cli("--db", str(db), "run", str(write_plan(tmp_path, document)))
        assert result.code == 0, result.stderr
    with duckdb.connect(str(db)) as conn:
        for table in ("steps", "attempts", "events"):
            for old, new in ids.items():
                conn.execute(f"UPDATE {table} SET step_id = ? WHERE step_id = ?", [new, old])
    return db


async def test_step_ids_with_markup_words_are_shown_as_typed(markup_steps_store: Path) -> None:
    # The step and attempt tables gave DataTable plain str cells, which it reads as markup:
    # `[bold]x` lost its brackets and an unmatched `[/i]` raised MarkupError.
    ids = MARKUP_STEP_IDS
    app = tui_app(markup_steps_store, live_refresh=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle_loaded(pilot)
        (execution_id,) = listed_ids(app)
        screen = await open_execution(app, pilot, execution_id)
        steps = screen.query_one(StepTable)
        shown = {steps.get_row_at(row)[0].plain for row in range(steps.row_count)}
        assert shown == set(ids.values())
        text = screen_text(app)
        assert all(step_id in text for step_id in ids.values())
        assert app.screen is screen
