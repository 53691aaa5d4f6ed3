"""The executions list's columns through Pilot: sorting, fitting 80×24 and 200×50, and `ls`
listing the same rows, columns and order as its twin."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from console.render.execution_columns import EXECUTION_COLUMNS, RowOrder
from console.samples import prepare_sample_store
from console.tui.app import TruvaConsoleApp
from console.tui.widgets.tables import ExecutionTable
from tests.support.plans import run_cli
from tests.support.tui import screen_loaded, tui_app

HEADERS = {column.key: column.header for column in EXECUTION_COLUMNS}


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_sample_store(tmp_path_factory.mktemp("list-columns") / "samples.duckdb")


def table_of(app: TruvaConsoleApp) -> ExecutionTable:
    return app.screen.query_one(ExecutionTable)


def shown_rows(table: ExecutionTable) -> list[dict[str, str]]:
    rows = []
    for index in range(table.row_count):
        values = table.get_row_at(index)
        rows.append({key: getattr(value, "plain", str(value))
                     for key, value in zip(table.shown_columns, values, strict=True)})  # fmt: skip
    return rows


def ls_rows(argv: list[str]) -> list[dict[str, str]]:
    """`ls` run in-process with the twin's arguments; each line split into its columns."""
    result = run_cli(*argv)
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    keys = [column.key for column in EXECUTION_COLUMNS]
    assert re.split(r"\s{2,}", lines[0]) == [HEADERS[key] for key in keys]
    return [dict(zip(keys, re.split(r"\s{2,}", line), strict=True)) for line in lines[1:-1]]


def twin_argv(app: TruvaConsoleApp) -> list[str]:
    command = shlex.split(app.screen.sub_title.removeprefix("CLI: "))
    assert command[0] == "truva-console"
    return command[1:]


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((80, 24), ["execution", "status", "attempts", "llm", "query"]),
        ((200, 50), [column.key for column in EXECUTION_COLUMNS]),
    ],
    ids=["80x24", "200x50"],
)
async def test_columns_fit_the_terminal_and_the_query_stays_visible(
    sample_db: Path, size: tuple[int, int], expected: list[str]
) -> None:
    app = tui_app(sample_db, db_arg=str(sample_db), live_refresh=False)
    async with app.run_test(size=size) as pilot:
        await screen_loaded(pilot)
        table = table_of(app)
        assert list(table.shown_columns) == expected
        queries = [row["query"] for row in shown_rows(table)]
        total = sum(column.get_render_width(table) for column in table.columns.values())
        inside = table.size.width - table.styles.scrollbar_size_vertical
    # The query takes exactly the width the other columns leave inside the scrollbar: no more,
    # which scrolled the table sideways under its scrollbar (its width was measured once, at
    # the first draw's wider guess, and DataTable never narrows a column), no less.
    assert all(queries) and total == inside
    assert table.virtual_size.width <= inside


async def test_the_list_and_its_ls_twin_show_the_same_rows_in_the_same_order(
    sample_db: Path,
) -> None:
    app = tui_app(sample_db, db_arg=str(sample_db), live_refresh=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await screen_loaded(pilot)
        shown = shown_rows(table_of(app))
        argv = twin_argv(app)
    listed = ls_rows(argv)
    assert argv == ["--db", str(sample_db), "ls"]
    assert len(shown) == len(listed) > 10
    for tui_row, ls_row in zip(shown, listed, strict=True):
        tui_query, ls_query = tui_row.pop("query"), ls_row.pop("query")
        assert tui_row == ls_row
        assert tui_query.startswith(ls_query.removesuffix("…"))


async def test_sort_keys_order_the_page_and_the_twin_sorts_the_same(sample_db: Path) -> None:
    app = tui_app(sample_db, db_arg=str(sample_db), live_refresh=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await screen_loaded(pilot)
        table = table_of(app)
        await pilot.press("s")  # the first column, A to Z
        ascending = [row["execution"] for row in shown_rows(table)]
        ascending_twin = twin_argv(app)
        await pilot.press("S")  # reversed
        descending = [row["execution"] for row in shown_rows(table)]
        header = str(table.columns["execution"].label)
        status = str(app.screen.query_one("#executions-status").content)
        table.sort_by(RowOrder("tokens", True))
        await pilot.pause()
        by_tokens = shown_rows(table)
        tokens_twin = twin_argv(app)
    assert ascending == sorted(ascending) and descending == sorted(ascending, reverse=True)
    assert ascending_twin[-2:] == ["--sort", "execution:asc"]
    assert header == "EXECUTION ↓" and "sorted by EXECUTION ↓" in status
    assert [int(row["tokens"]) for row in by_tokens] == sorted(
        (int(row["tokens"]) for row in by_tokens), reverse=True
    )
    assert tokens_twin[-2:] == ["--sort", "tokens:desc"]
    assert [row["execution"] for row in ls_rows(tokens_twin)] == [
        row["execution"] for row in by_tokens
    ]


async def test_reverse_on_the_default_order_lists_oldest_first_as_its_twin_does(
    sample_db: Path,
) -> None:
    app = tui_app(sample_db, db_arg=str(sample_db), live_refresh=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await screen_loaded(pilot)
        table = table_of(app)
        newest_first = [row["execution"] for row in shown_rows(table)]
        await pilot.press("S")
        oldest_first = shown_rows(table)
        status = str(app.screen.query_one("#executions-status").content)
        header = str(table.columns["started"].label)
        twin = twin_argv(app)
    assert table.order == RowOrder("started", False)
    assert [row["execution"] for row in oldest_first] == newest_first[::-1]
    assert "sorted by STARTED (UTC) ↑" in status and header == "STARTED (UTC) ↑"
    assert twin[-2:] == ["--sort", "started:asc"]
    assert [row["execution"] for row in ls_rows(twin)] == [
        row["execution"] for row in oldest_first
    ]


async def test_clicking_a_header_sorts_by_it_and_again_reverses(sample_db: Path) -> None:
    app = tui_app(sample_db, db_arg=str(sample_db), live_refresh=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await screen_loaded(pilot)
        table = table_of(app)
        before = table.shown_columns[: table.shown_columns.index("attempts")]
        x = sum(table.columns[key].get_render_width(table) for key in before)
        await pilot.click(ExecutionTable, offset=(x + 1, 1))  # row 0 is the focus ring
        first = table.order
        await pilot.click(ExecutionTable, offset=(x + 1, 1))
        second = table.order
    assert (first, second) == (RowOrder("attempts", True), RowOrder("attempts", False))


async def test_a_column_narrows_again_when_its_widest_row_is_gone(sample_db: Path) -> None:
    """Found by an outside check: once a `● running ⚠N` row had finished, STATUS kept its width
    until the console was restarted, and the query was cut without `…` under a scrollbar."""
    import dataclasses

    app = tui_app(sample_db, db_arg=str(sample_db), live_refresh=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await screen_loaded(pilot)
        table = table_of(app)
        rows = table._rows
        status_width = table.columns["status"].get_render_width(table)
        wide = dataclasses.replace(rows[0], status="running", contract_warnings=12)
        table.show_rows((wide, *rows[1:]))
        await pilot.pause()
        assert table.columns["status"].get_render_width(table) > status_width
        table.show_rows(rows)  # it finished: the next refresh
        await pilot.pause()
        assert table.columns["status"].get_render_width(table) == status_width
        total = sum(column.get_render_width(table) for column in table.columns.values())
        assert total <= 120 - table.styles.scrollbar_size_vertical
