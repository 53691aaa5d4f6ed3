"""One execution: its steps, the attempts of the selected step, and the selected attempt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Static, TabbedContent, Tabs
from textual.worker import Worker, WorkerState

from console.printable import printable
from console.render.formats import format_time
from console.render.navigation import next_failed, opening_position
from console.render.warnings import execution_warnings
from console.tui.screens.palette import PaletteCommand
from console.tui.screens.store_source import StoreSource, StoreUnavailable
from console.tui.widgets.attempt_detail import TAB_IDS, AttemptDetail
from console.tui.widgets.cells import duration_text, inline_json, status_text, twin_command
from console.tui.widgets.search_bar import SearchBar
from console.tui.widgets.tables import AttemptTable, StepTable
from console.tui.widgets.text_actions import (
    FocusedText,
    detail_focused_text,
    open_externally,
    search_target,
)
from console.words import counted, sent_parameters
from store.queries import ExecutionDetail, StepRecord

_TAB_TITLES = ("Decision", "Request", "Response", "LLM", "Backoff & events", "Timeline",
               "Diff")


class ExecutionScreen(Screen):
    """Steps, attempts and the attempt detail of one execution; polls while it is running."""

    # Below 32 rows the tables shrink so the detail pane keeps room (console.tcss `-short`).
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"), (32, "-tall")]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back", id="back", key_display="esc",
                tooltip="Back to the executions list"),
        Binding("r", "refresh", "Refresh", id="refresh", tooltip="Query the store again now"),
        Binding("Y", "copy_twin", "Copy CLI", id="copy-cli", key_display="Y",
                tooltip="Copy the equivalent `truva-console explain` command"),
        Binding("y", "copy_focused", "Copy", id="copy-focused",
                tooltip="Copy the selected text, else the whole focused pane or tab"),
        Binding("ctrl+f", "search", "Search", id="search-text",
                tooltip="Find in the focused body or LLM text (or the active tab's)"),
        Binding("f3", "open_pager", "Pager", id="open-pager",
                tooltip="Show the focused body, prompt, answer or tab in $PAGER (less -R)"),
        Binding("f4", "open_editor", "Editor", id="open-editor", show=False,
                tooltip="Open a read-only copy of the focused text in $EDITOR"),
        Binding("R", "replay_step", "Replay step", id="replay-step", key_display="R",
                tooltip="Replay the selected step locally with edited tool responses"),
        Binding("F", "rerun_failed", "Re-run failed", id="rerun-failed", key_display="F",
                tooltip="Run the failed, rejected and skipped steps again as a new execution, "
                        "reusing the results of the steps that succeeded (truva-console rerun)"),
        Binding("n,right_square_bracket", "next_failed", "Next failed", id="next-failed",
                key_display="n", tooltip="Jump to the next failed attempt of this execution"),
        Binding("N,left_square_bracket", "previous_failed", "Prev failed", id="previous-failed",
                key_display="N", show=False,
                tooltip="Jump to the previous failed attempt of this execution"),
        *(
            Binding(str(number), f"show_tab('{tab_id}')", title, show=False,
                    id=f"show-{tab_id}", tooltip=f"Show the {title} tab of the attempt")
            for number, (tab_id, title) in enumerate(zip(TAB_IDS, _TAB_TITLES, strict=True), 1)
        ),
    ]  # fmt: skip

    @dataclass
    class ExecutionLoaded(Message):
        """The execution came back from the store."""

        request: int
        detail: ExecutionDetail

    @dataclass
    class LoadFailed(Message):
        """The execution could not be read; `problem` is one line."""

        request: int
        problem: str

    @dataclass
    class RerunFinished(Message):
        """A re-run of the execution ended; `execution_id` is the new execution."""

        execution_id: str
        status: str

    @dataclass
    class RerunFailed(Message):
        """A re-run could not start or failed; `problem` is one line."""

        problem: str

    def __init__(
        self,
        source: StoreSource,
        execution_id: str,
        *,
        db_arg: str | None = None,
        refresh_interval_s: float | None = 1.0,
    ) -> None:
        super().__init__()
        self.source = source
        self.execution_id = execution_id
        self.db_arg = db_arg
        self.refresh_interval_s = refresh_interval_s
        self.detail: ExecutionDetail | None = None
        self.step_id: str | None = None
        self.attempt_n: int | None = None
        self.problem: str | None = None
        self._request = 0
        self._in_flight = False
        self.rerunning = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Loading…", id="execution-summary")
        yield StepTable(id="steps")
        yield Static(id="step-summary")
        yield AttemptTable(id="attempts")
        yield AttemptDetail(id="attempt-detail")
        yield SearchBar(id="search-bar")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "truva-console"
        self._update_twin()
        self.query_one(StepTable).focus()
        self.load_execution()
        if self.refresh_interval_s:
            self.set_interval(self.refresh_interval_s, self.poll_store, name="poll-store")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer replay once a step of a finished execution is selected."""
        if action == "replay_step":
            detail = self.detail
            finished = detail is not None and detail.execution.status != "running"
            return finished and self._step(self.step_id) is not None
        if action == "rerun_failed":
            detail = self.detail
            return (
                not self.rerunning
                and detail is not None
                and detail.execution.status != "running"
                and any(step.status != "succeeded" for step in detail.steps)
            )
        return True

    # ------------------------------------------------------------------ loading

    @property
    def twin_command(self) -> str:
        """The `truva-console explain` command that shows the selected step."""
        args = ["explain", self.execution_id] + ([self.step_id] if self.step_id else [])
        return twin_command(self.db_arg, *args)

    @property
    def rerun_twin_command(self) -> str:
        """The `truva-console rerun` command that re-runs this execution."""
        return twin_command(self.db_arg, "rerun", self.execution_id)

    def _update_twin(self) -> None:
        self.sub_title = f"CLI: {self.twin_command}"

    def poll_store(self) -> None:
        """Reload while the execution is running (called by the refresh timer)."""
        running = self.detail is None or self.detail.execution.status == "running"
        if running and not self._in_flight:
            self.load_execution()

    def load_execution(self) -> None:
        """Start a query for the execution; stale answers are ignored."""
        self._request += 1
        self._in_flight = True
        self._fetch_execution(self._request, self.execution_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="execution-detail")
    def _fetch_execution(self, request: int, execution_id: str) -> None:
        try:
            detail = self.source.get_execution(execution_id)
        except StoreUnavailable as error:
            self.post_message(self.LoadFailed(request, str(error)))
            return
        self.post_message(self.ExecutionLoaded(request, detail))

    @on(ExecutionLoaded)
    def _execution_loaded(self, message: ExecutionLoaded) -> None:
        if message.request != self._request:
            return
        self._in_flight = False
        if message.detail == self.detail:
            return
        self.detail, self.problem = message.detail, None
        self.execution_id = message.detail.execution.execution_id
        self._show_detail()

    @on(LoadFailed)
    def _load_failed(self, message: LoadFailed) -> None:
        if message.request != self._request:
            return
        self._in_flight = False
        if message.problem != self.problem:
            self.notify(message.problem, title="Cannot read the execution", severity="error")
        self.problem = message.problem
        if self.detail is None:
            self.query_one("#execution-summary", Static).update(
                Text(f"Cannot read execution {self.execution_id}: {message.problem}", style="red")
            )

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "execution-detail" and event.state == WorkerState.ERROR:
            self._in_flight = False
            self.notify(f"unexpected error: {event.worker.error}", severity="error")
        if event.worker.group == "rerun" and event.state == WorkerState.ERROR:
            self.rerunning = False
            self.refresh_bindings()
            self.notify(f"unexpected error: {event.worker.error}", severity="error")

    # ---------------------------------------------------------------- rendering

    def _show_detail(self) -> None:
        detail = self.detail
        assert detail is not None
        self.query_one("#execution-summary", Static).update(self._summary_text(detail))
        steps = self.query_one(StepTable)
        steps.show_steps(detail.steps)
        known = {step.step_id for step in detail.steps}
        if self.step_id not in known:
            self.step_id, self.attempt_n = opening_position(detail)
        steps.move_to_key(self.step_id)
        self._show_step(self.step_id, keep_attempt=True)

    def _summary_text(self, detail: ExecutionDetail) -> Text:
        row = detail.execution
        planned = max(row.steps_planned, row.steps_total)
        text = Text.assemble(
            status_text(row.status), "  ", (printable(row.execution_id), "bold"),
            f"  ·  started {format_time(row.started_at)}  ·  took {duration_text(row)}",
            f"  ·  plan {printable(row.plan_path) or '-'}\n",
            ("query ", "bold"), printable(row.query) or "-", "\n",
            *((("rerun of ", "bold"), printable(row.rerun_of), "  ·  ") if row.rerun_of else ()),
            f"{counted(planned, 'step')}: {row.steps_succeeded} ok, {row.steps_failed} failed, "
            f"{row.steps_rejected} rejected, {row.steps_skipped} skipped"
            + (f", {row.steps_unfinished} unfinished" if row.steps_unfinished else ""),
            f"  ·  {counted(row.attempts, 'attempt')}, {row.dispatches} dispatched",
            f"  ·  {counted(row.llm_calls, 'LLM call')}, {counted(row.llm_total_tokens, 'token')}",
        )  # fmt: skip
        if row.stop_reason:
            text.append(f"\nstopped: {printable(row.stop_reason)}", style="yellow")
        warned = execution_warnings(detail)
        if warned:
            text.append(f"\n⚠ {counted(len(warned), 'tool-contract warning')}: "
                        f"{printable(warned[0][2].message)} ({warned[0][0]} #{warned[0][1]})"
                        + (" …" if len(warned) > 1 else ""), style="yellow")  # fmt: skip
        return text

    def _step(self, step_id: str | None) -> StepRecord | None:
        if self.detail is None or step_id is None:
            return None
        return next((s for s in self.detail.steps if s.step_id == step_id), None)

    def _show_step(self, step_id: str | None, *, keep_attempt: bool = False) -> None:
        step = self._step(step_id)
        self.step_id = step_id
        self._update_twin()
        self.refresh_bindings()
        attempts_table = self.query_one(AttemptTable)
        detail_pane = self.query_one(AttemptDetail)
        if step is None:
            self.query_one("#step-summary", Static).update("")
            attempts_table.show_attempts(())
            detail_pane.show_note("This execution has no recorded steps yet.")
            return
        self.query_one("#step-summary", Static).update(self._step_text(step))
        attempts_table.show_attempts(step.attempts)
        numbers = [attempt.n for attempt in step.attempts]
        if not keep_attempt or self.attempt_n not in numbers:
            self.attempt_n = numbers[0] if numbers else None
        attempts_table.move_to_key(None if self.attempt_n is None else str(self.attempt_n))
        self._show_attempt(self.attempt_n)

    def _step_text(self, step: StepRecord) -> Text:
        text = Text.assemble(
            (printable(step.step_id), "bold"), "  ",
            printable(f"{step.tool}.{step.capability}") if step.tool else "", "  ",
            status_text(step.status),
            f"  ·  depends on {printable(', '.join(step.depends_on)) or '-'}",
        )  # fmt: skip
        runs = sent_parameters(step.attempts)
        if not runs or inline_json(runs[0].parameters) != inline_json(step.parameters):
            text.append_text(Text.assemble(("  ·  planned ", "bold"),
                                           inline_json(step.parameters)))  # fmt: skip
        for run in runs:
            text.append_text(Text.assemble((f"  ·  {run.verb} {run.attempts_label} ", "bold"),
                                           inline_json(run.parameters), run.note))  # fmt: skip
        if step.final_action:
            text.append(printable(f"  ·  outcome {step.final_action} by rule {step.final_rule_id}"))
        if step.error:
            text.append(f"  ·  error {printable(step.error)}", style="red")
        if step.skip_reason:
            text.append(f"  ·  skipped: {printable(step.skip_reason)}", style="yellow")
        return text

    def _show_attempt(self, n: int | None) -> None:
        step = self._step(self.step_id)
        detail_pane = self.query_one(AttemptDetail)
        self.attempt_n = n
        attempt = None if step is None else next((a for a in step.attempts if a.n == n), None)
        if step is None or self.detail is None:
            return
        if attempt is None:
            reused = [e.message for e in step.events if e.name == "rerun.result_reused"]
            if step.skip_reason:
                note = f"{step.step_id} was skipped: {step.skip_reason}. It sent nothing."
            elif reused:
                note = f"{step.step_id}: {reused[0]}. It sent nothing in this execution."
            elif step.status == "running":
                note = f"{step.step_id} is running; no attempt is recorded yet."
            else:
                note = f"{step.step_id} has no recorded attempt."
            detail_pane.show_note(note)
            return
        detail_pane.show_attempt(attempt, step, self.detail)

    # ------------------------------------------------------------------ events

    @on(StepTable.StepHighlighted)
    def _step_highlighted(self, message: StepTable.StepHighlighted) -> None:
        if message.step_id != self.step_id:
            self._show_step(message.step_id)

    @on(StepTable.StepChosen)
    def _step_chosen(self, message: StepTable.StepChosen) -> None:
        if message.step_id != self.step_id:
            self._show_step(message.step_id)
        self.query_one(AttemptTable).focus()

    @on(AttemptTable.AttemptHighlighted)
    def _attempt_highlighted(self, message: AttemptTable.AttemptHighlighted) -> None:
        if message.n != self.attempt_n:
            self._show_attempt(message.n)

    @on(AttemptTable.AttemptChosen)
    def _attempt_chosen(self, message: AttemptTable.AttemptChosen) -> None:
        if message.n != self.attempt_n:
            self._show_attempt(message.n)
        self.query_one("#detail-tabs", TabbedContent).query_one(Tabs).focus()

    # ------------------------------------------------------------------ actions

    def select_step(self, step_id: str) -> None:
        """Show `step_id` and put the cursor on it."""
        self.query_one(StepTable).move_to_key(step_id)
        self._show_step(step_id)

    def select_attempt(self, n: int) -> None:
        """Show attempt `n` of the selected step and put the cursor on it."""
        self.query_one(AttemptTable).move_to_key(str(n))
        self._show_attempt(n)

    def action_next_failed(self, backwards: bool = False) -> None:
        """Show the next (or previous) failed attempt, across steps."""
        if self.detail is None:
            return
        target = next_failed(self.detail, self.step_id, self.attempt_n, backwards=backwards)
        if target is None:
            self.notify("No failed attempt in this execution.", title="Next failed")
            return
        step_id, n = target
        if step_id != self.step_id:
            self.attempt_n = n
            self.query_one(StepTable).move_to_key(step_id)
            self._show_step(step_id, keep_attempt=True)
        else:
            self.select_attempt(n)

    def action_previous_failed(self) -> None:
        """Show the previous failed attempt, across steps."""
        self.action_next_failed(backwards=True)

    def action_back(self) -> None:
        """Back to the executions list."""
        self.dismiss()

    def action_refresh(self) -> None:
        """Query the store again now."""
        self.load_execution()

    def action_show_tab(self, tab_id: str) -> None:
        """Show one tab of the attempt detail."""
        self.query_one(AttemptDetail).show_tab(tab_id)

    def action_replay_step(self, step_id: str | None = None) -> None:
        """Open the replay screen for `step_id` (the selected step by default)."""
        open_replay = getattr(self.app, "open_replay", None)
        step_id = step_id or self.step_id
        if self.detail is not None and step_id is not None and open_replay is not None:
            open_replay(self.detail, step_id)

    def action_rerun_failed(self) -> None:
        """Re-run the failed steps in a worker, then open the new execution."""
        if self.detail is None or not self.check_action("rerun_failed", ()):
            return
        self.rerunning = True
        self.refresh_bindings()
        self.notify(f"CLI: {self.rerun_twin_command}", title="Re-running the failed steps")
        self._rerun(self.detail)

    @work(thread=True, exclusive=True, exit_on_error=False, group="rerun")
    def _rerun(self, detail: ExecutionDetail) -> None:
        from console.replay.rerun import RerunError, prepare_rerun, rerun_executor
        from console.session import run_recorded
        from store.errors import StoreError

        try:
            setup = prepare_rerun(detail)
            recorded = run_recorded(
                lambda recorder: rerun_executor(setup, recorder), self.source.db_path
            )
        except (RerunError, StoreError) as error:
            self.post_message(self.RerunFailed(" ".join(str(error).split())))
            return
        outcome = recorded.outcome
        self.post_message(self.RerunFinished(outcome.execution_id, outcome.status))

    @on(RerunFinished)
    def _rerun_finished(self, message: RerunFinished) -> None:
        self.rerunning = False
        self.refresh_bindings()
        self.notify(f"execution {message.execution_id}: {message.status}", title="Re-run finished")
        open_execution = getattr(self.app, "open_execution", None)
        if open_execution is not None:
            open_execution(message.execution_id)

    @on(RerunFailed)
    def _rerun_failed(self, message: RerunFailed) -> None:
        self.rerunning = False
        self.refresh_bindings()
        self.notify(message.problem, title="Cannot re-run", severity="error")

    def focused_text(self) -> FocusedText:
        """The text F3, F4 and `y` act on: the focused pane, else the active detail tab."""
        detail = self.query_one(AttemptDetail)
        active = detail.query_one("#detail-tabs", TabbedContent).active
        return detail_focused_text(detail, active, self.focused)

    def action_search(self) -> None:
        """Open the search bar on the focused text pane, else the active tab's."""
        detail = self.query_one(AttemptDetail)
        active = detail.query_one("#detail-tabs", TabbedContent).active
        target = search_target(detail, active, self.focused)
        if target is None:
            self.notify("Search works in the request and response bodies and the LLM tab.",
                        title="Nothing to search here")  # fmt: skip
            return
        self.query_one(SearchBar).open(target)

    def action_copy_focused(self) -> None:
        """Copy the selection of the focused pane, else all of its text."""
        focused = self.focused_text()
        text = focused.selected or focused.text
        self.app.copy_to_clipboard(text)
        what = "the selection" if focused.selected else f"the {focused.title}"
        self.notify(f"{len(text)} characters", title=f"Copied {what}")

    def action_open_pager(self, editor: bool = False) -> None:
        """Show the focused text in $PAGER (or a read-only copy in $EDITOR)."""
        self.notify(open_externally(self.app, self.focused_text(), editor=editor),
                    title="Editor" if editor else "Pager")  # fmt: skip

    def action_open_editor(self) -> None:
        """Open a read-only copy of the focused text in $EDITOR."""
        self.action_open_pager(editor=True)

    def action_copy_twin(self) -> None:
        """Copy the equivalent CLI command to the clipboard."""
        self.app.copy_to_clipboard(self.twin_command)
        self.notify(self.twin_command, title="Copied the CLI command")

    def palette_commands(self) -> list[PaletteCommand]:
        """Commands of this screen for the command palette."""
        commands = [
            PaletteCommand("view: Back to executions", "Return to the list", self.action_back),
            PaletteCommand("view: Refresh", "Query the store again now", self.action_refresh),
            PaletteCommand("cli: Copy the explain command", self.twin_command,
                           self.action_copy_twin),
        ]  # fmt: skip
        if self.check_action("rerun_failed", ()):
            commands.append(PaletteCommand(
                "execution: Re-run failed steps",
                f"A new execution reusing the steps that succeeded · CLI: "
                f"{self.rerun_twin_command}",
                self.action_rerun_failed,
            ))  # fmt: skip
        for tab_id, title in zip(TAB_IDS, _TAB_TITLES, strict=True):
            commands.append(
                PaletteCommand(
                    f"tab: {title}",
                    f"Show the {title} tab",
                    lambda tab_id=tab_id: self.action_show_tab(tab_id),
                )
            )
        for step in self.detail.steps if self.detail else ():
            commands.append(
                PaletteCommand(
                    f"step: Show {step.step_id}",
                    f"{step.status} · {step.tool}.{step.capability}",
                    lambda step_id=step.step_id: self.select_step(step_id),
                )
            )
            commands.append(
                PaletteCommand(
                    f"replay: Replay {step.step_id}",
                    "Re-run it locally with edited tool responses",
                    lambda step_id=step.step_id: self.action_replay_step(step_id),
                )
            )
        return commands
