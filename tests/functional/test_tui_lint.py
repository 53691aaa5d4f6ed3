"""The lint report screen through Pilot, on a store recorded from the real demo runs."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import duckdb
import pytest
from textual.widgets import Static

from console.entry import main
from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.executions import ExecutionsScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.lint import CheckTable, LintScreen
from console.tui.widgets.tables import AttemptTable
from tests.support.demo_store import record_demo_store
from tests.support.tui import screen_loaded, settle_until, shown_text, table_cell, tui_app

SIZE = (160, 40)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    return record_demo_store(Path(tmp_path_factory.mktemp("tui-lint")) / "demo.duckdb")


def shown(screen: LintScreen, selector: str) -> str:
    return shown_text(screen.query_one(selector, Static).content, 1000)


async def open_lint(pilot) -> LintScreen:
    await screen_loaded(pilot)
    await pilot.press("c")
    await settle_until(pilot, lambda: isinstance(pilot.app.screen, LintScreen), "lint")
    screen = pilot.app.screen
    await settle_until(pilot, lambda: screen.views is not None or screen.problem is not None,
                       "the report cards")  # fmt: skip
    return screen


def cli_cards(db: Path, capsys) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["lint", "--db", str(db), "--json"]) == 1  # weather fails a check
    return {card["tool"]: card for card in json.loads(capsys.readouterr().out)["tools"]}


async def test_lint_flags_the_503_for_an_input_error_and_enter_opens_the_example_attempt(
    demo_db: Path, capsys
) -> None:
    cards = cli_cards(demo_db, capsys)
    check = next(c for c in cards["weather"]["checks"] if c["check"] == "input_error_status")
    example = check["example"]
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lint(pilot)
        table = screen.query_one(CheckTable)
        assert table_cell(table, "weather", "grade") == "FAIL"
        key = "weather#input_error_status"
        assert table_cell(table, key, "grade") == "FAIL"
        assert table_cell(table, key, "check") == "input errors as 4xx, not 5xx (Scenario D)"
        assert table_cell(table, key, "fail") == str(check["counts"]["fail"]) != "0"
        assert table_cell(table, key, "example") == \
            f"{example['execution_id']} {example['step_id']} #{example['n']}"
        assert "1 fail" in shown(screen, "#lint-summary")
        assert table.move_to_key(key)
        await pilot.pause()
        detail = shown(screen, "#lint-detail")
        assert 'HTTP 503 for an input error ("location not found: Flower Mound")' in detail
        assert f"{example['execution_id']} {example['step_id']} #{example['n']} (HTTP 503)" \
            in detail
        await pilot.press("enter")
        await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), "execution")
        await screen_loaded(pilot)
        opened = app.screen
        assert (opened.execution_id, opened.step_id, opened.attempt_n) == (
            example["execution_id"], example["step_id"], example["n"])  # fmt: skip
        assert opened.query_one(AttemptTable).highlighted_key() == str(example["n"])
        await pilot.press("escape")
        assert app.screen is screen


async def test_every_card_and_count_is_what_lint_json_prints(demo_db: Path, capsys) -> None:
    cards = cli_cards(demo_db, capsys)
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lint(pilot)
        table = screen.query_one(CheckTable)
        rows = 0
        for tool, card in cards.items():
            assert table_cell(table, tool, "grade").lower() == card["grade"]
            assert table_cell(table, tool, "check").startswith(f"{card['responses']} response")
            for check in card["checks"]:
                key = f"{tool}#{check['check']}"
                assert table_cell(table, key, "grade").lower() == check["grade"]
                assert table_cell(table, key, "check") == check["title"]
                for grade in ("pass", "warn", "fail"):
                    assert table_cell(table, key, grade) == str(check["counts"][grade])
            rows += 1 + len(card["checks"])
        assert table.row_count == rows


async def test_enter_on_a_check_every_response_passed_says_there_is_no_example(
    demo_db: Path,
) -> None:
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lint(pilot)
        table = screen.query_one(CheckTable)
        assert table.move_to_key("stocks#retry_after")
        table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen
        assert [n.title for n in app._notifications] == ["No example attempt"]
        assert "no example to open" in shown(screen, "#lint-detail")


async def test_the_cli_twin_is_in_the_header_the_help_and_y(demo_db: Path) -> None:
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lint(pilot)
        twin = f"truva-console --db {demo_db} lint"
        assert screen.sub_title == f"CLI: {twin}"
        await pilot.press("Y")
        assert app.clipboard == twin
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        help_text = shown_text(app.screen.query_one("#help-body", Static).content, 400)
        assert "Lint report screen" in help_text and twin in help_text
        await pilot.press("escape", "escape")
        assert isinstance(app.screen, ExecutionsScreen)


async def test_a_missing_store_is_the_cli_line_in_the_screen(tmp_path: Path, capsys) -> None:
    db = tmp_path / "missing.duckdb"
    capsys.readouterr()
    assert main(["lint", "--db", str(db)]) == 2
    cli_line = capsys.readouterr().err.strip().removeprefix("truva-console: ")
    app = tui_app(db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lint(pilot)
        assert screen.views is None
        assert shown(screen, "#lint-summary").strip() == cli_line


def _screen_text(app) -> str:
    """The terminal as plain text (the screenshot's SVG text runs, unescaped)."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


async def test_many_capabilities_leave_the_example_attempt_readable(
    demo_db: Path, tmp_path: Path, capsys
) -> None:
    db = tmp_path / "many.duckdb"
    shutil.copy(demo_db, db)
    with duckdb.connect(str(db)) as conn:
        conn.execute("UPDATE steps SET capability = 'forecast_capability_with_a_long_name_' || "
                     "substr(md5(execution_id || step_id), 1, 12) WHERE tool = 'weather'")
        conn.execute("UPDATE steps SET tool = 'weather' WHERE tool <> 'weather'")  # one card
    cards = cli_cards(db, capsys)
    assert len(cards["weather"]["capabilities"]) >= 5
    check = next(c for c in cards["weather"]["checks"] if c["check"] == "input_error_status")
    example = f"{check['example']['execution_id']} {check['example']['step_id']} " \
              f"#{check['example']['n']}"
    app = tui_app(db, db_arg=str(db), live_refresh=False)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await open_lint(pilot)
        table = screen.query_one(CheckTable)
        assert table.move_to_key("weather#input_error_status")
        await pilot.pause()
        row = next(line for line in _screen_text(app).splitlines()  # the table's row
                   if line.startswith("│") and "input errors as 4xx" in line and "FAIL" in line)
        assert example in row
        assert table_cell(table, "weather", "check").endswith("…)")
        assert table.move_to_key("weather")
        await pilot.pause()
        assert ", ".join(cards["weather"]["capabilities"]) in shown(screen, "#lint-detail")
