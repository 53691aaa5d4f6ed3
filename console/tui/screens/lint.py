"""The lint report screen: each tool's contract report card (`truva-console lint`'s twin).

The cards are `console.lint.lint_store` in a thread worker, drawn from the view data
`truva-console lint` prints (`console.render.lint_view`); Enter on a check opens the attempt
of its example.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from console.lint import lint_store
from console.printable import printable
from console.render.lint_view import MARKS, NO_RESPONSES, CardView, CheckLine, card_views
from console.tui.actions import bindings
from console.tui.messages import ExecutionRequested
from console.tui.screens.palette import PaletteCommand
from console.tui.screens.panes import PaneScreen
from console.tui.screens.store_backed import StoreBacked, StoreLoadFailed, StoreRequests
from console.tui.widgets.cells import twin_command
from console.tui.widgets.footer import KeysFooter
from console.tui.widgets.tables import NavigableTable
from console.words import counted
from executor.tool_contract import Grade
from store.errors import StoreError
from store.queries import open_store

GRADE_STYLES = {Grade.PASS: "green", Grade.WARN: "bold yellow", Grade.FAIL: "bold red"}


def grade_text(grade: Grade) -> Text:
    """`pass` green, `WARN` yellow, `FAIL` red (the CLI's marks)."""
    return Text(MARKS[grade], style=GRADE_STYLES[grade])


class CheckTable(NavigableTable):
    """Every tool's card: a heading row per tool, then a row per check (key `TOOL#CHECK`)."""

    @dataclass
    class CheckHighlighted(Message):
        """The cursor moved to row `key` (a tool heading or a check)."""

        key: str

    @dataclass
    class CheckChosen(Message):
        """Enter on row `key`."""

        key: str

    def on_mount(self) -> None:
        self.add_column("tool", key="tool")
        self.add_column("grade", key="grade")
        self.add_column("pass", key="pass")
        self.add_column("warn", key="warn")
        self.add_column("fail", key="fail")
        self.add_column("check", key="check")
        self.add_column("example attempt", key="example")

    def show(self, views: list[CardView]) -> None:
        """The cards, tools in name order, checks in the check table's order."""
        self.clear()
        # The heading's capability list is cut to the check titles' width, so a tool with many
        # capabilities does not widen the column past the example attempt (the detail lists all).
        width = max((len(line.title) for view in views for line in view.checks), default=40)
        for view in views:
            capabilities = ", ".join(view.capabilities) or "-"
            summary = f"{counted(view.responses, 'response')} ({printable(capabilities)})"
            if len(summary) > width:
                summary = f"{summary[: width - 2]}…)"
            self.add_row(Text(printable(view.tool), style="bold"), grade_text(view.grade),
                         "", "", "", Text(summary, style="dim"), "", key=view.tool)  # fmt: skip
            for line in view.checks:
                example = line.example
                where = (f"{printable(example.execution_id)} {printable(example.step_id)} "
                         f"#{example.n}") if example else "-"  # fmt: skip
                self.add_row("", grade_text(line.grade),
                             *(_count(line, grade) for grade in Grade), Text(printable(line.title)),
                             Text(where), key=f"{view.tool}#{line.check}")  # fmt: skip

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.CheckHighlighted(event.row_key.value))

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.CheckChosen(event.row_key.value))


def _count(line: CheckLine, grade: Grade) -> Text | str:
    count = line.counts[grade]
    if not count:
        return Text("0", style="dim")
    return Text(str(count), style="" if grade is Grade.PASS else GRADE_STYLES[grade])


