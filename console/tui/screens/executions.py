"""The home screen: recorded executions, newest first, filtered, paged and refreshed live."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Header, Static

from console.printable import printable
from console.render.execution_columns import DEFAULT_PAGE_SIZE
from console.render.navigation import next_failed_execution
from console.tui.actions import bindings
from console.tui.messages import (
    ExecutionRequested,
    LintRequested,
    SqlRequested,
    WhatIfRequested,
)
from console.tui.screens.bundle import ExportDialog, ImportDialog
from console.tui.screens.palette import PaletteCommand
from console.tui.screens.panes import PaneScreen
from console.tui.screens.store_backed import StoreBacked, StoreLoadFailed, StoreRequests
from console.tui.screens.store_source import StoreSource
from console.tui.widgets.cells import twin_command
from console.tui.widgets.filter_bar import FilterBar, FilterSyntaxError, ParsedFilter, parse_filter
from console.tui.widgets.footer import KeysFooter
from console.tui.widgets.tables import ExecutionTable
from console.words import counted
from store.queries import ExecutionFilter, Page

__all__ = ["DEFAULT_PAGE_SIZE", "ExecutionsScreen"]


class ExecutionsScreen(StoreBacked, PaneScreen, Screen):
    """Lists executions one page at a time (`limit`/`offset`), polling the store while shown."""

    ACTION_SCOPE = "executions"
    PANES = (("filter", "Filter"), ("executions-table", "Executions"))
    BINDINGS: ClassVar[list[BindingType]] = bindings("executions")

    @dataclass
    class PageLoaded(Message):
        """A page of executions came back from the store."""

        request: int
        page: Page

    class LoadFailed(StoreLoadFailed):
        """The store could not be read; `problem` is one line; `held`: another process has it."""

    WORKER_GROUP = "executions-page"

    def __init__(
        self,
        source: StoreSource,
        *,
        db_arg: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        refresh_interval_s: float | None = 1.0,
    ) -> None:
        super().__init__()
        self.source = source
        self.db_arg = db_arg
        self.page_size = page_size
        self.refresh_interval_s = refresh_interval_s
        self.parsed_filter = ParsedFilter()
        self.page_offset = 0
        self.page: Page | None = None
        self.problem: str | None = None
        self.held_notice: str | None = None
        self.filter_problem: str | None = None
        self._status_shown: Text | None = None
        self.requests = StoreRequests()

    def compose(self) -> ComposeResult:
        yield Header()
        yield FilterBar(id="filter")
        yield Static(id="executions-status")
        with ContentSwitcher(initial="executions-message", id="executions-switcher"):
            yield ExecutionTable(id="executions-table")
            yield Static("Loading executions…", id="executions-message")
        yield Static(id="execution-preview")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.title = "truva-console"
        self.label_panes()
        self._update_twin()
        self.query_one(ExecutionTable).focus()
        self.load_page()
        self.start_polling()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Show the paging keys only when there is a page to go to."""
        if action == "next_page":
            return self.page is not None and self.page_offset + self.page_size < self.page.total
        if action == "previous_page":
            return self.page_offset > 0
        if action == "export":
            return self.problem is None and bool(self.page and self.page.executions)
        if action == "import_bundle":
            return self.problem is None
        if action == "next_failed_execution":
            return bool(self.page and self.page.executions)
        return True

    # ------------------------------------------------------------------ loading

    @property
    def twin_command(self) -> str:
        """The `truva-console ls` command that lists the same page."""
        args = ["ls", *self.parsed_filter.ls_args]
        if self.page_size != DEFAULT_PAGE_SIZE:
            args += ["--limit", str(self.page_size)]
        if self.page_offset:
            args += ["--offset", str(self.page_offset)]
        tables = self.query(ExecutionTable)
        sort = tables.first().order.argument if tables else None
        if sort:
            args += ["--sort", sort]
        db_arg = self.db_arg
        listed = [row.execution_id for row in self.page.executions] if self.page else []
        if hasattr(self.app, "twin_db_arg"):  # a copy of the samples with a new execution
            db_arg = self.app.twin_db_arg(listed)
        return twin_command(db_arg, *args)

    def _update_twin(self) -> None:
        self.sub_title = f"CLI: {self.twin_command}"

    def wants_poll(self) -> bool:
        """Poll only while this screen is shown."""
        return self.is_current

    def reload(self) -> None:
        """Read the page again."""
        self.load_page()

    def on_screen_resume(self) -> None:
        """Back from an execution: show what was recorded meanwhile."""
        if self.page is not None and self.refresh_interval_s:
            self.load_page()

    def load_page(self) -> None:
        """Start a query for the current filter and offset; stale answers are ignored."""
        try:
            filters = parse_filter(self.parsed_filter.text).filters
        except FilterSyntaxError:
            filters = self.parsed_filter.filters
        offset, limit = self.page_offset, self.page_size
        self.run_store_work(lambda: self._read_page(filters, limit, offset), self.PageLoaded)

    def _read_page(self, filters: ExecutionFilter, limit: int, offset: int) -> Page:
        return self.source.list_page(filters, limit=limit, offset=offset)

    @on(PageLoaded)
    def _page_loaded(self, message: PageLoaded) -> None:
        if not self.requests.answered(message.request):
            return
        page = message.page
        if not page.executions and page.total and self.page_offset:
            self.page_offset = max(0, (page.total - 1) // self.page_size * self.page_size)
            self._update_twin()
            self.load_page()
            return
        if page == self.page and self.problem is None and self.held_notice is None:
            self._show_status()  # the same rows under another filter (or the error cleared)
            return
        self.page, self.problem, self.held_notice = page, None, None
        self._show_page()
        self._update_twin()  # on a copy of the samples, new rows change its `--db`

    @on(LoadFailed)
    def _load_failed(self, message: LoadFailed) -> None:
        if not self.requests.answered(message.request):
            return
        if message.held and self.page is not None and self.problem is None:
            # Another process has the file for now: keep the rows last read, say why they are.
            message.stop()
            if message.problem != self.held_notice:
                self.notify(message.problem, title="Showing what was last read",
                            severity="warning", markup=False)
            self.held_notice = message.problem
            self._show_status()
            return
        if message.problem != self.problem:
            self.notify(message.problem, title="Cannot read the debug store", severity="error",
                        markup=False)  # fmt: skip
        self.problem = message.problem
        self._show_page()

    def store_work_crashed(self, problem: str) -> None:
        """Show the crash in place of the list."""
        self.problem = problem
        self._show_page()

    # ---------------------------------------------------------------- rendering

    def _show_page(self) -> None:
        switcher = self.query_one("#executions-switcher", ContentSwitcher)
        message = self.query_one("#executions-message", Static)
        page = self.page
        if self.problem is not None:
            message.update(self._problem_text(self.problem))
            switcher.current = "executions-message"
        elif page is None:
            message.update("Loading executions…")
            switcher.current = "executions-message"
        elif not page.total:
            message.update(self._empty_text())
            switcher.current = "executions-message"
        else:
            self.query_one(ExecutionTable).show_rows(page.executions)
            switcher.current = "executions-table"
        self._show_status()
        self.refresh_bindings()
        self._show_preview(self.query_one(ExecutionTable).highlighted_key())

    def _show_status(self) -> None:
        """Draw the status line, unless it already reads so (the poll answers every second)."""
        text = self._status_text()
        if text != self._status_shown:
            self._status_shown = text
            self.query_one("#executions-status", Static).update(text)

    def _show_preview(self, execution_id: str | None) -> None:
        """The highlighted execution's full query, stop reason and incomplete steps."""
        preview = self.query_one("#execution-preview", Static)
        rows = self.page.executions if self.page and self.problem is None else ()
        row = next((r for r in rows if r.execution_id == execution_id), None)
        if row is None:
            preview.update("")
            return
        text = Text.assemble(("query ", "bold"), " ".join(printable(row.query or "-").split()))
        if row.stop_reason:
            text.append(f"  ·  stopped: {printable(row.stop_reason)}", style="yellow")
        if row.incomplete_steps:
            text.append(f"  ·  incomplete: {printable(', '.join(row.incomplete_steps))}")
        if row.status == "running" and row.writer_pid:
            text.append(f"  ·  recording by pid {row.writer_pid} on {row.writer_host or '?'}")
        preview.update(text)

    @on(ExecutionTable.SortChanged)
    def _sort_changed(self) -> None:
        self._update_twin()
        self._show_status()

    @on(ExecutionTable.ExecutionHighlighted)
    def _execution_highlighted(self, message: ExecutionTable.ExecutionHighlighted) -> None:
        self._show_preview(message.execution_id)

    def _problem_text(self, problem: str) -> Text:
        return Text.assemble(
            ("Cannot open the debug store\n\n", "bold red"),
            (problem, "red"),
            "\n\nCheck the path given with --db or $TRUVA_DB. "
            "`truva-console ls` reports the same problem. Press q to quit.",
        )

    def _empty_text(self) -> Text:
        if self.parsed_filter.text:
            return Text.assemble(
                ("No executions match this filter\n\n", "bold"),
                (self.parsed_filter.text, "yellow"),
                "\n\nPress / to change it; an empty filter lists every execution.",
            )
        record = twin_command(self.db_arg, "run", "PLAN")
        live = (
            "\n\nThis screen checks the store every second: a run started in another terminal "
            "shows up here while it runs."
            if self.refresh_interval_s
            else ""
        )
        return Text.assemble(
            ("No executions recorded yet\n\n", "bold"),
            f"Store: {self.source.db_path}\n\nRecord one with:\n\n    ",
            (record, "bold cyan"),
            "\n\nPLAN is a plan file (docs/plan-file.md). "
            "Or browse the bundled examples: truva-console --samples",
            live,
        )

    def _status_text(self) -> Text:
        status = Text()
        page = self.page
        if self.problem is not None:
            status.append("store unavailable", style="bold red")
        elif page is not None and page.executions:
            first, last = page.offset + 1, page.offset + len(page.executions)
            status.append(f"{first}–{last} of {counted(page.total, 'execution')}", style="bold")
            order = self.query_one(ExecutionTable).order
            status.append(f", {order.label()}" if order.key is None else
                          f", sorted by {order.label()}"
                          + (" within this page" if len(page.executions) < page.total else ""))
            if last < page.total:
                status.append("  ·  n: next page")
            if page.offset:
                status.append("  ·  p: previous page")
        elif page is not None:
            status.append("0 executions", style="bold")
        if self.parsed_filter.text:
            status.append("  ·  filter: ")
            status.append(self.parsed_filter.text, style="yellow")
        if self.filter_problem:
            status.append("  ·  ")
            status.append(self.filter_problem, style="bold red")
        if self.held_notice:
            status.append("  ·  last read; ")
            status.append(self.held_notice, style="bold yellow")
        elif self.refresh_interval_s:
            status.append("  ·  live", style="green")
        return status

    # ------------------------------------------------------------------ actions

    @on(FilterBar.FilterApplied)
    def _filter_applied(self, message: FilterBar.FilterApplied) -> None:
        self.apply_filter(message.parsed)
        self.query_one(ExecutionTable).focus()

    @on(FilterBar.FilterRejected)
    def _filter_rejected(self, message: FilterBar.FilterRejected) -> None:
        self.filter_problem = message.problem
        self._show_status()

    def apply_filter(self, parsed: ParsedFilter) -> None:
        """List the executions matching `parsed` from the first page."""
        self.parsed_filter, self.filter_problem, self.page_offset = parsed, None, 0
        self.query_one(FilterBar).value = parsed.text
        self.query_one(FilterBar).remove_class("-invalid")
        self._update_twin()
        self.load_page()

    def action_focus_filter(self) -> None:
        """Put the cursor in the filter bar."""
        self.query_one(FilterBar).focus()

    def action_refresh(self) -> None:
        """Query the store again now."""
        self.load_page()

    def action_next_page(self) -> None:
        """Show the next (older) page."""
        if self.page is not None and self.page_offset + self.page_size < self.page.total:
            self.page_offset += self.page_size
            self._update_twin()
            self.load_page()

    def action_previous_page(self) -> None:
        """Show the previous (newer) page."""
        if self.page_offset:
            self.page_offset = max(0, self.page_offset - self.page_size)
            self._update_twin()
            self.load_page()

    def action_next_failed_execution(self) -> None:
        """Put the cursor on the next failed execution of the page (wrapping around)."""
        table = self.query_one(ExecutionTable)
        rows = self.page.executions if self.page else ()
        target = next_failed_execution(rows, table.highlighted_key())
        if target is None:
            self.notify("No failed execution on this page.", title="Next failed")
            return
        table.move_to_key(target)

    def action_copy_twin(self) -> None:
        """Copy the equivalent CLI command to the clipboard."""
        self.app.copy_to_clipboard(self.twin_command)
        self.notify(self.twin_command, title="Copied the CLI command", markup=False)

    def action_export(self, all_listed: bool = False) -> None:
        """Open the export dialog for the highlighted execution (or every listed one)."""
        rows = self.page.executions if self.page and self.problem is None else ()
        if not rows:
            return
        finished = tuple(row.execution_id for row in rows if row.status != "running")
        self.app.push_screen(
            ExportDialog(
                self.source.db_path,
                db_arg=self.db_arg,
                highlighted=self.query_one(ExecutionTable).highlighted_key(),
                listed=finished,
                listed_is_everything=not self.parsed_filter.text and len(rows) == self.page.total,
                left_out_running=len(rows) - len(finished),
                all_listed=all_listed,
            )
        )

    def export_execution(self, execution_id: str) -> None:
        """Put the cursor on `execution_id` and open the export dialog for it."""
        self.query_one(ExecutionTable).move_to_key(execution_id)
        self.action_export()

    def action_open_whatif(self) -> None:
        """Open the what-if screen on the listed executions (the filter as applied)."""
        self.post_message(WhatIfRequested(self.parsed_filter.text))

    def action_open_lint(self) -> None:
        """Open the tool contract report cards."""
        self.post_message(LintRequested())

    def action_import_bundle(self) -> None:
        """Open the import dialog."""
        self.app.push_screen(ImportDialog(self.source.db_path, db_arg=self.db_arg))

    def action_open_sql(self) -> None:
        """Open the SQL screen."""
        self.post_message(SqlRequested())

    def action_twin(self, action_id: str) -> str | None:
        """The `ls` command for `copy-cli`."""
        return self.twin_command if action_id == "copy-cli" else None

    def palette_commands(self) -> list[PaletteCommand]:
        """Commands of this screen for the command palette: the registry's, then per row."""
        commands = [
            *self.registry_commands(),
            PaletteCommand("filter: Clear filter", "List every execution",
                           lambda: self.apply_filter(ParsedFilter())),
            PaletteCommand("filter: Failed executions", "status:failed",
                           lambda: self.apply_filter(parse_filter("status:failed"))),
            PaletteCommand("filter: Partial executions", "status:partial",
                           lambda: self.apply_filter(parse_filter("status:partial"))),
            PaletteCommand("filter: Running executions", "status:running",
                           lambda: self.apply_filter(parse_filter("status:running"))),
        ]  # fmt: skip
        if self.page and self.page.executions and self.problem is None:
            commands.append(
                PaletteCommand(
                    "bundle: Export all listed",
                    "Every listed execution to one file",
                    lambda: self.action_export(all_listed=True),
                )
            )
        for row in self.page.executions if self.page else ():
            commands.append(
                PaletteCommand(
                    f"execution: Open {row.execution_id}",
                    f"{row.status} · {row.query or ''}",
                    lambda execution_id=row.execution_id: self.post_message(
                        ExecutionRequested(execution_id)
                    ),
                )
            )
        for row in self.page.executions if self.page and self.problem is None else ():
            commands.append(
                PaletteCommand(
                    f"bundle: Export {row.execution_id}",
                    f"{row.status} · {row.query or ''}",
                    lambda execution_id=row.execution_id: self.export_execution(execution_id),
                )
            )
        return commands
