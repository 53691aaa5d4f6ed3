"""The SQL screen's results table and its list of snippets and history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from console.printable import printable
from console.render.sql_values import cell_text
from console.tui.sql_book import HistoryEntry, Snippet
from console.tui.widgets.tables import NavigableTable
from store.sql import QueryResult

# Cells of the results table are cut at this many characters with `…` (as `sql` cuts them).
RESULT_CELL_WIDTH = 60
# A history entry is listed on one line of at most this many characters (`…` cuts it).
HISTORY_WIDTH = 60
# Where a result row points: these columns name an execution, its step and the attempt.
EXECUTION_COLUMN, STEP_COLUMN, ATTEMPT_COLUMN = "execution_id", "step_id", "n"


@dataclass(frozen=True, slots=True)
class RowTarget:
    """The execution (and step, attempt) a result row names."""

    execution_id: str
    step_id: str | None
    n: int | None


def row_target(columns: tuple[str, ...], row: tuple[Any, ...]) -> RowTarget | None:
    """What the row's `execution_id`, `step_id` and `n` columns name; None without an
    execution id (no such column, or NULL)."""
    values = dict(zip(columns, row, strict=True))
    execution_id = values.get(EXECUTION_COLUMN)
    if not isinstance(execution_id, str) or not execution_id:
        return None
    step_id = values.get(STEP_COLUMN)
    step_id = step_id if isinstance(step_id, str) and step_id else None
    n = values.get(ATTEMPT_COLUMN)
    n = n if isinstance(n, int) and not isinstance(n, bool) and step_id is not None else None
    return RowTarget(execution_id, step_id, n)


class SqlResultTable(NavigableTable):
    """The rows a query returned (at most the screen's row limit); the row key is its index."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.result: QueryResult | None = None

    def show_result(self, result: QueryResult | None) -> None:
        """Replace the table with `result`'s columns and rows (empty for None)."""
        self.result = result
        self.clear(columns=True)
        if result is None:
            return
        for index, name in enumerate(result.columns):
            self.add_column(printable(name), key=f"c{index}")
        for index, row in enumerate(result.rows):
            self.add_row(*(_cell(value) for value in row), key=str(index))

    def target(self, row_key: str | None) -> RowTarget | None:
        """The execution the row `row_key` names, if any."""
        if self.result is None or row_key is None:
            return None
        return row_target(self.result.columns, self.result.rows[int(row_key)])


def _cell(value: Any) -> Text:
    text = cell_text(value, RESULT_CELL_WIDTH)  # as Text: a str cell would be read as markup
    return Text(text, style="dim italic") if value is None else Text(text)


class SqlBook(OptionList):
    """Snippets (the example queries of docs/store.md) and the history, newest first."""

    @dataclass
    class QueryChosen(Message):
        """A snippet or a history entry was chosen; `query` goes into the editor."""

        query: str
        source: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snippets: tuple[Snippet, ...] = ()
        self.history: list[HistoryEntry] = []

    def show(self, snippets: tuple[Snippet, ...], history: list[HistoryEntry]) -> None:
        """List `snippets` under a heading, then `history`."""
        self.snippets, self.history = snippets, history
        highlighted = self.highlighted
        self.clear_options()
        options: list[Option | None] = [Option(Text("Snippets (docs/store.md)", style="bold"),
                                               disabled=True)]  # fmt: skip
        options += [Option(Text(printable(s.title)), id=f"snippet-{i}")
                    for i, s in enumerate(snippets)]  # fmt: skip
        if not snippets:
            options.append(Option(Text("docs/store.md not found", style="dim"), disabled=True))
        options += [None, Option(Text("History", style="bold"), disabled=True)]
        options += [
            Option(Text(cell_text(" ".join(entry.query.split()), HISTORY_WIDTH)),
                   id=f"history-{i}")
            for i, entry in enumerate(history)
        ]
        if not history:
            options.append(Option(Text("no query run yet", style="dim"), disabled=True))
        self.add_options(options)
        if highlighted is not None and highlighted < self.option_count:
            self.highlighted = highlighted

    def _on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        kind, _, index = (event.option.id or "").partition("-")
        if kind == "snippet":
            self.post_message(self.QueryChosen(self.snippets[int(index)].sql, "snippet"))
        elif kind == "history":
            self.post_message(self.QueryChosen(self.history[int(index)].query, "history"))
