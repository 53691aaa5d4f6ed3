"""The row tables of the TUI: executions, steps of one execution, attempts of one step."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from rich.cells import cell_len
from rich.text import Text
from textual import events, on
from textual.binding import BindingType
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from console.printable import printable
from console.render.execution_columns import (
    COLUMNS_BY_KEY,
    EXECUTION_COLUMNS,
    OLDEST_FIRST,
    QUERY_MIN_WIDTH,
    ExecutionColumn,
    RowOrder,
    default_descending,
    fitting_columns,
    query_cell,
    sort_rows,
)
from console.render.formats import format_duration
from console.render.warnings import attempt_warnings, badge, step_warning_count
from console.tui.actions import bindings
from console.tui.widgets.cells import action_text, delay_text, http_text, status_text
from store.queries import AttemptRecord, ExecutionRow, StepRecord

_BADGE_STYLE = "bold yellow"


class NavigableTable(DataTable):
    """A row-cursor DataTable with vim keys (j/k, g/G) and an Enter that opens the row."""

    ACTION_SCOPE = "table"
    BINDINGS: ClassVar[list[BindingType]] = bindings("table")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)

    async def _on_idle(self, event: events.Idle) -> None:
        # Textual 8.2.8 measures new rows on idle without invalidating lines rendered before,
        # so a header drawn between `add_row` and idle keeps its old widths; redraw it all.
        widths_pending = self._require_update_dimensions
        await super()._on_idle(event)
        if widths_pending:
            self._clear_caches()

    def on_resize(self, event: events.Resize) -> None:
        """Keep the cursor's row in view when the table's height changes: the screen shrinks
        the tables to fit a small terminal after the cursor was placed, and the scroll offset
        that showed it at the old height hid it (80×24: the Attempts pane showed #7 while the
        detail was #10's)."""
        if event.size.height != getattr(self, "_last_height", None):
            self._last_height = event.size.height
            if self.row_count and self.show_cursor:
                self.call_after_refresh(self._scroll_cursor_into_view)

    def measure_rows(self) -> None:
        """Size the columns and the scrollable height for the rows added so far now, rather
        than at the next idle: a layout pass before that idle would lay out and paint the
        table with the old sizes, and the new ones would ask for a second pass."""
        if self._require_update_dimensions:
            self._require_update_dimensions = False
            new_rows = self._new_rows.copy()
            self._new_rows.clear()
            self._update_dimensions(() if self._widen_for_text_rows(new_rows) else new_rows)
            self._clear_caches()

    def _widen_for_text_rows(self, row_keys: Iterable[RowKey]) -> bool:
        """Widen the columns for rows of one-line-high `Text` cells without labels, measured
        as Textual measures them (the widest line's cells) but without a console per cell;
        False, having measured nothing for certain, when a row is not of that kind."""
        columns = self.ordered_columns
        for row_key in row_keys:
            row, cells = self.rows.get(row_key), self._data.get(row_key)
            if row is None or cells is None or row.label is not None or row.auto_height:
                return False
            if not all(isinstance(cells.get(column.key), Text) for column in columns):
                return False
            for column in columns:
                lines = cells[column.key].plain.splitlines()
                width = max(map(cell_len, lines)) if lines else 0
                column.content_width = max(column.content_width, width)
        return True

    def add_row(self, *cells: Any, **options: Any) -> Any:
        """DataTable's `add_row`; the first row shows `Open` in the footer (see check_action),
        which the footer would otherwise learn only at the next bindings update."""
        key = super().add_row(*cells, **options)
        if self.row_count == 1:
            self.refresh_bindings()
        return key

    def clear(self, columns: bool = False) -> Self:
        """DataTable's `clear`; an emptied table hides `Open` from the footer at once."""
        had_rows = self.row_count > 0
        super().clear(columns)
        if had_rows:
            self.refresh_bindings()
        return self

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
    """One page of executions, newest first unless sorted; the row key is the execution id.

    The columns are `ls`'s (console/render/execution_columns.py); on a narrow terminal the
    least needed ones are left out so that the query stays visible, and the query takes the
    width that is left.
    """

    ACTION_SCOPE = "execution-table"
    BINDINGS: ClassVar[list[BindingType]] = bindings("execution-table")

    @dataclass
    class ExecutionHighlighted(Message):
        """The cursor moved to an execution."""

        execution_id: str

    @dataclass
    class ExecutionChosen(Message):
        """The user pressed Enter on (or clicked) an execution."""

        execution_id: str

    @dataclass
    class SortChanged(Message):
        """The rows are now in `order`."""

        order: RowOrder

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.order = RowOrder()
        self.shown_columns: tuple[str, ...] = ()
        self._rows: tuple[ExecutionRow, ...] = ()
        self._header_signature: tuple[object, ...] = ()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer sorting and reversing once there are rows."""
        if action in ("sort_next", "sort_reverse"):
            return self.row_count > 0
        return super().check_action(action, parameters)

    def show_rows(self, rows: tuple[ExecutionRow, ...]) -> None:
        """Replace the rows, keeping the cursor on the same execution when it is still listed."""
        self._rows = tuple(rows)
        self._draw()

    def sort_by(self, order: RowOrder) -> None:
        """Put the page in `order` (the store's order when `order.key` is None)."""
        if order != self.order:
            self.order = order
            self._draw()
            self.post_message(self.SortChanged(order))

    def action_sort_next(self) -> None:
        """Sort by the column after the one sorted by now (the first after the default)."""
        keys = [column.key for column in EXECUTION_COLUMNS if column.key in self.shown_columns]
        if not keys:
            return
        after = keys.index(self.order.key) + 1 if self.order.key in keys else 0
        if after >= len(keys):
            self.sort_by(RowOrder())
        else:
            self.sort_by(RowOrder(keys[after], default_descending(keys[after])))

    def action_sort_reverse(self) -> None:
        """Reverse the order: of the column sorted by, or newest first to oldest first."""
        if self.order.key is None:
            self.sort_by(OLDEST_FIRST)
        else:
            self.sort_by(RowOrder(self.order.key, not self.order.descending))

    def on_resize(self) -> None:
        if self._rows:
            self._draw()

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = event.column_key.value
        if key == self.order.key:
            self.action_sort_reverse()
        elif key in COLUMNS_BY_KEY:
            self.sort_by(RowOrder(key, default_descending(key)))

    def _draw(self) -> None:
        kept = self.highlighted_key()
        rows = sort_rows(self._rows, self.order)
        widths = {
            column.key: max([len(column.header) + (2 if column.key == self.order.key else 0),
                             *(len(column.cell(row)) for row in rows)])
            for column in EXECUTION_COLUMNS
        }  # fmt: skip
        available = (self.size.width or self.app.size.width) - self.styles.scrollbar_size_vertical
        columns = fitting_columns(widths, available)
        used = sum(widths[column.key] + 2 for column in columns if column.key != "query")
        query_width = max(QUERY_MIN_WIDTH, available - used - 2)
        signature = (tuple(column.key for column in columns), self.order)
        if signature != self._header_signature:
            self.clear(columns=True)
            for column in columns:
                arrow = (" ↓" if self.order.descending else " ↑") if column.key == self.order.key \
                    else ""
                self.add_column(column.header + arrow, key=column.key)
            self._header_signature = signature
            self.shown_columns = signature[0]
        else:
            self.clear()
            # The columns are measured on these rows alone: DataTable only ever widens an
            # auto-width column, so a `● running ⚠2` gone by kept STATUS wide, and the query,
            # given the width left by `widths`, no longer fit.
            for column in self.columns.values():
                column.content_width = column.label.cell_len  # as `add_column` starts it
        for row in rows:
            self.add_row(*(self._styled(column, row, query_width) for column in columns),
                         key=row.execution_id)  # fmt: skip
        self.move_to_key(kept)
        self.refresh_bindings()

    @staticmethod
    def _styled(column: ExecutionColumn, row: ExecutionRow, query_width: int) -> Text | str:
        if column.key == "status":
            return Text.assemble(status_text(row.status),
                                 (badge(row.contract_warnings), _BADGE_STYLE))  # fmt: skip
        if column.key == "query":  # user text: a `[/INST]` in it is not Rich markup
            return Text(query_cell(row, query_width))
        text = column.cell(row)
        if column.numeric:
            return Text(text, justify="right")
        if column.key == "rule" and not row.last_failing_rule:
            return Text(text, style="dim")
        return text

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
        """Replace the rows with `steps`, the columns sized for them alone."""
        self.clear(columns=True)
        self.on_mount()
        for step in steps:
            capability = printable(f"{step.tool}.{step.capability}") if step.tool else "-"
            # validation_retries is TruvaG3's one shared counter: it already counts layer 4.
            corrections = step.validation_retries or 0
            # Text cells: a DataTable reads a plain str as markup, and ids are the user's text.
            self.add_row(
                Text(printable(step.step_id)),
                Text.assemble(status_text(step.status),
                              (badge(step_warning_count(step)), _BADGE_STYLE)),
                Text(capability),
                Text(str(step.dispatch_count or 0), justify="right"),
                Text(str(len(step.attempts)), justify="right"),
                Text(str(corrections), justify="right"),
                Text(printable(step.final_rule_id) or "-"),
                key=step.step_id,
            )
        self.measure_rows()
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
        """Replace the rows with `attempts`; the columns are sized for these rows alone (a
        DataTable's auto-width columns otherwise keep the widest cell of every earlier step)."""
        self.clear(columns=True)
        self.on_mount()
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
                Text(printable(attempt.rule_id) or "-"),
                Text(printable(attempt.decision_layer) or "-"),
                delay_text(attempt.delay_ms, attempt.delay_source),
                key=str(attempt.n),
            )
        self.measure_rows()
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
