"""The what-if screen: recorded decisions re-decided under config overrides (`whatif`'s twin).

Overrides are `KEY=VALUE` words read by `--config`'s parser; the filter is the executions
list's token language. The run is `console.whatif.what_if` in a thread worker that posts a
count after each batch and stops at the next batch when cancelled; the result is
`console.render.whatif_view`, which `truva-console whatif` prints.
"""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Input, Static
from textual.worker import Worker, WorkerState, get_current_worker

from console.printable import printable
from console.render.whatif_view import (
    CANNOT_KNOW,
    WhatIfView,
    replay_arguments,
    whatif_view,
)
from console.replay.edits import ReplayError
from console.tui.actions import bindings
from console.tui.messages import ExecutionRequested
from console.tui.screens.palette import PaletteCommand
from console.tui.screens.panes import PaneScreen
from console.tui.screens.store_backed import one_line
from console.tui.widgets.cells import action_text, twin_command
from console.tui.widgets.filter_bar import FilterBar, FilterSyntaxError, ParsedFilter, parse_filter
from console.tui.widgets.footer import KeysFooter
from console.tui.widgets.tables import NavigableTable
from console.whatif import Change, WhatIfReport, what_if
from console.whatif import parse_overrides as parse_whatif_overrides
from console.words import counted
from executor.config import ConfigError
from executor.policy.conditions import wait_text
from store.errors import StoreError
from store.queries import ExecutionFilter, open_store

_WORKER_GROUP = "whatif-run"
# Below this many rows the notes and the detail shrink (class -short) so the changes keep room.
SHORT_SCREEN_ROWS = 30
# Changed steps listed in the table (filling a table is UI-thread work); the status says how many
# more there are, and `whatif --json` lists them all.
SHOWN_CHANGES = 200


class WhatIfCancelled(Exception):
    """Raised in the worker, between two batches, once the run was cancelled."""


@dataclass(frozen=True, slots=True)
class WhatIfRequest:
    """A checked run: the overrides (as `--config` read them) and the ls filters."""

    run: int
    overrides: dict[str, Any]
    parsed_filter: ParsedFilter


def config_words(text: str) -> list[str]:
    """The `KEY=VALUE` words of the overrides field, split as a shell would."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def parse_overrides(text: str) -> dict[str, Any]:
    """The overrides field read with whatif's `--config` parser; ReplayError names the bad word."""
    return parse_whatif_overrides(config_words(text))


class TransitionTable(NavigableTable):
    """Before → after of the first changed decision in each step, with counts."""

    def on_mount(self) -> None:
        self.add_column("steps", key="count")
        self.add_column("before", key="before")
        self.add_column("after", key="after")

    def show(self, view: WhatIfView | None) -> None:
        """One row per transition, most frequent first."""
        self.clear()
        for index, row in enumerate(view.transitions if view else ()):
            self.add_row(str(row.count), _verdict(row.before), _verdict(row.after),
                         key=str(index))  # fmt: skip


class ChangeTable(NavigableTable):
    """The first changed decision of each step; Enter opens that step and attempt."""

    @dataclass
    class ChangeHighlighted(Message):
        """The cursor moved to the change at `index`."""

        index: int

    @dataclass
    class ChangeChosen(Message):
        """Enter on the change at `index`."""

        index: int

    def on_mount(self) -> None:
        self.add_column("execution", key="execution")
        self.add_column("step", key="step")
        self.add_column("#", key="n")
        self.add_column("before", key="before")
        self.add_column("after", key="after")

    def show(self, view: WhatIfView | None) -> None:
        """One row per changed step, in the order the report found them."""
        self.clear()
        for index, change in enumerate(view.changes[:SHOWN_CHANGES] if view else ()):
            self.add_row(Text(printable(change.execution_id)), Text(printable(change.step_id)),
                         str(change.n), _verdict(change.before), _verdict(change.after),
                         key=str(index))  # fmt: skip

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.ChangeHighlighted(int(event.row_key.value)))

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.ChangeChosen(int(event.row_key.value)))


def _verdict(verdict: Any) -> Text:
    """`retry_same transient.retry_same after 20.0 ms`: the wait too, so a change of wait
    alone shows (the same action and rule before and after)."""
    text = Text.assemble(action_text(verdict.action), " ", (printable(verdict.rule_id), "dim"))
    delay_ms = getattr(verdict, "delay_ms", None)
    if delay_ms is not None:
        text.append(f" after {wait_text(delay_ms)}", "dim")
    return text


