"""The row tables of the TUI: executions, steps of one execution, attempts of one step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from console.printable import printable
from console.render.formats import format_duration, format_time
from console.render.warnings import attempt_warnings, badge, step_warning_count
from console.tui.widgets.cells import (
    action_text,
    delay_text,
    duration_text,
    http_text,
    one_line,
    status_text,
    steps_text,
)
from store.queries import AttemptRecord, ExecutionRow, StepRecord

_QUERY_WIDTH = 40
_BADGE_STYLE = "bold yellow"


class NavigableTable(DataTable):
    """A row-cursor DataTable with vim keys (j/k, g/G) and an Enter that opens the row."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Open", id="open-row",
                tooltip="Open the highlighted row"),
        Binding("j", "cursor_down", "Down", show=False, id="row-down",
                tooltip="Move to the next row"),
        Binding("k", "cursor_up", "Up", show=False, id="row-up",
                tooltip="Move to the previous row"),
        Binding("g", "scroll_top", "First row", show=False, id="row-first",
                tooltip="Move to the first row"),
        Binding("G", "scroll_bottom", "Last row", show=False, id="row-last",
                tooltip="Move to the last row"),
    ]  # fmt: skip

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)

    async def _on_idle(self, event: events.Idle) -> None:
        # Textual 8.2.8 measures new rows on idle without invalidating lines rendered before,
        # so a header drawn between `add_row` and idle keeps its old widths; redraw it all.
        widths_pending = self._require_update_dimensions
        await super()._on_idle(event)
        if widths_pending:
            self._clear_caches()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide `Open` from the footer while the table is empty."""
        if action == "select_cursor":
            return self.row_count > 0
        return True

    def highlighted_key(self) -> str | None:
        """The key of the row under the cursor, or None for an empty table."""
        if not self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return row_key.value

    def move_to_key(self, key: str | None) -> bool:
        """Put the cursor on the row with `key`; False when there is no such row."""
        if key is None:
            return False
        try:
            index = self.get_row_index(key)
        except Exception:  # RowDoesNotExist
            return False
        self.move_cursor(row=index, animate=False)
        return True


class ExecutionTable(NavigableTable):
    """One page of executions, newest first; the row key is the execution id."""

    @dataclass
    class ExecutionHighlighted(Message):
        """The cursor moved to an execution."""

        execution_id: str

    @dataclass
    class ExecutionChosen(Message):
        """The user pressed Enter on (or clicked) an execution."""

        execution_id: str

    COLUMNS = (
        ("EXECUTION", "execution"),
        ("STATUS", "status"),
        ("STARTED (UTC)", "started"),
        ("DURATION", "duration"),
        ("LAST FAILING RULE", "rule"),
        ("OK/FAIL/SKIP", "steps"),
        ("ATT", "attempts"),
        ("LLM", "llm"),
        ("TOKENS", "tokens"),
        ("QUERY", "query"),
    )

    def on_mount(self) -> None:
        for label, key in self.COLUMNS:
            self.add_column(label, key=key)

    def show_rows(self, rows: tuple[ExecutionRow, ...]) -> None:
        """Replace the rows, keeping the cursor on the same execution when it is still listed."""
        kept = self.highlighted_key()
        self.clear()
        for row in rows:
            self.add_row(
                printable(row.execution_id),
                Text.assemble(status_text(row.status),
                              (badge(row.contract_warnings), _BADGE_STYLE)),
                format_time(row.started_at),
                duration_text(row),
                Text(printable(row.last_failing_rule) or "-",
                     style="" if row.last_failing_rule else "dim"),
                steps_text(row),
                Text(str(row.attempts), justify="right"),
                Text(str(row.llm_calls), justify="right"),
                Text(str(row.llm_total_tokens), justify="right"),
                (f"↻ rerun of {row.rerun_of}  " if row.rerun_of else "")
                + one_line(row.query, _QUERY_WIDTH),
                key=row.execution_id,
            )
        self.move_to_key(kept)
        self.refresh_bindings()

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.ExecutionHighlighted(event.row_key.value))

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.ExecutionChosen(event.row_key.value))


class StepTable(NavigableTable):
    """The steps of one execution; the row key is the step id."""

    @dataclass
    class StepHighlighted(Message):
        """The cursor moved to a step."""

        step_id: str

    @dataclass
    class StepChosen(Message):
        """The user pressed Enter on a step."""

        step_id: str

    def on_mount(self) -> None:
        for label, key in (
            ("STEP", "step"),
            ("STATUS", "status"),
            ("CAPABILITY", "capability"),
            ("DISPATCHES", "dispatches"),
            ("ATTEMPTS", "attempts"),
            ("CORRECTIONS", "corrections"),
            ("FINAL RULE", "rule"),
        ):
            self.add_column(label, key=key)

    def show_steps(self, steps: tuple[StepRecord, ...]) -> None:
        """Replace the rows with `steps`."""
        self.clear()
        for step in steps:
            capability = printable(f"{step.tool}.{step.capability}") if step.tool else "-"
            # validation_retries is TruvaG3's one shared counter: it already counts layer 4.
            corrections = step.validation_retries or 0
            self.add_row(
                printable(step.step_id),
                Text.assemble(status_text(step.status),
                              (badge(step_warning_count(step)), _BADGE_STYLE)),
                capability,
                Text(str(step.dispatch_count or 0), justify="right"),
                Text(str(len(step.attempts)), justify="right"),
                Text(str(corrections), justify="right"),
                printable(step.final_rule_id) or "-",
                key=step.step_id,
            )
        self.refresh_bindings()

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.StepHighlighted(event.row_key.value))

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.StepChosen(event.row_key.value))


class AttemptTable(NavigableTable):
    """The attempts of one step, one per row; the row key is the attempt's `n` as text."""

    @dataclass
    class AttemptHighlighted(Message):
        """The cursor moved to an attempt."""

        n: int

    @dataclass
    class AttemptChosen(Message):
        """The user pressed Enter on an attempt."""

        n: int

    def on_mount(self) -> None:
        for label, key in (
            ("N", "n"),
            ("ATTEMPT", "attempt"),
            ("HTTP", "http"),
            ("TOOK", "took"),
            ("ACTION", "action"),
            ("RULE", "rule"),
            ("LAYER", "layer"),
            ("DELAY AFTER", "delay"),
        ):
            self.add_column(label, key=key)

    def show_attempts(self, attempts: tuple[AttemptRecord, ...]) -> None:
        """Replace the rows with `attempts`."""
        self.clear()
        for attempt in attempts:
            inputs = attempt.decision.get("inputs") if isinstance(attempt.decision, dict) else None
            limit = (inputs or {}).get("max_attempts")
            counter = f"{attempt.attempt_number}" + (f" of {limit}" if limit else "")
            self.add_row(
                Text(str(attempt.n), justify="right"),
                counter,
                Text.assemble(http_text(attempt),
                              (badge(len(attempt_warnings(attempt))), _BADGE_STYLE)),
                format_duration(attempt.elapsed_ms) if attempt.dispatched else "-",
                action_text(attempt.action),
                printable(attempt.rule_id) or "-",
                printable(attempt.decision_layer) or "-",
                delay_text(attempt.delay_ms, attempt.delay_source),
                key=str(attempt.n),
            )
        self.refresh_bindings()

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.AttemptHighlighted(int(event.row_key.value)))

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.AttemptChosen(int(event.row_key.value)))
