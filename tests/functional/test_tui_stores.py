"""The stores the TUI tests browse hold what those tests rely on."""

from __future__ import annotations

from pathlib import Path

from store.queries import open_store
from tests.support.tui import EXHAUSTED, SMALL, TRIP, RealStore, record_synthetic_store


def test_real_store_holds_the_three_stories(real_store: RealStore) -> None:
    store = open_store(real_store.db)
    page = store.list_executions(limit=10)
    assert [row.execution_id for row in page.executions] == [
        real_store.refused, real_store.corrected, real_store.rate_limited]  # fmt: skip
    rules = {
        execution_id: [
            attempt.rule_id
            for step in store.get_execution(execution_id).steps
            for attempt in step.attempts
        ]
        for execution_id in (real_store.rate_limited, real_store.corrected, real_store.refused)
    }
    assert rules == {
        real_store.rate_limited: ["transient.retry_same", "success.2xx"],
        real_store.corrected: ["analyzer.accept", "success.2xx"],
        real_store.refused: ["terminal.auth_or_method"],
    }
    assert "unknown city Tokio" in real_store.analyzer_prompt


def test_synthetic_store_has_fixed_ids(tmp_path: Path) -> None:
    store = open_store(record_synthetic_store(tmp_path / "debug.duckdb"))
    assert [row.execution_id for row in store.list_executions().executions] == [
        EXHAUSTED, SMALL, TRIP]  # fmt: skip