class WhatIfScreen(PaneScreen, Screen):
    """Edit the overrides and the filter, run, read the before → after table and the changes."""

    ACTION_SCOPE = "whatif"
    CSS_PATH = "reports.tcss"
    PANES = (
        ("whatif-config", "Config overrides"),
        ("whatif-filter", "Filter"),
        ("whatif-transitions", "Before → after"),
        ("whatif-changes", "Changed steps"),
    )
    BINDINGS: ClassVar[list[BindingType]] = bindings("whatif")

    @dataclass
    class Progressed(Message):
        """`done` of `total` executions re-decided so far, `decisions` of them examined."""

        run: int
        done: int
        total: int
        decisions: int

    @dataclass
    class Finished(Message):
        """The run ended with `report`."""

        run: int
        report: WhatIfReport
        filtered: bool

    @dataclass
    class Failed(Message):
        """The run could not be made; `problem` is the CLI's one line; `cancelled` by Esc."""

        run: int
        problem: str
        cancelled: bool = False

    def __init__(
        self,
        db_path: Path,
        *,
        db_arg: str | None = None,
        filter_text: str = "",
        config_text: str = "",
    ) -> None:
        super().__init__()
        self.db_path = db_path
        self.db_arg = db_arg
        self.initial_filter = filter_text
        self.initial_config = config_text
        self.run_number = 0
        self.running = False
        self.progress: tuple[int, int, int] | None = None
        self.view: WhatIfView | None = None
        self.problem: str | None = None
        self.cancelled = False
        self.shown_change: int | None = None
        self._worker: Worker[None] | None = None
        self._last_filter = ParsedFilter()

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="whatif-inputs"):
            yield Input(self.initial_config, id="whatif-config",
                        placeholder="KEY=VALUE …, e.g. max_attempts=5 (empty: check the "
                        "policy code)")  # fmt: skip
            yield FilterBar(id="whatif-filter")
        yield Static(id="whatif-status")
        yield TransitionTable(id="whatif-transitions")
        yield ChangeTable(id="whatif-changes")
        yield Static(id="whatif-detail")
        yield KeysFooter()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.height < SHORT_SCREEN_ROWS, "-short")

    def on_mount(self) -> None:
        self.title = "truva-console what-if"
        self.label_panes()
        bar = self.query_one(FilterBar)
        bar.value = self.initial_filter
        bar.placeholder = "filter: status:failed rule:budget.attempts (as the list; Enter runs)"
        try:
            self._last_filter = parse_filter(self.initial_filter)
        except FilterSyntaxError:
            self._last_filter = ParsedFilter()
        self._update_twin()
        self._show()
        self.query_one("#whatif-config", Input).focus()

    # ------------------------------------------------------------------ the twin

    @property
    def twin_command(self) -> str:
        """The `truva-console whatif` command for the overrides and filter as typed."""
        args = ["whatif"]
        for word in config_words(self.query_one("#whatif-config", Input).value):
            args += ["--config", word]
        return twin_command(self.db_arg, *args, *self._current_filter().ls_args)

    def _current_filter(self) -> ParsedFilter:
        with contextlib.suppress(FilterSyntaxError):
            self._last_filter = parse_filter(self.query_one(FilterBar).value)
        return self._last_filter

    def _update_twin(self) -> None:
        self.sub_title = f"CLI: {self.twin_command}"

    @on(Input.Changed)
    def _typed(self) -> None:
        self._update_twin()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Run only while no run is going; copy a replay only with a change highlighted."""
        if action == "run_whatif":
            return not self.running
        if action == "copy_replay":
            return self._highlighted_change() is not None
        return True

    # ------------------------------------------------------------------ running

    def request(self) -> WhatIfRequest:
        """The checked run for the fields as typed; ReplayError or FilterSyntaxError if not."""
        overrides = parse_overrides(self.query_one("#whatif-config", Input).value)
        parsed = parse_filter(self.query_one(FilterBar).value)
        self.run_number += 1
        return WhatIfRequest(self.run_number, overrides, parsed)

    def action_run_whatif(self) -> None:
        """Check the overrides and filter, then re-decide in a worker."""
        if self.running:
            return
        try:
            request = self.request()
        except ReplayError as error:
            self._fail(one_line(error), field="#whatif-config")
            return
        except FilterSyntaxError as error:
            self._fail(one_line(error), field="#whatif-filter")
            return
        for selector in ("#whatif-config", "#whatif-filter"):
            self.query_one(selector).remove_class("-invalid")
        self.running, self.problem, self.cancelled = True, None, False
        self.progress = None
        self._update_twin()
        self._show()
        self.refresh_bindings()
        self._worker = self._run(request)

    def _fail(self, problem: str, *, field: str) -> None:
        self.problem = problem
        self.query_one(field).add_class("-invalid")
        self._show()

    @work(thread=True, exclusive=True, exit_on_error=False, group=_WORKER_GROUP)
    def _run(self, request: WhatIfRequest) -> None:
        worker = get_current_worker()
        filters = request.parsed_filter.filters

        def progress(done: int, report: WhatIfReport) -> None:
            if worker.is_cancelled:
                raise WhatIfCancelled
            self.post_message(self.Progressed(request.run, done, report.executions,
                                              report.decisions))  # fmt: skip

        try:
            store = open_store(self.db_path)
            report = what_if(store, filters, request.overrides, progress=progress)
            if worker.is_cancelled:  # during the last batch
                raise WhatIfCancelled
        except WhatIfCancelled:
            self.post_message(self.Failed(request.run, "cancelled", cancelled=True))
            return
        except StoreError as error:
            self.post_message(self.Failed(request.run, one_line(error)))
            return
        except (ValueError, ConfigError) as error:
            self.post_message(self.Failed(request.run, f"--config: {one_line(error)}"))
            return
        self.post_message(self.Finished(request.run, report, filters != ExecutionFilter()))

    @on(Progressed)
    def _progressed(self, message: Progressed) -> None:
        if message.run == self.run_number and self.running:
            self.progress = (message.done, message.total, message.decisions)
            self._show_status()

    @on(Finished)
    def _finished(self, message: Finished) -> None:
        if message.run != self.run_number:
            return
        self.running, self._worker = False, None
        self.view = whatif_view(message.report, filtered=message.filtered)
        self.shown_change = None
        self.query_one(TransitionTable).show(self.view)
        self.query_one(ChangeTable).show(self.view)
        self._show()
        self.refresh_bindings()

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        if message.run != self.run_number:
            return
        self.running, self._worker = False, None
        self.cancelled = message.cancelled
        self.problem = None if message.cancelled else message.problem
        self._show()
        self.refresh_bindings()

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != _WORKER_GROUP:
            return
        if event.state == WorkerState.ERROR and self.running:
            self.running, self._worker = False, None
            self.problem = f"unexpected error: {one_line(event.worker.error)}"
            self._show()
            self.refresh_bindings()
        elif event.state == WorkerState.CANCELLED and self.running:
            # Cancelled before its first batch reported: nothing more will come.
            self.running, self._worker, self.cancelled = False, None, True
            self._show()
            self.refresh_bindings()

    # ------------------------------------------------------------------ drawing

    def _show(self) -> None:
        self._show_status()
        self._show_detail()

    def _show_status(self) -> None:
        status = self.query_one("#whatif-status", Static)
        self.query_one("#whatif-status").set_class(self.problem is not None, "-problem")
        if self.problem is not None:
            status.update(Text(self.problem, style="bold red"))
        elif self.running:
            text = Text("Re-deciding… ", style="bold cyan")
            if self.progress is None:
                text.append("reading the store")
            else:
                done, total, decisions = self.progress
                text.append(f"{done} of {counted(total, 'execution')}, "
                            f"{counted(decisions, 'decision')} examined")  # fmt: skip
            text.append("  ·  esc cancels", style="dim")
            status.update(text)
        elif self.view is None:
            status.update(Text.assemble(
                ("Type config overrides (KEY=VALUE …) and an optional filter, then Enter or "
                 "ctrl+r. ", "bold"),
                "No overrides: every recorded decision the installed policy code would take "
                "differently.",
                *(("\n", ("The last run was cancelled.", "yellow")) if self.cancelled else ()),
            ))  # fmt: skip
        else:
            view = self.view
            text = Text.assemble((printable(view.headline), "bold"), "\n",
                                 printable(view.changed_line))  # fmt: skip
            if view.follow_note:
                text.append(f" ({printable(view.follow_note)})", style="dim")
            if len(view.changes) > SHOWN_CHANGES:
                text.append(f"\nthe table lists the first {SHOWN_CHANGES} of "
                            f"{counted(len(view.changes), 'changed step')}; "
                            f"{self.twin_command} --json lists all", style="yellow")  # fmt: skip
            for note in (view.not_rerun_note, view.incomplete_note, view.unreadable_note):
                if note:
                    text.append(f"\n{printable(note)}", style="dim")
            if self.cancelled:
                text.append("\nThe last run was cancelled; this is the one before.",
                            style="yellow")  # fmt: skip
            status.update(text)

    def _highlighted_change(self) -> Change | None:
        if self.view is None or self.shown_change is None:
            return None
        if not 0 <= self.shown_change < len(self.view.changes):
            return None
        return self.view.changes[self.shown_change]

    def _show_detail(self) -> None:
        detail = self.query_one("#whatif-detail", Static)
        change = self._highlighted_change()
        if change is None:
            hint = ""
            if self.view is not None and not self.view.changes:
                hint = "No decision changes under these overrides.\n"
            known = self.view.cannot_know if self.view is not None else CANNOT_KNOW
            detail.update(Text.assemble(hint, (known, "dim")))
            return
        replay = twin_command(self.db_arg, *replay_arguments(change, self.view.overrides))
        detail.update(Text.assemble(
            (f"{printable(change.execution_id)} {printable(change.step_id)} #{change.n}: ",
             "bold"), printable(" ".join(change.reason.split())), "\n",
            printable(change.consequence), "\n",
            ("Find out: ", "bold"), (printable(replay), "cyan"), "  (R copies it; Enter opens "
            "the attempt)\n",
            (self.view.cannot_know, "dim"),
        ))  # fmt: skip

    # ------------------------------------------------------------------ events

    @on(Input.Submitted, "#whatif-config")
    def _config_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_run_whatif()

    @on(FilterBar.FilterApplied)
    def _filter_applied(self, message: FilterBar.FilterApplied) -> None:
        message.stop()
        self.action_run_whatif()

    @on(FilterBar.FilterRejected)
    def _filter_rejected(self, message: FilterBar.FilterRejected) -> None:
        message.stop()
        self._fail(message.problem, field="#whatif-filter")

    @on(ChangeTable.ChangeHighlighted)
    def _change_highlighted(self, message: ChangeTable.ChangeHighlighted) -> None:
        self.shown_change = message.index
        self._show_detail()
        self.refresh_bindings()

    @on(ChangeTable.ChangeChosen)
    def _change_chosen(self, message: ChangeTable.ChangeChosen) -> None:
        self.shown_change = message.index
        self.open_change(message.index)

    def open_change(self, index: int) -> None:
        """Open the execution of change `index` on its step and the attempt that changes."""
        if self.view is None or not 0 <= index < len(self.view.changes):
            return
        change = self.view.changes[index]
        self.post_message(ExecutionRequested(change.execution_id, change.step_id, change.n))

    # ------------------------------------------------------------------ actions

    def cancel_running(self) -> bool:
        """While a run goes, back cancels it instead."""
        if self.running and self._worker is not None:
            self._worker.cancel()
        return self.running

    def action_copy_twin(self) -> None:
        """Copy the equivalent CLI command to the clipboard."""
        self.app.copy_to_clipboard(self.twin_command)
        self.notify(self.twin_command, title="Copied the CLI command", markup=False)

    def action_copy_replay(self) -> None:
        """Copy the `replay` command of the highlighted change."""
        change = self._highlighted_change()
        if change is None or self.view is None:
            return
        command = twin_command(self.db_arg, *replay_arguments(change, self.view.overrides))
        self.app.copy_to_clipboard(command)
        self.notify(command, title="Copied the replay command", markup=False)

    def action_twin(self, action_id: str) -> str | None:
        """The `whatif` command for `copy-cli` and `run-whatif`; `replay` for `copy-replay`."""
        if action_id in ("copy-cli", "run-whatif"):
            return self.twin_command
        change = self._highlighted_change()
        if action_id == "copy-replay" and change is not None and self.view is not None:
            return twin_command(self.db_arg, *replay_arguments(change, self.view.overrides))
        return None

    def palette_commands(self) -> list[PaletteCommand]:
        """The registry's commands, then one per changed step."""
        commands = self.registry_commands()
        for index, change in enumerate(self.view.changes[:SHOWN_CHANGES] if self.view else ()):
            commands.append(PaletteCommand(
                f"whatif: Open {change.execution_id} {change.step_id} #{change.n}",
                f"{change.before} → {change.after}",
                lambda index=index: self.open_change(index),
            ))  # fmt: skip
        return commands

