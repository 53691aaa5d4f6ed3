"""One execution: its steps, the attempts of the selected step, and the selected attempt."""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Header, Static, TabbedContent, Tabs, TextArea
from textual.worker import Worker, WorkerState

from console.printable import printable
from console.render.formats import format_time
from console.render.navigation import next_failed, opening_position
from console.render.rich_views import step_text
from console.render.views import step_view
from console.render.warnings import execution_warnings
from console.tui.actions import bindings
from console.tui.messages import ExecutionRequested, ReplayRequested
from console.tui.prefetch import Prefetched
from console.tui.screens.palette import PaletteCommand
from console.tui.screens.panes import PaneScreen
from console.tui.screens.store_backed import StoreBacked, StoreLoadFailed, StoreRequests
from console.tui.screens.store_source import StoreSource, StoreUnavailable
from console.tui.widgets.attempt_detail import AttemptDetail
from console.tui.widgets.cells import duration_text, status_text, twin_command
from console.tui.widgets.footer import KeysFooter
from console.tui.widgets.search_bar import SearchBar
from console.tui.widgets.searchable import SearchableStatic
from console.tui.widgets.tables import AttemptTable, StepTable
from console.tui.widgets.text_actions import (
    FocusedText,
    detail_focused_text,
    open_externally,
    search_target,
)
from console.words import counted
from store.queries import ExecutionDetail, StepRecord
from store.records import detail_with_step, step_calls_without_texts, step_with_texts

# Panes that show a loading indicator, not empty tables, until the first answer from the store.
_LOADING_PANES = ("#steps", "#attempts", "#attempt-detail")
# Below this many rows the tables shrink (class -short) so the attempt detail keeps room.
SHORT_SCREEN_ROWS = 30

