"""The SQL screen's headless parts: snippets parsed from a doc, the history file, row targets,
and store.sql's row limit and cancellation on an in-memory-sized store file."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.tui.sql_book import (
    HISTORY_LIMIT,
    Snippet,
    SqlHistory,
    history_path,
    parse_snippets,
)
from console.tui.widgets.sql_results import RowTarget, row_target
from store.sql import QueryCancel, SqlCancelled, SqlSession

DOC = """# Store

```sql
SELECT 'not in the section';
```

## Questions and their SQL

Run these with `truva-console sql`.

Which attempts were resent,
and by which rule?

```sql
SELECT rule_id
FROM attempts;
```

Token spend:

```sql
SELECT 1;
```

## Several processes

```sql
SELECT 'after the section';
```
"""

SNIPPET_CASES = [
    pytest.param(DOC, (Snippet("Which attempts were resent, and by which rule?",
                               "SELECT rule_id\nFROM attempts;"),
                       Snippet("Token spend", "SELECT 1;")), id="titled-by-the-paragraph-before"),
    pytest.param("# no such section\n```sql\nSELECT 1;\n```\n", (), id="no-section"),
    pytest.param("## Questions and their SQL\n```sql\nSELECT 2;\n```\n",
                 (Snippet("Example 1", "SELECT 2;"),), id="untitled-at-the-end-of-the-doc"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), SNIPPET_CASES)
def test_snippets(text: str, expected: tuple[Snippet, ...]) -> None:
    assert parse_snippets(text) == expected


HISTORY_PATH_CASES = [
    pytest.param({"XDG_STATE_HOME": "/state"}, Path("/state/truva-console/sql_history"),
                 id="xdg-state-home"),
    pytest.param({"XDG_STATE_HOME": ""}, Path.home() / ".local/state/truva-console/sql_history",
                 id="empty-means-default"),
    pytest.param({}, Path.home() / ".local/state/truva-console/sql_history", id="unset"),
]  # fmt: skip


@pytest.mark.parametrize(("environ", "expected"), HISTORY_PATH_CASES)
def test_history_path(environ: dict[str, str], expected: Path) -> None:
    assert history_path(environ) == expected


def test_history_appends_newest_first_and_skips_a_repeat(tmp_path: Path) -> None:
    history = SqlHistory(tmp_path / "state" / "sql_history")
    at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    history.add("SELECT 1", now=at)
    history.add("  SELECT 2\n", now=at)
    entries = history.add("SELECT 2", now=at)
    assert [entry.query for entry in entries] == ["SELECT 2", "SELECT 1"]
    assert entries[0].ran_at == "2026-12-01T12:00:00+00:00"
    assert SqlHistory(history.path).entries() == entries


def test_history_skips_lines_that_are_not_entries(tmp_path: Path) -> None:
    path = tmp_path / "sql_history"
    path.write_text('{"query": "SELECT 1"}\nnot json\n[1]\n{"query": 2}\n', encoding="utf-8")
    assert [entry.query for entry in SqlHistory(path).entries()] == ["SELECT 1"]


def test_history_is_cut_to_the_newest_entries_when_it_doubles(tmp_path: Path) -> None:
    path = tmp_path / "sql_history"
    path.write_text("".join(json.dumps({"query": f"SELECT {i}"}) + "\n"
                            for i in range(2 * HISTORY_LIMIT)))  # fmt: skip
    entries = SqlHistory(path).add("SELECT 'newest'")
    assert len(entries) == HISTORY_LIMIT
    assert len(path.read_text().splitlines()) == HISTORY_LIMIT
    assert entries[0].query == "SELECT 'newest'"
    assert entries[-1].query == f"SELECT {HISTORY_LIMIT + 1}"


def test_history_that_cannot_be_written_raises_oserror(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        SqlHistory(tmp_path / "file" / "sql_history").add("SELECT 1")


ROW_TARGET_CASES = [
    pytest.param(("execution_id", "step_id", "n"), ("e1", "step-2", 3),
                 RowTarget("e1", "step-2", 3), id="execution-step-attempt"),
    pytest.param(("execution_id",), ("e1",), RowTarget("e1", None, None), id="execution-only"),
    pytest.param(("execution_id", "n"), ("e1", 3), RowTarget("e1", None, None),
                 id="attempt-without-step-is-ignored"),
    pytest.param(("execution_id", "step_id", "n"), ("e1", "step-2", None),
                 RowTarget("e1", "step-2", None), id="null-attempt"),
    pytest.param(("execution_id",), (None,), None, id="null-execution"),
    pytest.param(("status", "count"), ("failed", 3), None, id="no-execution-column"),
    pytest.param(("execution_id", "step_id", "n"), ("e1", "step-2", True),
                 RowTarget("e1", "step-2", None), id="boolean-is-not-an-attempt"),
]  # fmt: skip


@pytest.mark.parametrize(("columns", "row", "expected"), ROW_TARGET_CASES)
def test_row_target(columns, row, expected) -> None:
    assert row_target(columns, row) == expected


@pytest.fixture
def store_db(tmp_path: Path) -> Path:
    from store.recorder import StoreRecorder

    db = tmp_path / "debug.duckdb"
    with StoreRecorder(db):
        pass
    return db


def test_a_limit_keeps_the_first_rows_and_counts_all(store_db: Path) -> None:
    result = SqlSession(store_db).run("SELECT range AS x FROM range(5000)", limit=1000)
    assert result is not None
    assert (len(result.rows), result.total_rows) == (1000, 5000)
    assert result.rows[0] == (0,) and result.rows[-1] == (999,)
    whole = SqlSession(store_db).run("SELECT range AS x FROM range(5000)")
    assert whole is not None and (len(whole.rows), whole.total_rows) == (5000, 5000)


def test_a_cancel_before_the_statement_starts_stops_it(store_db: Path) -> None:
    cancel = QueryCancel()
    cancel.cancel()
    with pytest.raises(SqlCancelled, match="cancelled"):
        SqlSession(store_db).run("SELECT 1", cancel=cancel)


def test_a_cancel_from_another_thread_interrupts_a_running_statement(store_db: Path) -> None:
    cancel = QueryCancel()

    def interrupt_when_started() -> None:
        # Right after the connection is attached, before DuckDB has started the statement:
        # the handle interrupts again until the statement has ended.
        cancel.started.wait()
        cancel.cancel()

    thread = threading.Thread(target=interrupt_when_started)
    thread.start()
    try:
        with pytest.raises(SqlCancelled):
            SqlSession(store_db).run("SELECT sum(range) FROM range(10000000000000)",
                                     cancel=cancel)  # fmt: skip
    finally:
        thread.join()


def test_the_progress_bar_is_off_so_nothing_is_drawn_on_stdout(store_db: Path) -> None:
    result = SqlSession(store_db).run("SELECT current_setting('enable_progress_bar') AS bar")
    assert result is not None and result.rows == ((False,),)


def test_write_csv_counts_the_rows_it_wrote(store_db: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    written = SqlSession(store_db).write_csv(
        "SELECT * FROM (VALUES (NULL), ('a'), (NULL), ('')) t(x)", target
    )
    assert written == 4
    assert target.read_text().splitlines() == ["x", "", "a", "", '""']
