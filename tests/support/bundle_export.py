"""What byte-for-byte export tests share: a fixed creation time and resource, and a store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource

import store.bundle.export as export
import store.bundle.spans as spans
from store.recorder import StoreRecorder

FIXED_RESOURCE = Resource.create({"service.name": "truva-console", "service.version": "t"})
CREATED_AT = "2026-01-02T03:04:05.000006Z"


@pytest.fixture(autouse=True)
def fixed_time_and_resource(monkeypatch):
    """Every export of a test gets the same creation time and resource (its instance id)."""
    monkeypatch.setattr(export, "_utc_now_text", lambda: CREATED_AT)
    monkeypatch.setattr(export, "default_resource", lambda: FIXED_RESOURCE)
    monkeypatch.setattr(spans, "default_resource", lambda: FIXED_RESOURCE)


def recorded_store(tmp_path: Path, executions: list[list]) -> Path:
    """A store at tmp_path/source.duckdb holding `executions`' events."""
    db = tmp_path / "source.duckdb"
    with StoreRecorder(db) as recorder:
        for events in executions:
            for event in events:
                recorder.record(event)
    return db


def reads_without(read: Callable[..., dict[str, Any]], execution_id: str) -> Callable[..., Any]:
    """`read_execution_rows` as if `execution_id` were removed from the store meanwhile."""

    def removed(conn: Any, ids: Any) -> dict[str, Any]:
        rows = read(conn, ids)
        rows["executions"] = [r for r in rows["executions"] if r["execution_id"] != execution_id]
        return rows

    return removed
