"""The SQL screen's export dialog: the query's whole result as a CSV or Parquet file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Checkbox, RadioButton, RadioSet

from console.tui.screens.file_dialog import FileDialog
from console.tui.screens.store_backed import one_line
from console.tui.widgets.cells import twin_command
from console.tui.widgets.path_suggester import PathSuggester
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


class SqlExportDialog(FileDialog):
    """Writes what the query returns, every row of it, to a CSV or Parquet file."""

    CSS_PATH = "../sql.tcss"
    WORKER_GROUP = "sql-export"
    ID_PREFIX = "sql-export"
    TITLE = "Export the query's result"
    PATH_TITLE = "file"
    PATH_EXPECTED = "a file name"
    RUN_LABEL = "Export"
    RUN_DOES = "runs the query again into the file (every row, not only those shown)"
    BUSY_TEXT = "Exporting…"

    class ExportFinished(FileDialog.Finished):
        """The file was written; `result` is the path and the number of rows."""

    class ExportFailed(FileDialog.Failed):
        """Nothing was written; `problem` is one line."""

    FINISHED, FAILED = ExportFinished, ExportFailed

    def __init__(self, db_path: Path, query: str, *, db_arg: str | None = None) -> None:
        super().__init__(db_path, db_arg=db_arg)
        self.sql = query
        self.file_format = "csv"
        self.cancel_handle: QueryCancel | None = None

    def compose_fields(self) -> Iterator[Widget]:
        formats = RadioSet(id="sql-export-format")
        formats.border_title = "format"
        with formats:
            yield RadioButton("CSV (a header row; NULL as an empty field)", value=True,
                              id="format-csv")  # fmt: skip
            yield RadioButton("Parquet (DuckDB's column types)", id="format-parquet")
        yield self.path_field(value=self.default_path(), suggester=PathSuggester())

    def compose_flags(self) -> Iterator[Widget]:
        yield Checkbox(OVERWRITE_LABEL, value=False, id="sql-export-overwrite")

    @property
    def output(self) -> str:
        """The path typed in the dialog."""
        return self.path_input.value.strip()

    @property
    def twin_command(self) -> str:
        """The `truva-console sql` command that writes the same file."""
        return twin_command(self.db_arg, "sql", "--format", self.file_format,
                            "-o", self.output or "FILE", self.sql)  # fmt: skip

    def twin_line(self) -> str:
        return " ".join(self.twin_command.split())

    def default_path(self) -> str:
        return default_result_path(self.file_format)

    def choose(self, pressed_id: str | None) -> None:
        self.file_format = "parquet" if pressed_id == "format-parquet" else "csv"

    def work(self, path: str) -> Callable[[], tuple[Path, int]]:
        db_path, query, file_format = self.db_path, self.sql, self.file_format
        output = Path(path).expanduser().absolute()  # the result line names where it went
        overwrite = self.checked("overwrite")
        cancel = self.cancel_handle = QueryCancel()
        return lambda: (output, write_result(db_path, query, output, file_format,
                                             overwrite=overwrite, cancel=cancel))  # fmt: skip

    def problem_of(self, error: BaseException) -> str:
        return _problem(error)

    def result_text(self, result: tuple[Path, int]) -> Text:
        path, rows = result
        noun = "row" if rows == 1 else "rows"
        return Text.assemble(("wrote ", "bold"), f"{rows:,} {noun} to ", (str(path), "bold"))

    def action_close(self) -> None:
        """Close the dialog; an export still running is interrupted and writes nothing."""
        if self.busy and self.cancel_handle is not None:
            self.cancel_handle.cancel()
        self.dismiss()


def _problem(error: BaseException) -> str:
    if isinstance(error, OSError) and error.filename is None and error.args:
        return one_line(error)
    if isinstance(error, OSError) and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return one_line(error)