class LintScreen(StoreBacked, PaneScreen, Screen):
    """The report cards of every tool with recorded responses; `r` grades again."""

    ACTION_SCOPE = "lint"
    CSS_PATH = "reports.tcss"
    PANES = (("lint-checks", "Report cards"),)
    BINDINGS: ClassVar[list[BindingType]] = bindings("lint")
    WORKER_GROUP = "lint-cards"

    @dataclass
    class CardsLoaded(Message):
        """The cards came back from grading the store."""

        request: int
        views: list[CardView]

    class LoadFailed(StoreLoadFailed):
        """The store could not be read; `problem` is one line."""

    def __init__(self, db_path: Path, *, db_arg: str | None = None) -> None:
        super().__init__()
        self.db_path = db_path
        self.db_arg = db_arg
        self.views: list[CardView] | None = None
        self.problem: str | None = None
        self.highlighted: str | None = None
        self.requests = StoreRequests()

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Grading the recorded responses…", id="lint-summary")
        yield CheckTable(id="lint-checks")
        yield Static(id="lint-detail")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.title = "truva-console lint"
        self.sub_title = f"CLI: {self.twin_command}"
        self.label_panes()
        self.query_one(CheckTable).focus()
        self.reload()

    @property
    def twin_command(self) -> str:
        """The `truva-console lint` command that prints the same cards."""
        return twin_command(self.db_arg, "lint")

    def reload(self) -> None:
        """Grade the store's responses again, in a worker."""
        db_path = self.db_path
        self.run_store_work(lambda: card_views(lint_store(open_store(db_path))),
                            self.CardsLoaded, expected=(StoreError,))  # fmt: skip

    @on(CardsLoaded)
    def _cards_loaded(self, message: CardsLoaded) -> None:
        if not self.requests.answered(message.request):
            return
        self.views, self.problem = message.views, None
        self.query_one(CheckTable).show(message.views)
        self._show_summary()
        self._show_detail()

    @on(LoadFailed)
    def _load_failed(self, message: LoadFailed) -> None:
        if not self.requests.answered(message.request):
            return
        self.problem = message.problem
        self._show_summary()

    def store_work_crashed(self, problem: str) -> None:
        """The grading worker raised: say so in place of the summary."""
        self.problem = problem
        self._show_summary()

    # ------------------------------------------------------------------ drawing

    def _show_summary(self) -> None:
        summary = self.query_one("#lint-summary", Static)
        if self.problem is not None:
            summary.update(Text(self.problem, style="bold red"))
            return
        views = self.views or []
        if not views:
            summary.update(Text(NO_RESPONSES, style="bold"))
            return
        grades = {grade: sum(1 for v in views if v.grade is grade) for grade in Grade}
        responses = sum(view.responses for view in views)
        text = Text(f"{counted(len(views), 'tool')} graded from "
                    f"{counted(responses, 'recorded response')}: ", style="bold")  # fmt: skip
        text.append_text(Text(", ").join(
            Text(f"{grades[grade]} {grade.value}", style=GRADE_STYLES[grade])
            for grade in reversed(Grade) if grades[grade]
        ))  # fmt: skip
        text.append("  ·  Enter on a check opens its example attempt", style="dim")
        summary.update(text)

    def _line(self, key: str | None) -> tuple[CardView, CheckLine | None] | None:
        tool, _, check = (key or "").partition("#")
        view = next((v for v in self.views or () if v.tool == tool), None)
        if view is None:
            return None
        return view, next((line for line in view.checks if line.check == check), None)

    def _show_detail(self) -> None:
        detail = self.query_one("#lint-detail", Static)
        found = self._line(self.highlighted or self.query_one(CheckTable).highlighted_key())
        if found is None:
            detail.update("")
            return
        view, line = found
        if line is None:
            detail.update(Text.assemble((printable(view.heading), "bold")))
            return
        text = Text.assemble(
            grade_text(line.grade), "  ", (printable(line.title), "bold"),
            f"  ({line.counts_text})  ·  ", (printable(line.source), "dim"),
        )  # fmt: skip
        if line.example_text is None:
            text.append("\nevery graded response passed this check; no example to open")
        else:
            text.append("\ne.g. ")
            text.append(printable(line.example_text))
        detail.update(text)

    # ------------------------------------------------------------------ events

    @on(CheckTable.CheckHighlighted)
    def _check_highlighted(self, message: CheckTable.CheckHighlighted) -> None:
        self.highlighted = message.key
        self._show_detail()

    @on(CheckTable.CheckChosen)
    def _check_chosen(self, message: CheckTable.CheckChosen) -> None:
        self.open_example(message.key)

    def open_example(self, key: str) -> None:
        """Open the attempt of the example of check row `key` (`TOOL#CHECK`)."""
        found = self._line(key)
        line = found[1] if found else None
        if line is None or line.example is None:
            self.notify("Enter on a check with an example (warn or fail) opens its attempt.",
                        title="No example attempt")  # fmt: skip
            return
        example = line.example
        self.post_message(ExecutionRequested(example.execution_id, example.step_id, example.n))

    # ------------------------------------------------------------------ actions

    def action_refresh(self) -> None:
        """Grade the store's responses again now."""
        self.reload()

    def action_copy_twin(self) -> None:
        """Copy the equivalent CLI command to the clipboard."""
        self.app.copy_to_clipboard(self.twin_command)
        self.notify(self.twin_command, title="Copied the CLI command", markup=False)

    def action_twin(self, action_id: str) -> str | None:
        """The `lint` command for `copy-cli` and `refresh`."""
        return self.twin_command if action_id in ("copy-cli", "refresh") else None

    def palette_commands(self) -> list[PaletteCommand]:
        """The registry's commands, then one per check with an example."""
        commands = self.registry_commands()
        for view in self.views or ():
            for line in view.checks:
                if line.example is None:
                    continue
                key = f"{view.tool}#{line.check}"
                commands.append(PaletteCommand(
                    f"lint: Open the {MARKS[line.grade]} example of {view.tool}: {line.title}",
                    line.example_text or "",
                    lambda key=key: self.open_example(key),
                ))  # fmt: skip
        return commands