class ExecutionScreen(StoreBacked, PaneScreen, Screen):
    """Steps, attempts and the attempt detail of one execution; polls while it is running."""

    ACTION_SCOPE = "execution"
    PANES = (("steps", "Steps"), ("attempts", "Attempts"), ("attempt-detail", "Detail"))
    PALETTE_IF_ENABLED = frozenset({"rerun-failed"})
    BINDINGS: ClassVar[list[BindingType]] = bindings("execution")

    @dataclass
    class ExecutionLoaded(Message):
        """The execution came back from the store."""

        request: int
        detail: ExecutionDetail

    class LoadFailed(StoreLoadFailed):
        """The execution could not be read; `problem` is one line."""

    WORKER_GROUP = "execution-detail"

    @dataclass
    class LLMTextsLoaded(Message):
        """The prompts and answers of some LLM calls came back (`Store.llm_call_texts`)."""

        execution_id: str
        texts: dict[str, dict[str, Any]]
        problem: str | None = None

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
        step_id: str | None = None,
        attempt_n: int | None = None,
        detail: ExecutionDetail | None = None,
        pending: Prefetched | None = None,
        gc_paused: bool = False,
    ) -> None:
        super().__init__()
        self.source = source
        self.execution_id = execution_id
        self.db_arg = db_arg
        self.refresh_interval_s = refresh_interval_s
        self.detail: ExecutionDetail | None = None
        # Where it opens: this step and attempt when given and recorded, else opening_position.
        self.step_id: str | None = step_id
        self.attempt_n: int | None = attempt_n
        self.problem: str | None = None
        self.requests = StoreRequests()
        self.rerunning = False
        # The LLM calls' texts read so far, by call id: the execution is read without them
        # (they are most of its bytes) and each step's are read when the step is shown with
        # the LLM tab built (once the tab has been shown).
        self.llm_texts: dict[str, dict[str, Any]] = {}
        self._texts_requested: set[str] = set()
        self.texts_reads_running = 0
        # True when the opener paused the GC for this screen (`pause_gc`) before reading.
        self.gc_paused = gc_paused
        self.gc_frozen = False
        # The execution as read before the screen was made (read ahead by
        # `TruvaConsoleApp.prefetch`, or as it was opened): shown as the store's first answer,
        # with no loading indicators and no read; or that read still running, which the first
        # load waits for instead of reading again.
        self._prefetched = detail
        self._pending = pending

    def compose(self) -> ComposeResult:
        self._pause_gc()
        # The read starts before the panes are built and styled, so the two overlap; its
        # answer is handled after `on_mount` (a screen dispatches Compose and Mount first).
        if self._prefetched is None:
            self.load_execution()
        yield Header()
        yield Static(Text(f"Loading execution {printable(self.execution_id)}…"),
                     id="execution-summary")  # fmt: skip
        yield StepTable(id="steps")
        yield Static(id="step-summary")
        yield AttemptTable(id="attempts")
        yield AttemptDetail(id="attempt-detail")
        yield SearchBar(id="search-bar")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.title = "truva-console"
        self.label_panes()
        self._update_twin()
        self.query_one(StepTable).focus()
        if self._prefetched is None:
            self._show_loading(True)
        else:  # filled before the first layout, which then sizes and paints it once
            self._execution_loaded(self.ExecutionLoaded(self.requests.start(), self._prefetched))
        self._prefetched = None
        self.start_polling()

    def on_unmount(self) -> None:
        if self.gc_paused:
            self.gc_paused = False
            gc.enable()
        if self.gc_frozen:
            self.gc_frozen = False
            gc.unfreeze()

    @staticmethod
    def pause_gc() -> bool:
        """Pause the cyclic GC until the screen's first answer from the store is shown, as
        Textual does while it scrolls: the ~100k objects that opening a big execution allocates
        set off a hundred collections, one over every object of the process (a fifth of its
        CPU). Whether it was running: the screen given `gc_paused=True` resumes it."""
        if not gc.isenabled():
            return False
        gc.disable()
        return True

    def _pause_gc(self) -> None:
        if self.pause_gc():
            self.gc_paused = True

    def _resume_gc(self) -> None:
        """Resume the GC with what the screen holds now frozen (`gc.freeze`) until it closes:
        the records and widgets of a big execution live as long as the screen, and scanning
        them to promote them cost the open ~45 ms of CPU; the screen's unmount unfreezes."""
        if self.gc_paused:
            self.gc_paused = False
            gc.freeze()
            self.gc_frozen = True
            gc.enable()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.height < SHORT_SCREEN_ROWS, "-short")

    def _show_loading(self, loading: bool) -> None:
        """Loading indicators over the panes until the store has answered once."""
        for selector in _LOADING_PANES:
            self.query_one(selector).loading = loading

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer replay once a step of a finished execution is selected."""
        if action == "replay_step":
            detail = self.detail
            finished = detail is not None and detail.execution.status != "running"
            return finished and self.shown_step(self.step_id) is not None
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

    def wants_poll(self) -> bool:
        """Poll while the execution is running (or not read yet)."""
        return self.detail is None or self.detail.execution.status == "running"

    def reload(self) -> None:
        """Read the execution again."""
        self.load_execution()

    def load_execution(self) -> None:
        """Start a query for the execution; stale answers are ignored."""
        execution_id, source = self.execution_id, self.source
        pending, self._pending = self._pending, None

        def read() -> ExecutionDetail:
            detail = None if pending is None else pending.wait()
            return detail or source.get_execution(execution_id, llm_texts=False)

        self.run_store_work(read, self.ExecutionLoaded)

    @on(ExecutionLoaded)
    def _execution_loaded(self, message: ExecutionLoaded) -> None:
        if not self.requests.answered(message.request):
            return
        self._show_loading(False)
        self.call_after_refresh(self._resume_gc)
        if message.detail == self.detail:
            return
        self.detail, self.problem = message.detail, None
        self.execution_id = message.detail.execution.execution_id
        self._show_detail()

    @on(LoadFailed)
    def _load_failed(self, message: LoadFailed) -> None:
        if not self.requests.answered(message.request):
            return
        self._show_loading(False)
        self._resume_gc()
        if message.problem != self.problem:
            self.notify(message.problem, title="Cannot read the execution", severity="error",
                        markup=False)  # fmt: skip
        self.problem = message.problem
        if self.detail is None:
            self.query_one("#execution-summary", Static).update(
                Text(f"Cannot read execution {self.execution_id}: {message.problem}", style="red")
            )

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "rerun" and event.state == WorkerState.ERROR:
            self.rerunning = False
            self.refresh_bindings()
            self.notify(f"unexpected error: {event.worker.error}", severity="error", markup=False)

    def store_work_crashed(self, problem: str) -> None:
        """Say so in a notification; the screen keeps what it shows."""
        self._show_loading(False)
        self._resume_gc()
        self.notify(problem, severity="error", markup=False)

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

    def shown_step(self, step_id: str | None) -> StepRecord | None:
        """The step `step_id` with the LLM texts read so far."""
        if self.detail is None or step_id is None:
            return None
        step = next((s for s in self.detail.steps if s.step_id == step_id), None)
        return None if step is None else step_with_texts(step, self.llm_texts)

    def _read_llm_texts(self, step: StepRecord) -> None:
        """Start reading the texts of the step's LLM calls that have none yet."""
        missing = [call_id for call_id in step_calls_without_texts(step)
                   if call_id not in self._texts_requested]  # fmt: skip
        if not missing:
            return
        self._texts_requested.update(missing)
        self.texts_reads_running += 1
        execution_id, source = self.execution_id, self.source

        def read() -> None:
            try:
                texts = source.llm_call_texts(execution_id, missing)
            except StoreUnavailable as error:
                self._texts_requested.difference_update(missing)
                self.post_message(self.LLMTextsLoaded(execution_id, {}, str(error)))
                return
            self.post_message(self.LLMTextsLoaded(execution_id, texts))

        self.run_worker(read, thread=True, exit_on_error=False, group="llm-texts")

    @on(LLMTextsLoaded)
    def _llm_texts_loaded(self, message: LLMTextsLoaded) -> None:
        self.texts_reads_running -= 1
        if message.execution_id != self.execution_id:
            return
        if message.problem:
            self.notify(message.problem, title="Cannot read the LLM calls", severity="error",
                        markup=False)  # fmt: skip
            return
        self.llm_texts.update(message.texts)
        step = self.shown_step(self.step_id)
        attempt = None if step is None else next(
            (a for a in step.attempts if a.n == self.attempt_n), None)  # fmt: skip
        if step is not None and attempt is not None:
            self.query_one(AttemptDetail).show_llm(attempt, step)

    def _show_step(self, step_id: str | None, *, keep_attempt: bool = False) -> None:
        step = self.shown_step(step_id)
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
        self.query_one("#step-summary", Static).update(step_text(step_view(step)))
        attempts_table.show_attempts(step.attempts)
        numbers = [attempt.n for attempt in step.attempts]
        if not keep_attempt or self.attempt_n not in numbers:
            self.attempt_n = numbers[0] if numbers else None
        attempts_table.move_to_key(None if self.attempt_n is None else str(self.attempt_n))
        self._show_attempt(self.attempt_n)

    def _show_attempt(self, n: int | None) -> None:
        step = self.shown_step(self.step_id)
        detail_pane = self.query_one(AttemptDetail)
        self.attempt_n = n
        attempt = None if step is None else next((a for a in step.attempts if a.n == n), None)
        if step is None or self.detail is None:
            return
        if "tab-llm" in detail_pane.built_tabs:
            self._read_llm_texts(step)
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
        self.query_one(SearchBar).text_changed()

    # ------------------------------------------------------------------ events

    @on(StepTable.StepHighlighted)
    def _step_highlighted(self, message: StepTable.StepHighlighted) -> None:
        if message.step_id != self.query_one(StepTable).highlighted_key():
            return  # stale (row 0's, from filling the table): the cursor has moved on since
        if message.step_id != self.step_id:
            self._show_step(message.step_id)

    @on(StepTable.StepChosen)
    def _step_chosen(self, message: StepTable.StepChosen) -> None:
        if message.step_id != self.step_id:
            self._show_step(message.step_id)
        self.query_one(AttemptTable).focus()

    @on(TextArea.Changed, "#llm-text")
    def _llm_text_loaded(self) -> None:
        """A long LLM text prepared in a thread arrived: an open search looks in it again."""
        self.query_one(SearchBar).text_changed()

    @on(SearchableStatic.Rewrapped)
    def _text_rewrapped(self) -> None:
        """A highlighted pane was resized: an open search looks in its new lines again."""
        self.query_one(SearchBar).text_rewrapped()

    @on(TabbedContent.TabActivated, "#detail-tabs")
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """The LLM tab shown: read the step's prompts and answers if they are not yet."""
        step = self.shown_step(self.step_id)
        if event.pane.id == "tab-llm" and step is not None:
            self._read_llm_texts(step)

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

    def action_refresh(self) -> None:
        """Query the store again now."""
        self.load_execution()

    def action_show_tab(self, tab_id: str) -> None:
        """Show one tab of the attempt detail."""
        self.query_one(AttemptDetail).show_tab(tab_id)

    def action_replay_step(self, step_id: str | None = None) -> None:
        """Open the replay screen for `step_id` (the selected step by default)."""
        step_id = step_id or self.step_id
        step = self.shown_step(step_id)
        if self.detail is None or step is None:
            return
        if not step_calls_without_texts(step):
            self.post_message(ReplayRequested(detail_with_step(self.detail, step), step.step_id))
            return
        self._replay_with_texts(self.detail, step)

    # A fixed description: @work names a worker after the repr of its arguments, here the whole
    # execution with every body.
    @work(thread=True, exclusive=True, exit_on_error=False, group="replay-texts",
          description="read the step's LLM texts for its replay")
    def _replay_with_texts(self, detail: ExecutionDetail, step: StepRecord) -> None:
        """Read the step's LLM texts (the replay answers from them), then open the replay."""
        try:
            texts = self.source.llm_call_texts(detail.execution.execution_id,
                                               step_calls_without_texts(step))  # fmt: skip
        except StoreUnavailable as error:
            self.app.call_from_thread(self.notify, str(error), title="Cannot read the LLM calls",
                                      severity="error")  # fmt: skip
            return
        filled = detail_with_step(detail, step_with_texts(step, texts))
        self.post_message(ReplayRequested(filled, step.step_id))

    def action_rerun_failed(self) -> None:
        """Re-run the failed steps in a worker, then open the new execution."""
        if self.detail is None or not self.check_action("rerun_failed", ()):
            return
        self.rerunning = True
        self.refresh_bindings()
        self.notify(f"CLI: {self.rerun_twin_command}", title="Re-running the failed steps",
                    markup=False)  # fmt: skip
        self._rerun(self.detail)

    @work(thread=True, exclusive=True, exit_on_error=False, group="rerun",
          description="re-run the failed steps")
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
        self.notify(f"execution {message.execution_id}: {message.status}", title="Re-run finished",
                    markup=False)  # fmt: skip
        self.post_message(ExecutionRequested(message.execution_id))

    @on(RerunFailed)
    def _rerun_failed(self, message: RerunFailed) -> None:
        self.rerunning = False
        self.refresh_bindings()
        self.notify(message.problem, title="Cannot re-run", severity="error", markup=False)

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
            self.notify("This step has no attempt; search works in an attempt's tabs.",
                        title="Nothing to search here")  # fmt: skip
            return
        self.query_one(SearchBar).open(target)

    def action_copy_focused(self) -> None:
        """Copy the selection of the focused pane, else all of its text."""
        focused = self.focused_text()
        text = focused.selected or focused.text
        self.app.copy_to_clipboard(text)
        what = "the selection" if focused.selected else f"the {focused.title}"
        self.notify(counted(len(text), "character"), title=f"Copied {what}", markup=False)

    def action_open_pager(self, editor: bool = False) -> None:
        """Show the focused text in $PAGER (or a read-only copy in $EDITOR)."""
        self.notify(open_externally(self.app, self.focused_text(), editor=editor),
                    title="Editor" if editor else "Pager", markup=False)  # fmt: skip

    def action_open_editor(self) -> None:
        """Open a read-only copy of the focused text in $EDITOR."""
        self.action_open_pager(editor=True)

    def action_copy_twin(self) -> None:
        """Copy the equivalent CLI command to the clipboard."""
        self.app.copy_to_clipboard(self.twin_command)
        self.notify(self.twin_command, title="Copied the CLI command", markup=False)

    def action_twin(self, action_id: str) -> str | None:
        """The `explain` command for `copy-cli` (with `--timeline --attempt N` for the timeline
        tab), the `rerun` command for `rerun-failed`."""
        if action_id == "copy-cli":
            return self.twin_command
        if action_id == "show-tab-timeline" and self.step_id and self.attempt_n is not None:
            return f"{self.twin_command} --timeline --attempt {self.attempt_n}"
        if action_id == "rerun-failed":
            return self.rerun_twin_command
        return None

    def palette_commands(self) -> list[PaletteCommand]:
        """Commands of this screen for the command palette: the registry's, then per step."""
        commands = self.registry_commands()
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
