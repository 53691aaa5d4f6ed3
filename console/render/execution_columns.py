"""The columns of the executions list, shared by `truva-console ls` and the TUI's list screen:
headers, cell texts, sorting within a page, and which columns a narrow terminal drops first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from console.printable import printable
from console.render.formats import (
    ArgumentProblem,
    format_duration,
    format_time,
    labels_marker,
    lineage_marker,
)
from console.render.warnings import badge
from store.queries import ExecutionRow

# Rows per page of the list screen and of `ls`, so the twin lists the same rows.
DEFAULT_PAGE_SIZE = 200
# The narrowest the TUI lets the query column get before it drops other columns.
QUERY_MIN_WIDTH = 24


def steps_cell(row: ExecutionRow) -> str:
    """Steps `ok/failed/skipped` (`2/1/0`); rejected steps count as failed."""
    return f"{row.steps_succeeded}/{row.steps_failed + row.steps_rejected}/{row.steps_skipped}"


def query_markers(row: ExecutionRow) -> str:
    """What the query cell shows before the query: the lineage (`↻ rerun of <id>`,
    `↻ replay of <id> <step>`), then the labels."""
    return lineage_marker(row.rerun_of, row.plan_path) + labels_marker(row.labels)


def query_cell(row: ExecutionRow, width: int | None) -> str:
    """The query on one line, after its `query_markers`, cut to `width` with `…`."""
    flat = query_markers(row) + " ".join(printable(row.query).split())
    if width is None or len(flat) <= width:
        return flat
    return flat[: max(width - 1, 0)] + "…"


@dataclass(frozen=True, slots=True)
class ExecutionColumn:
    """One column: its `key` (as `--sort` takes it), header, cell text and sort value.

    `numeric` columns are right-aligned and sort largest first; `drop_order` says which columns
    a narrow terminal hides first (higher first; None: never hidden).
    """

    key: str
    header: str
    cell: Callable[[ExecutionRow], str]
    sort_value: Callable[[ExecutionRow], Any]
    numeric: bool = False
    drop_order: int | None = None


def duration_cell(row: ExecutionRow) -> str:
    """How long the execution took; `running` while it runs."""
    return "running" if row.status == "running" else format_duration(row.duration_ms)


def _or_dash(value: str | None) -> str:
    return printable(value) if value else "-"


EXECUTION_COLUMNS: tuple[ExecutionColumn, ...] = (
    ExecutionColumn("execution", "EXECUTION", lambda r: printable(r.execution_id),
                    lambda r: r.execution_id),
    ExecutionColumn("status", "STATUS", lambda r: r.status + badge(r.contract_warnings),
                    lambda r: r.status),
    ExecutionColumn("started", "STARTED (UTC)", lambda r: format_time(r.started_at),
                    lambda r: r.started_at or 0.0, numeric=True, drop_order=5),
    ExecutionColumn("duration", "DURATION", duration_cell, lambda r: r.duration_ms or 0.0,
                    numeric=True, drop_order=6),
    ExecutionColumn("steps", "OK/FAIL/SKIP", steps_cell,
                    lambda r: (r.steps_failed + r.steps_rejected, r.steps_skipped),
                    drop_order=3),
    ExecutionColumn("attempts", "ATT", lambda r: str(r.attempts), lambda r: r.attempts,
                    numeric=True, drop_order=4),
    ExecutionColumn("llm", "LLM", lambda r: str(r.llm_calls), lambda r: r.llm_calls,
                    numeric=True, drop_order=7),
    ExecutionColumn("tokens", "TOKENS", lambda r: str(r.llm_total_tokens),
                    lambda r: r.llm_total_tokens, numeric=True, drop_order=8),
    ExecutionColumn("rule", "LAST FAILING RULE", lambda r: _or_dash(r.last_failing_rule),
                    lambda r: r.last_failing_rule or "", drop_order=2),
    ExecutionColumn("query", "QUERY", lambda r: query_cell(r, None), lambda r: r.query or ""),
)  # fmt: skip
COLUMNS_BY_KEY = {column.key: column for column in EXECUTION_COLUMNS}


@dataclass(frozen=True, slots=True)
class RowOrder:
    """How a page is ordered: None is the store's order (newest first), else a column key."""

    key: str | None = None
    descending: bool = False

    @property
    def argument(self) -> str | None:
        """The `--sort` value that asks for this order (`tokens:desc`), None for the default."""
        if self.key is None:
            return None
        return f"{self.key}:{'desc' if self.descending else 'asc'}"

    def label(self) -> str:
        """`TOKENS ↓` for the status line."""
        if self.key is None:
            return "newest first"
        return f"{COLUMNS_BY_KEY[self.key].header} {'↓' if self.descending else '↑'}"


# The default order (newest first) reversed, as `ls --sort started:asc` lists it.
OLDEST_FIRST = RowOrder("started", descending=False)


def default_descending(key: str) -> bool:
    """A first sort on a column: numbers and times largest first, text A to Z."""
    return COLUMNS_BY_KEY[key].numeric


def parse_sort(text: str) -> RowOrder:
    """`--sort KEY[:asc|:desc]`; ArgumentProblem naming the value and the choices."""
    key, _, direction = text.strip().partition(":")
    if key not in COLUMNS_BY_KEY:
        raise ArgumentProblem(
            f"--sort {text!r}: expected a column ({', '.join(COLUMNS_BY_KEY)}), "
            "optionally with :asc or :desc"
        )
    if direction not in ("", "asc", "desc"):
        raise ArgumentProblem(f"--sort {text!r}: expected :asc or :desc after the column")
    return RowOrder(key, default_descending(key) if not direction else direction == "desc")


def sort_rows(rows: Sequence[ExecutionRow], order: RowOrder) -> tuple[ExecutionRow, ...]:
    """The rows of one page in `order`; ties keep the store's order (newest first)."""
    if order.key is None:
        return tuple(rows)
    value = COLUMNS_BY_KEY[order.key].sort_value
    return tuple(sorted(rows, key=value, reverse=order.descending))


def fitting_columns(
    widths: dict[str, int], available: int, *, padding: int = 2
) -> tuple[ExecutionColumn, ...]:
    """The columns to show in `available` cells: every one when they fit with the query at
    QUERY_MIN_WIDTH, else without the columns of highest `drop_order` first.

    `widths` is each column's widest cell or header; `padding` the cells around each column.
    """
    shown = list(EXECUTION_COLUMNS)

    def needed() -> int:
        return sum(
            (QUERY_MIN_WIDTH if column.key == "query" else widths.get(column.key, 0)) + padding
            for column in shown
        )

    droppable = sorted((c for c in shown if c.drop_order is not None),
                       key=lambda c: c.drop_order or 0, reverse=True)  # fmt: skip
    dropped = []
    while needed() > available and droppable:
        dropped.append(droppable.pop(0))
        shown.remove(dropped[-1])
    for column in reversed(dropped):  # most important first: a narrow one may still fit
        shown.append(column)
        if needed() > available:
            shown.remove(column)
    return tuple(column for column in EXECUTION_COLUMNS if column in shown)
