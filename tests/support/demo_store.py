"""A debug store recorded from the real demo runs (loopback demo tools and the rule-based model)."""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb
import pytest

from console.demo import record_demo
from store.recorder import StoreRecorder


def record_demo_store(db: Path, *, fixed_ids: bool = False) -> Path:
    """Run every demo plan into `db`; with `fixed_ids` the execution ids are numbered in run order
    (`20261201-120000-demo000001`, …), so what a screen shows does not change between runs."""
    with pytest.MonkeyPatch.context() as patch:
        if fixed_ids:
            numbers = itertools.count(1)
            patch.setattr("executor.runtime.plan_executor.new_execution_id",
                          lambda now=None: f"20261201-120000-demo{next(numbers):06d}")  # fmt: skip
        recorder = StoreRecorder(db)
        try:
            record_demo(recorder)
        finally:
            recorder.close()
    return db


def execution_of(db: Path, plan: str) -> str:
    """The id of the execution of the demo plan `plan` (`scenario-d-misclassified-503`)."""
    with duckdb.connect(str(db), read_only=True) as conn:
        row = conn.execute(
            "SELECT execution_id FROM executions WHERE plan_path = ?", [f"demo:{plan}"]
        ).fetchone()
    assert row is not None, plan
    return row[0]
