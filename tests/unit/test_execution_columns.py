"""The executions list's shared columns: which fit a terminal, `--sort` values, page sorting."""

from __future__ import annotations

import pytest

from console.render.execution_columns import (
    EXECUTION_COLUMNS,
    QUERY_MIN_WIDTH,
    RowOrder,
    fitting_columns,
    parse_sort,
    sort_rows,
)
from console.render.formats import ArgumentProblem
from store.queries import ExecutionRow

# Widest cell (or header) of each column on a page of sample executions.
SAMPLE_WIDTHS = {"execution": 26, "status": 9, "started": 20, "duration": 8, "steps": 12,
                 "attempts": 3, "llm": 3, "tokens": 6, "rule": 23, "query": 90}  # fmt: skip
EVERY = [column.key for column in EXECUTION_COLUMNS]

FITS = [
    ("wide_200_every_column", 200, EVERY),
    ("standard_120_drops_llm_tokens_started", 120,
     ["execution", "status", "duration", "steps", "attempts", "rule", "query"]),
    ("narrow_80_keeps_the_query", 80, ["execution", "status", "steps", "query"]),
    ("tiny_40_only_the_fixed_columns", 40, ["execution", "status", "query"]),
]  # fmt: skip


@pytest.mark.parametrize(("available", "expected"), [case[1:] for case in FITS],
                         ids=[case[0] for case in FITS])  # fmt: skip
def test_fitting_columns(available: int, expected: list[str]) -> None:
    shown = [column.key for column in fitting_columns(SAMPLE_WIDTHS, available)]
    assert shown == expected
    used = sum(SAMPLE_WIDTHS[key] + 2 for key in shown if key != "query")
    fixed_only = shown == ["execution", "status", "query"]
    assert fixed_only or used + QUERY_MIN_WIDTH + 2 <= available


SORTS = [
    ("tokens_defaults_to_largest_first", "tokens", RowOrder("tokens", True)),
    ("query_defaults_to_a_to_z", "query", RowOrder("query", False)),
    ("explicit_asc", "attempts:asc", RowOrder("attempts", False)),
    ("explicit_desc", "rule:desc", RowOrder("rule", True)),
]


@pytest.mark.parametrize(("text", "order"), [case[1:] for case in SORTS],
                         ids=[case[0] for case in SORTS])  # fmt: skip
def test_parse_sort(text: str, order: RowOrder) -> None:
    assert parse_sort(text) == order
    assert parse_sort(order.argument or "") == order


BAD_SORTS = [
    ("unknown_column", "cost", "--sort 'cost': expected a column (execution, status, started, "
     "duration, steps, attempts, llm, tokens, rule, query), optionally with :asc or :desc"),
    ("bad_direction", "tokens:down", "--sort 'tokens:down': expected :asc or :desc after the "
     "column"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), [case[1:] for case in BAD_SORTS],
                         ids=[case[0] for case in BAD_SORTS])  # fmt: skip
def test_parse_sort_refuses(text: str, message: str) -> None:
    with pytest.raises(ArgumentProblem) as raised:
        parse_sort(text)
    assert str(raised.value) == message


def _row(execution_id: str, tokens: int) -> ExecutionRow:
    return ExecutionRow(
        execution_id=execution_id, status="succeeded", started_at=0.0, finished_at=1.0,
        duration_ms=1000.0, query="q", plan_path=None, tool_version=None, stop_reason=None,
        incomplete_steps=(), steps_planned=1, steps_total=1, steps_succeeded=1, steps_failed=0,
        steps_rejected=0, steps_skipped=0, steps_unfinished=0, attempts=1, dispatches=1,
        llm_calls=0, llm_total_tokens=tokens, last_failing_rule=None, writer_pid=None,
        writer_host=None,
    )  # fmt: skip


def test_sort_rows_keeps_the_store_order_for_ties() -> None:
    rows = (_row("c", 5), _row("b", 9), _row("a", 5))
    assert [r.execution_id for r in sort_rows(rows, RowOrder("tokens", True))] == ["b", "c", "a"]
    assert [r.execution_id for r in sort_rows(rows, RowOrder("tokens", False))] == ["c", "a", "b"]
    assert sort_rows(rows, RowOrder()) == rows
