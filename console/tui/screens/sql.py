"""The SQL screen: a DuckDB SQL editor over the store, its results, snippets and history.

A query runs in a thread worker on a read-only connection after the spool is ingested
(`store.sql.SqlSession`, what `truva-console sql` uses); Escape or ctrl+c interrupts it. A
result row with an `execution_id` column opens that execution (on `step_id` and attempt `n`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static, TextArea

from console.tui.actions import bindings
from console.tui.messages import ExecutionRequested
from console.tui.screens.palette import PaletteCommand
from console.tui.screens.panes import PaneScreen
from console.tui.screens.sql_export import SqlExportDialog
from console.tui.screens.store_backed import StoreBacked, StoreRequests, one_line
from console.tui.sql_book import HistoryEntry, SqlHistory, history_path, load_snippets
from console.tui.widgets.cells import twin_command
from console.tui.widgets.footer import KeysFooter
from console.tui.widgets.sql_results import SqlBook, SqlResultTable
from store.errors import StoreError
from store.sql import QueryCancel, QueryResult, SqlCancelled, SqlSession

# The results table shows at most this many rows; the rest are counted (DataTable loads rows in
# Python, so a million would freeze the screen) and exported whole.
ROW_LIMIT = 1000
# Below this width the snippets and history list is hidden (the palette still lists them).
SIDEBAR_MIN_WIDTH = 100
FIRST_QUERY = (
    "SELECT execution_id, status, started_at, query\nFROM executions\nORDER BY started_at DESC;"
)

IDLE_HINT = ("F5 or ctrl+enter runs the query (read-only); ctrl+s exports the result; Enter on a "
             "row with an execution_id opens it")  # fmt: skip
NO_EXECUTION_HINT = ("This row has no execution_id: select one in the query to open its "
                     "execution (with step_id and n, its attempt).")  # fmt: skip


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """What a finished query returned, how long it took and the history after it."""

    result: QueryResult | None
    elapsed_s: float
    history: list[HistoryEntry]
    history_problem: str | None


class SqlScreen(StoreBacked, PaneScreen, Screen):
    """Editor, status line and results over the store at `db_path`, with snippets and history."""

    ACTION_SCOPE = "sql"
    CSS_PATH = "../sql.tcss"
    PANES = (("sql-book", "Snippets & history"), ("sql-editor", "SQL"),
             ("sql-results", "Results"))  # fmt: skip
    BINDINGS: ClassVar[list[BindingType]] = bindings("sql")
    WORKER_GROUP = "sql-query"

    @dataclass
    class QueryFinished(Message):
        """The query ran; `outcome` holds its rows."""

        request: int
        outcome: QueryOutcome

    @dataclass
    class QueryFailed(Message):
        """DuckDB refused or failed the query, or it was cancelled; `problem` is one line."""

        request: int
        problem: str
        cancelled: bool

    def __init__(
        self,
        db_path: Path,
        *,
        db_arg: str | None = None,
        history_file: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.db_path = db_path
        self.db_arg = db_arg
        self.history = SqlHistory(history_file or history_path())
        self.snippets = load_snippets()
        self.history_entries: list[HistoryEntry] = []
        self.history_index = -1  # where ctrl+up / ctrl+down are in the history; -1: not in it
        self.requests = StoreRequests()
        self.session: SqlSession | None = None
        self.cancel_handle: QueryCancel | None = None
        self.running_query: str | None = None
        self.last_query: str | None = None
        self.outcome: QueryOutcome | None = None
        self.problem: str | None = None
        self.cancelled = False
        self.clock = clock

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="sql-main"):
            yield SqlBook(id="sql-book")
            with Vertical(id="sql-work"):
                yield TextArea(FIRST_QUERY, language="sql", id="sql-editor", soft_wrap=False,
                               tab_behavior="focus", show_line_numbers=True)  # fmt: skip
                yield Static(id="sql-status")
                yield SqlResultTable(id="sql-results")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.title = "truva-console"
        self.label_panes()
        self.history_entries = self.history.entries()
        self.query_one(SqlBook).show(self.snippets, self.history_entries)
        self._update_twin()
        self._show_status()
        self.query_one("#sql-editor", TextArea).focus()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < SIDEBAR_MIN_WIDTH, "-narrow")

    @property
    def editor(self) -> TextArea:
        """The SQL editor."""
        return self.query_one("#sql-editor", TextArea)

    @property
    def running(self) -> bool:
        """Whether a query is running."""
        return self.running_query is not None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Cancel only while a query runs; export once there is a query that returned rows."""
        if action == "cancel_query":
            return self.running
        if action == "export_result":
            return self.outcome is not None and self.outcome.result is not None
        return True

    # ------------------------------------------------------------------ the CLI twin

    @property
    def twin_command(self) -> str:
        """The `truva-console sql` command that runs the editor's query."""
        return twin_command(self.db_arg, "sql", self.editor.text.strip() or "QUERY")

    def _update_twin(self) -> None:
        self.sub_title = f"CLI: {' '.join(self.twin_command.split())}"

    @on(TextArea.Changed, "#sql-editor")
    def _query_edited(self) -> None:
        self._update_twin()

    def action_twin(self, action_id: str) -> str | None:
        """The `sql` command for running and copying."""
        return self.twin_command if action_id in ("run-sql", "copy-cli") else None

    def action_copy_twin(self) -> None:
        """Copy the equivalent CLI command to the clipboard."""
        self.app.copy_to_clipboard(self.twin_command)
        self.notify(self.twin_command, title="Copied the CLI command", markup=False)

    # ------------------------------------------------------------------ running

    def action_run_query(self) -> None:
        """Run the editor's SQL in a worker thread (a running query is interrupted first)."""
        query = self.editor.text.strip()
        if not query:
            self.problem, self.cancelled = "nothing to run: the editor is empty", False
            self._show_status()
            return
        if self.cancel_handle is not None:
            self.cancel_handle.cancel()
        cancel = QueryCancel()
        self.cancel_handle, self.running_query = cancel, query
        self.history_index = -1
        self._show_status()
        self.refresh_bindings()
        self.run_store_work(
            lambda: self._run(query, cancel),
            self.QueryFinished,
            failed=lambda request, error: self.QueryFailed(
                request, one_line(error), isinstance(error, SqlCancelled)
            ),
            expected=(StoreError,),
        )

    def _run(self, query: str, cancel: QueryCancel) -> QueryOutcome:
        """In the worker: ingest the spool, run `query`, add it to the history."""
        started = self.clock()
        if self.session is None:
            self.session = SqlSession(self.db_path)
        result = self.session.run(query, limit=ROW_LIMIT, cancel=cancel)
        elapsed = self.clock() - started
        try:
            history, problem = self.history.add(query), None
        except OSError as error:
            history = self.history.entries()
            problem = f"{self.history.path}: cannot write the history: {error.strerror or error}"
        return QueryOutcome(result, elapsed, history, problem)

    @on(QueryFinished)
    def _query_finished(self, message: QueryFinished) -> None:
        if not self.requests.answered(message.request):
            return
        outcome = message.outcome
        self.last_query, self.outcome = self.running_query, outcome
        self.problem, self.cancelled = None, False
        self._stopped()
        self.query_one(SqlResultTable).show_result(outcome.result)
        self._show_history(outcome.history)
        if outcome.history_problem:
            self.notify(outcome.history_problem, title="History not saved", severity="warning",
                        markup=False)  # fmt: skip

    @on(QueryFailed)
    def _query_failed(self, message: QueryFailed) -> None:
        if not self.requests.answered(message.request):
            return
        self.problem, self.cancelled = message.problem, message.cancelled
        if not message.cancelled:
            # The error is the answer to this query: rows of the one before would read as its
            # (a cancel keeps them, and says that nothing shown is from the cancelled query).
            self.outcome = None
            self.query_one(SqlResultTable).show_result(None)
        self._stopped()

    def store_work_crashed(self, problem: str) -> None:
        """The worker raised something unexpected: one line in the status, no rows of the query
        before."""
        self.problem, self.cancelled = problem, False
        self.outcome = None
        self.query_one(SqlResultTable).show_result(None)
        self._stopped()

    def _stopped(self) -> None:
        self.running_query, self.cancel_handle = None, None
        self._show_status()
        self.refresh_bindings()

    def action_cancel_query(self) -> None:
        """Interrupt the running query (DuckDB `interrupt()`, repeated until it has stopped)."""
        handle = self.cancel_handle
        if handle is None or not self.running:
            return
        handle.cancel()
        self._show_status()

    def action_back(self) -> None:
        """Cancel the running query; else back to the screen below (restore a zoomed pane first)."""
        if self.running:
            self.action_cancel_query()
            return
        super().action_back()

    def _show_status(self) -> None:
        status = Text()
        if self.running:
            cancelling = self.cancel_handle is not None and self.cancel_handle.cancelled
            status.append("cancelling…" if cancelling else "running…", style="bold cyan")
            status.append("  ·  esc or ctrl+c cancels", style="dim")
        elif self.cancelled:
            status.append("cancelled", style="bold yellow")
            status.append(" (nothing shown is from that query)", style="dim")
        elif self.problem is not None:
            status.append(self.problem, style="bold red")
        elif self.outcome is not None:
            status.append_text(_rows_text(self.outcome))
        else:
            status.append(IDLE_HINT, style="dim")
        self.query_one("#sql-status", Static).update(status)

    # ------------------------------------------------------------------ results

    @on(DataTable.RowSelected, "#sql-results")
    def _row_chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        table = self.query_one(SqlResultTable)
        target = table.target(event.row_key.value)
        if target is None:
            self.notify(NO_EXECUTION_HINT, title="Nothing to open", markup=False)
            return
        self.post_message(ExecutionRequested(target.execution_id, target.step_id, target.n))

    # ------------------------------------------------------------------ history, snippets

    def _show_history(self, entries: list[HistoryEntry]) -> None:
        self.history_entries = entries
        self.query_one(SqlBook).show(self.snippets, entries)

    @on(SqlBook.QueryChosen)
    def _query_chosen(self, message: SqlBook.QueryChosen) -> None:
        self.set_query(message.query)

    def set_query(self, query: str) -> None:
        """Put `query` in the editor and focus it."""
        self.editor.load_text(query)
        self.editor.focus()

    def action_history(self, step: int) -> None:
        """Put the previous (`step` 1) or next (-1) query of the history in the editor."""
        if not self.history_entries:
            self.notify("No query has been run yet.", title="History")
            return
        index = max(-1, min(len(self.history_entries) - 1, self.history_index + step))
        self.history_index = index
        self.set_query(self.history_entries[index].query if index >= 0 else "")

    # ------------------------------------------------------------------ export

    def action_export_result(self) -> None:
        """Open the export dialog for the query that produced the shown result."""
        if self.last_query is None or self.outcome is None or self.outcome.result is None:
            return
        self.app.push_screen(SqlExportDialog(self.db_path, self.last_query, db_arg=self.db_arg))

    def palette_commands(self) -> list[PaletteCommand]:
        """The registry's commands, then each snippet and history entry."""
        commands = self.registry_commands()
        commands += [
            PaletteCommand(f"snippet: {snippet.title}", " ".join(snippet.sql.split()),
                           lambda sql=snippet.sql: self.set_query(sql))
            for snippet in self.snippets
        ]  # fmt: skip
        commands += [
            PaletteCommand(f"history: {' '.join(entry.query.split())}", entry.ran_at,
                           lambda sql=entry.query: self.set_query(sql))
            for entry in self.history_entries
        ]  # fmt: skip
        return commands


def _rows_text(outcome: QueryOutcome) -> Text:
    """`first 1,000 of 52,311 rows · 0.42 s`, `3 rows · 0.01 s`, or `ok` for a statement."""
    result = outcome.result
    took = f"  ·  {outcome.elapsed_s:.2f} s"
    if result is None:
        return Text.assemble(("ok", "bold green"), " (the statement returns no rows)", took)
    shown, total = len(result.rows), result.total_rows
    if shown < total:
        words = f"first {shown:,} of {rows_counted(total)}"
        return Text.assemble((words, "bold yellow"), took, ("  ·  ctrl+s exports them all", "dim"))
    return Text.assemble((rows_counted(total), "bold"), took)


def rows_counted(count: int) -> str:
    """`1 row`, `52,311 rows`."""
    return f"{count:,} row" if count == 1 else f"{count:,} rows"
