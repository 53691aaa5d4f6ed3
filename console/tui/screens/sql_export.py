"""The SQL screen's export dialog: the query's whole result as a CSV or Parquet file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, RadioButton, RadioSet, Static

from console.tui.actions import bindings
from console.tui.screens.store_backed import StoreBacked, StoreRequests, one_line
from console.tui.widgets.cells import twin_command
from console.tui.widgets.path_suggester import PathSuggester
from store.errors import StoreError
from store.sql import QueryCancel, SqlSession

FORMATS = {"csv": ".csv", "parquet": ".parquet"}
OVERWRITE_LABEL = "Overwrite an existing file"


def default_result_path(file_format: str) -> str:
    """`./result.csv` or `./result.parquet`."""
    return f"./result{FORMATS[file_format]}"


def write_result(db_path: Path, query: str, output: Path, file_format: str,
                 *, overwrite: bool, cancel: QueryCancel | None = None) -> int:  # fmt: skip
    """Run `query` again into `output` (DuckDB COPY: every row, DuckDB's types for Parquet);
    the number of rows. An existing `output` is refused unless `overwrite`; `cancel`
    interrupts it (nothing is written)."""
    if output.exists() and not overwrite:
        raise FileExistsError(f"{output}: exists (tick “{OVERWRITE_LABEL}” to replace it)")
    if output.is_dir():
        raise IsADirectoryError(f"{output}: is a directory")
    session = SqlSession(db_path)
    if file_format == "parquet":
        return session.write_parquet(query, output, cancel=cancel)
    return session.write_csv(query, output, cancel=cancel)


class SqlExportDialog(StoreBacked, ModalScreen[None]):
    """Writes what the query returns, every row of it, to a CSV or Parquet file."""

    ACTION_SCOPE = "dialog"
    BINDINGS: ClassVar[list[BindingType]] = bindings("dialog")
    CSS_PATH = "../sql.tcss"
    WORKER_GROUP = "sql-export"

    @dataclass
    class ExportFinished(Message):
        """The file was written with `rows` rows."""

        request: int
        written: tuple[Path, int]

    @dataclass
    class ExportFailed(Message):
        """Nothing was written; `problem` is one line."""

        request: int
        problem: str

    def __init__(self, db_path: Path, query: str, *, db_arg: str | None = None) -> None:
        super().__init__()
        self.db_path = db_path
        self.sql = query
        self.db_arg = db_arg
        self.file_format = "csv"
        self.written: tuple[Path, int] | None = None
        self.problem: str | None = None
        self.exporting = False
        self.cancel_handle: QueryCancel | None = None
        self.requests = StoreRequests()

    def compose(self) -> ComposeResult:
        with Vertical(id="sql-export-box", classes="bundle-box"):
            with RadioSet(id="sql-export-format"):
                yield RadioButton("CSV (a header row; NULL as an empty field)", value=True,
                                  id="format-csv")  # fmt: skip
                yield RadioButton("Parquet (DuckDB's column types)", id="format-parquet")
            yield Input(value=default_result_path("csv"), id="sql-export-path",
                        suggester=PathSuggester())  # fmt: skip
            with Horizontal(classes="bundle-flags"):
                yield Checkbox(OVERWRITE_LABEL, value=False, id="sql-export-overwrite")
            yield Static(id="sql-export-result", classes="bundle-result")
            yield Static(id="sql-export-twin", classes="bundle-twin")
            with Horizontal(classes="bundle-buttons"):
                yield Button("Export", variant="primary", id="sql-export-run")
                yield Button("Close", id="sql-export-close")

    def on_mount(self) -> None:
        self.query_one("#sql-export-box").border_title = "Export the query's result"
        self.query_one("#sql-export-format").border_title = "format"
        self.query_one("#sql-export-path", Input).border_title = "file"
        self._show_result()
        self._update_twin()
        self.query_one("#sql-export-path", Input).focus()

    @property
    def output(self) -> str:
        """The path typed in the dialog."""
        return self.query_one("#sql-export-path", Input).value.strip()

    @property
    def twin_command(self) -> str:
        """The `truva-console sql` command that writes the same file."""
        return twin_command(self.db_arg, "sql", "--format", self.file_format,
                            "-o", self.output or "FILE", self.sql)  # fmt: skip

    def _update_twin(self) -> None:
        self.sub_title = f"CLI: {' '.join(self.twin_command.split())}"
        twin = Text.assemble(("CLI ", "bold"), " ".join(self.twin_command.split()))
        self.query_one("#sql-export-twin", Static).update(twin)

    def _show_result(self) -> None:
        shown = self.query_one("#sql-export-result", Static)
        if self.exporting:
            shown.update(Text("Exporting…", style="bold cyan"))
        elif self.problem is not None:
            shown.update(Text(self.problem, style="bold red"))
        elif self.written is not None:
            path, rows = self.written
            noun = "row" if rows == 1 else "rows"
            shown.update(Text.assemble(("wrote ", "bold"), f"{rows:,} {noun} to ",
                                       (str(path), "bold")))  # fmt: skip
        else:
            shown.update(Text("enter or Export runs the query again into the file (every row, "
                              "not only those shown); → completes the path; esc closes",
                              style="dim"))  # fmt: skip

    @on(RadioSet.Changed, "#sql-export-format")
    def _format_chosen(self, event: RadioSet.Changed) -> None:
        path = self.query_one("#sql-export-path", Input)
        was_default = path.value == default_result_path(self.file_format)
        self.file_format = "parquet" if event.pressed.id == "format-parquet" else "csv"
        if was_default:
            path.value = default_result_path(self.file_format)
        self._update_twin()

    @on(Input.Changed, "#sql-export-path")
    @on(Checkbox.Changed)
    def _option_changed(self) -> None:
        self._update_twin()

    @on(Input.Submitted, "#sql-export-path")
    @on(Button.Pressed, "#sql-export-run")
    def action_export(self) -> None:
        """Write the file in a worker thread."""
        if self.exporting:
            return
        if not self.output:
            self.problem = "file: expected a file name, got nothing"
            self._show_result()
            return
        self.exporting, self.problem = True, None
        self._show_result()
        db_path, query, file_format = self.db_path, self.sql, self.file_format
        output = Path(self.output).expanduser().absolute()  # the result line names where it went
        overwrite = self.query_one("#sql-export-overwrite", Checkbox).value
        cancel = self.cancel_handle = QueryCancel()
        self.run_store_work(
            lambda: (output, write_result(db_path, query, output, file_format,
                                          overwrite=overwrite, cancel=cancel)),
            self.ExportFinished,
            failed=lambda request, error: self.ExportFailed(request, _problem(error)),
            expected=(StoreError, OSError),
        )  # fmt: skip

    @on(ExportFinished)
    def _export_finished(self, message: ExportFinished) -> None:
        if self.requests.answered(message.request):
            self.exporting, self.written, self.problem = False, message.written, None
            self._show_result()

    @on(ExportFailed)
    def _export_failed(self, message: ExportFailed) -> None:
        if self.requests.answered(message.request):
            self.exporting, self.problem = False, message.problem
            self._show_result()

    def store_work_crashed(self, problem: str) -> None:
        """The worker raised something unexpected: one line in the dialog."""
        self.exporting, self.problem = False, problem
        self._show_result()

    @on(Button.Pressed, "#sql-export-close")
    def action_close(self) -> None:
        """Close the dialog; an export still running is interrupted and writes nothing."""
        if self.exporting and self.cancel_handle is not None:
            self.cancel_handle.cancel()
        self.dismiss()


def _problem(error: BaseException) -> str:
    if isinstance(error, OSError) and error.filename is None and error.args:
        return one_line(error)
    if isinstance(error, OSError) and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return one_line(error)
