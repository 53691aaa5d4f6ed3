"""The SQL screen through Pilot, on stores recorded by `truva-console run` and the samples."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from console.tui.app import TruvaConsoleApp
from console.tui.messages import ExecutionRequested
from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.executions import ExecutionsScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.sql import ROW_LIMIT, SqlScreen
from console.tui.screens.sql_export import SqlExportDialog
from console.tui.sql_book import history_path, load_snippets
from console.tui.widgets.sql_results import SqlBook, SqlResultTable
from store.recorder import StoreRecorder
from store.sql import SqlSession
from tests.support.demo_store import sample_store_copy
from tests.support.events_factory import small_execution
from tests.support.holder import hold_file, release
from tests.support.tui import RealStore, settle_loaded, settle_until, shown_text, tui_app

SIZE = (120, 36)
LONG_QUERY = "SELECT sum(range) FROM range(10000000000000)"


def status(screen: SqlScreen) -> str:
    return shown_text(screen.query_one("#sql-status").content, width=300).strip()


def cells(screen: SqlScreen) -> list[list[str]]:
    table = screen.query_one(SqlResultTable)
    return [[getattr(c, "plain", str(c)) for c in table.get_row_at(r)]
            for r in range(table.row_count)]  # fmt: skip


async def open_sql(app: TruvaConsoleApp, pilot) -> SqlScreen:
    """From the executions list, `:` opens the SQL screen."""
    await settle_loaded(pilot)
    assert isinstance(app.screen, ExecutionsScreen)
    await pilot.press("colon")
    await settle_until(pilot, lambda: isinstance(app.screen, SqlScreen), "the SQL screen")
    return app.screen


async def run_query(pilot, screen: SqlScreen, sql: str, key: str = "f5") -> None:
    screen.editor.load_text(sql)
    screen.editor.focus()
    await pilot.press(key)
    await settle_until(pilot, lambda: not screen.running, "the query's answer")


@pytest.fixture
def sample_db(tmp_path: Path) -> Path:
    return sample_store_copy(tmp_path / "samples.duckdb")


async def test_a_query_shows_its_rows_and_count(real_store: RealStore) -> None:
    app = tui_app(real_store.db, db_arg="debug.duckdb", live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, "SELECT execution_id, status FROM executions "
                                       "ORDER BY execution_id")  # fmt: skip
        ids = sorted([real_store.rate_limited, real_store.corrected, real_store.refused])
        assert [row[0] for row in cells(screen)] == ids
        assert status(screen).startswith("3 rows  ·  ")
        assert screen.query_one(SqlResultTable).columns  # the header names the columns
        labels = [str(c.label) for c in screen.query_one(SqlResultTable).columns.values()]
        assert labels == ["execution_id", "status"]


def _record(db: Path, execution_id: str, *, lock_timeout_s: float = 2.0) -> None:
    with StoreRecorder(db, lock_timeout_s=lock_timeout_s) as recorder:
        for event in small_execution(execution_id):
            recorder.record(event)


async def test_a_query_sees_what_was_spooled_after_the_screen_opened(tmp_path: Path) -> None:
    db = tmp_path / "debug.duckdb"
    _record(db, "exec-in-the-file")
    app = tui_app(db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        holder = hold_file(db)  # the next recorder cannot get the file: its events wait
        try:
            _record(db, "exec-spooled", lock_timeout_s=0.05)
        finally:
            release(holder)
        spool = db.with_name(db.name + ".spool") / "segments"
        assert list(spool.iterdir()), "the events are in the spool, not in the file"
        await run_query(pilot, screen, "SELECT execution_id FROM executions ORDER BY 1")
        assert cells(screen) == [["exec-in-the-file"], ["exec-spooled"]]
        assert list(spool.iterdir()) == []


@pytest.mark.parametrize("key", ["f5", "ctrl+j"], ids=["f5", "ctrl+j"])
async def test_both_run_keys_run_the_query(real_store: RealStore, key: str) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, "SELECT 42 AS answer", key=key)
        assert cells(screen) == [["42"]]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELEC 1", 'Parser Error: syntax error at or near "SELEC"'),
        ("SELECT nope FROM executions", 'Binder Error: Referenced column "nope" not found'),
        ("CREATE TABLE mine (a INTEGER)", "read-only"),
        ("DELETE FROM executions", "read-only"),
    ],
    ids=["syntax", "unknown-column", "ddl-refused", "delete-refused"],
)
async def test_an_error_is_one_line_in_the_status(real_store: RealStore, sql, expected) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, sql)
        shown = status(screen)
        assert expected in shown
        assert "\n" not in shown and "Traceback" not in shown
        assert isinstance(app.screen, SqlScreen)
        with duckdb.connect(str(real_store.db), read_only=True) as conn:
            assert conn.execute("SELECT count(*) FROM executions").fetchone() == (3,)


async def test_a_failed_query_empties_the_results_of_the_one_before(real_store: RealStore) -> None:
    """Found by an outside check: after a 3-row result, `SELEC 1`'s error showed above the old
    rows, which read as its own."""
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, "SELECT execution_id FROM executions")
        assert len(cells(screen)) == 3
        await run_query(pilot, screen, "SELEC 1")
        assert "Parser Error" in status(screen)
        assert cells(screen) == []
        assert not screen.check_action("export_result", ())


async def test_only_the_row_limit_is_shown_of_a_long_result(real_store: RealStore) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, "SELECT range AS x FROM range(52311)")
        assert screen.query_one(SqlResultTable).row_count == ROW_LIMIT == 1000
        assert status(screen).startswith("first 1,000 of 52,311 rows")


async def test_enter_on_a_row_opens_its_execution_on_the_step_and_attempt(
    real_store: RealStore,
) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    messages: list[object] = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, "SELECT execution_id, step_id, n, rule_id FROM attempts "
                                       f"WHERE execution_id = '{real_store.rate_limited}' "
                                       "ORDER BY n DESC")  # fmt: skip
        assert [row[2] for row in cells(screen)] == ["2", "1"]
        screen.query_one(SqlResultTable).focus()
        await pilot.press("j", "enter")  # the second row: attempt 1
        await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), "execution")
        await settle_loaded(pilot)
        opened = app.screen
        assert (opened.execution_id, opened.step_id, opened.attempt_n) == (
            real_store.rate_limited, "step-1", 1)  # fmt: skip
        requested = [m for m in messages if isinstance(m, ExecutionRequested)]
        assert requested[0].execution_id == real_store.rate_limited
        assert (requested[0].step_id, requested[0].n) == ("step-1", 1)
        await pilot.press("escape")
        await settle_until(pilot, lambda: isinstance(app.screen, SqlScreen), "back to the SQL")
        assert len(cells(app.screen)) == 2  # the result is still there


async def test_enter_on_a_row_without_execution_id_opens_nothing(real_store: RealStore) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, "SELECT status, count(*) FROM executions GROUP BY ALL")
        screen.query_one(SqlResultTable).focus()
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen
        assert any("no execution_id" in str(n.message) for n in app._notifications)


async def test_history_is_kept_in_the_state_directory_and_recalled(
    real_store: RealStore,
) -> None:
    first, second = "SELECT 1 AS one", "SELECT 2 AS two"
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, first)
        await run_query(pilot, screen, second)
        await run_query(pilot, screen, second)  # a repeat is kept once
        lines = history_path().read_text(encoding="utf-8").splitlines()
        assert [json.loads(line)["query"] for line in lines] == [first, second]
        screen.editor.load_text("")
        await pilot.press("ctrl+up")
        assert screen.editor.text == second
        await pilot.press("ctrl+up")
        assert screen.editor.text == first
        await pilot.press("ctrl+down")
        assert screen.editor.text == second
    # A new session lists them, newest first, and Enter on one puts it in the editor.
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        book = screen.query_one(SqlBook)
        assert [entry.query for entry in book.history] == [second, first]
        book.focus()
        book.highlighted = _option_index(book, "history-1")
        await pilot.press("enter")
        await pilot.pause()
        assert screen.editor.text == first
        assert app.focused is screen.editor


def _option_index(book: SqlBook, option_id: str) -> int:
    return next(i for i in range(book.option_count) if book.get_option_at_index(i).id == option_id)


async def test_a_snippet_from_docs_store_md_goes_into_the_editor_and_runs(sample_db: Path) -> None:
    snippets = load_snippets()
    backoffs = next(s for s in snippets if "FROM backoffs" in s.sql)
    app = tui_app(sample_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        book = screen.query_one(SqlBook)
        book.focus()
        book.highlighted = _option_index(book, f"snippet-{snippets.index(backoffs)}")
        await pilot.press("enter")
        await pilot.pause()
        assert screen.editor.text == backoffs.sql
        await pilot.press("f5")
        await settle_until(pilot, lambda: not screen.running, "the snippet's answer")
        assert screen.problem is None, screen.problem
        assert status(screen).split("  ·  ")[0].endswith(("row", "rows"))


def test_every_snippet_of_docs_store_md_runs_on_the_sample_store(sample_db: Path) -> None:
    snippets = load_snippets()
    doc = (Path(__file__).resolve().parents[2] / "docs" / "store.md").read_text()
    section = doc[doc.index("## Questions and their SQL") :]
    section = section[: section.index("\n## ", 1)]
    assert len(snippets) == section.count("```sql") >= 9
    session = SqlSession(sample_db)
    answered = 0
    for snippet in snippets:
        result = session.run(snippet.sql, limit=ROW_LIMIT)
        assert result is not None, snippet.title
        answered += bool(result.rows)
    assert answered >= 3


async def test_export_to_a_relative_path_names_the_absolute_file_written(
    real_store: RealStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, "SELECT range AS x FROM range(9)")
        await pilot.press("ctrl+s")
        await settle_until(pilot, lambda: isinstance(app.screen, SqlExportDialog), "the dialog")
        dialog = app.screen
        dialog.query_one("#format-parquet").value = True
        dialog.query_one("#sql-export-path").value = "r.parquet"
        await pilot.pause()
        await pilot.press("enter")
        await settle_until(pilot, lambda: not dialog.busy, "the export")
        result = shown_text(dialog.query_one("#sql-export-result").content, width=300)
        assert result.strip() == f"wrote 9 rows to {tmp_path / 'r.parquet'}"
    assert (tmp_path / "r.parquet").is_file()


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
async def test_export_writes_the_whole_result_not_only_the_shown_rows(
    real_store: RealStore, tmp_path: Path, file_format: str
) -> None:
    sql = "SELECT range AS x, 'r' || range AS label FROM range(1500) ORDER BY x"
    target = tmp_path / f"out.{file_format}"
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, sql)
        assert screen.query_one(SqlResultTable).row_count == ROW_LIMIT
        await pilot.press("ctrl+s")
        await settle_until(pilot, lambda: isinstance(app.screen, SqlExportDialog), "the dialog")
        dialog = app.screen
        if file_format == "parquet":
            dialog.query_one("#format-parquet").value = True
            await pilot.pause()
        assert dialog.query_one("#sql-export-path").value == f"./result.{file_format}"
        assert f"sql --format {file_format} -o ./result.{file_format}" in dialog.twin_command
        dialog.query_one("#sql-export-path").value = str(target)
        await pilot.pause()
        await pilot.press("enter")
        await settle_until(pilot, lambda: not dialog.busy, "the export")
        result = shown_text(dialog.query_one("#sql-export-result").content, width=300)
        assert f"wrote 1,500 rows to {target}" in result
    reader = "read_parquet" if file_format == "parquet" else "read_csv"
    with duckdb.connect() as conn:
        rows = conn.execute(f"SELECT count(*), min(x), max(x), max(label) FROM {reader}(?)",
                            [str(target)]).fetchone()  # fmt: skip
        types = [row[1] for row in conn.execute(f"DESCRIBE SELECT * FROM {reader}(?)",
                                                [str(target)]).fetchall()]  # fmt: skip
    assert rows == (1500, 0, 1499, "r999")
    assert types == ["BIGINT", "VARCHAR"]


async def test_export_refuses_an_existing_file_unless_overwrite(
    real_store: RealStore, tmp_path: Path
) -> None:
    target = tmp_path / "kept.csv"
    target.write_text("mine\n")
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, "SELECT 1 AS a")
        await pilot.press("ctrl+s")
        await settle_until(pilot, lambda: isinstance(app.screen, SqlExportDialog), "the dialog")
        dialog = app.screen
        dialog.query_one("#sql-export-path").value = str(target)
        await pilot.press("enter")
        await settle_until(pilot, lambda: not dialog.busy, "the export")
        shown = shown_text(dialog.query_one("#sql-export-result").content, width=300)
        assert f"{target}: exists" in shown
        assert target.read_text() == "mine\n"
        dialog.query_one("#sql-export-overwrite").value = True
        await pilot.press("enter")
        await settle_until(pilot, lambda: not dialog.busy, "the export")
        assert target.read_text().splitlines() == ["a", "1"]


async def test_closing_the_export_dialog_interrupts_a_long_export(
    real_store: RealStore, tmp_path: Path
) -> None:
    target = tmp_path / "never.csv"
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        await run_query(pilot, screen, "SELECT 1 AS a")
        screen.last_query = LONG_QUERY  # as if that had run: its export never ends on its own
        await pilot.press("ctrl+s")
        await settle_until(pilot, lambda: isinstance(app.screen, SqlExportDialog), "the dialog")
        dialog = app.screen
        dialog.query_one("#sql-export-path").value = str(target)
        await pilot.press("enter")
        handle = dialog.cancel_handle
        assert handle is not None and dialog.busy
        for _ in range(500):
            if handle.started.is_set():
                break
            await pilot.pause()
        await pilot.press("escape")
        await settle_until(pilot, lambda: app.screen is screen, "the dialog closed")
        assert handle.cancelled
    assert not target.exists()
    assert list(tmp_path.glob(".never.csv.*")) == []


@pytest.mark.parametrize("key", ["escape", "ctrl+c"], ids=["escape", "ctrl+c"])
async def test_a_long_query_is_cancelled_and_the_screen_stays(
    real_store: RealStore, key: str
) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        screen.editor.load_text(LONG_QUERY)
        await pilot.press("f5")
        handle = screen.cancel_handle
        assert handle is not None
        for _ in range(500):  # the worker thread has opened its connection
            if handle.started.is_set():
                break
            await pilot.pause()
        assert screen.running and status(screen).startswith("running…")
        await pilot.press(key)
        await settle_until(pilot, lambda: not screen.running, "the cancelled query")
        assert isinstance(app.screen, SqlScreen)
        assert status(screen).startswith("cancelled")
        # The screen works on: the next query runs.
        await run_query(pilot, screen, "SELECT 7 AS seven")
        assert cells(screen) == [["7"]]


async def test_running_a_query_while_one_runs_interrupts_the_first(real_store: RealStore) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        screen.editor.load_text(LONG_QUERY)
        await pilot.press("f5")
        first = screen.cancel_handle
        assert first is not None
        for _ in range(500):
            if first.started.is_set():
                break
            await pilot.pause()
        await run_query(pilot, screen, "SELECT 5 AS five")
        assert first.cancelled
        assert cells(screen) == [["5"]]
        assert status(screen).startswith("1 row  ·  ")


async def test_help_and_copy_name_the_cli_twin(real_store: RealStore) -> None:
    app = tui_app(real_store.db, db_arg="debug.duckdb", live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sql(app, pilot)
        screen.editor.load_text("SELECT count(*) FROM attempts")
        await pilot.pause()
        twin = "truva-console --db debug.duckdb sql 'SELECT count(*) FROM attempts'"
        assert screen.twin_command == twin
        assert screen.sub_title == f"CLI: {twin}"
        await pilot.press("f1")
        await settle_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        help_text = shown_text(app.screen.content, width=250)
        assert "SQL screen" in help_text and twin in help_text
        await pilot.press("escape")
        screen.query_one(SqlResultTable).focus()
        await pilot.press("Y")
        assert app.clipboard == twin


async def test_the_palette_offers_the_sql_screen_snippets_and_history(
    real_store: RealStore,
) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle_loaded(pilot)
        commands = {command.title: command for command in app.screen.palette_commands()}
        commands["sql: Open the SQL screen"].run()
        await settle_until(pilot, lambda: isinstance(app.screen, SqlScreen), "the SQL screen")
        screen = app.screen
        await run_query(pilot, screen, "SELECT 3 AS three")
        titles = [command.title for command in screen.palette_commands()]
        assert "sql: Run the query" in titles
        assert "history: SELECT 3 AS three" in titles
        assert sum(title.startswith("snippet: ") for title in titles) == len(load_snippets())
