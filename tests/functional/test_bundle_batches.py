"""Export in batches of executions writes the bytes of an export of every row at once."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

import store.bundle.export as export
from store.bundle import BundleExportError, export_bundle, import_bundle
from store.bundle.format import SPANS_MEMBER
from tests.support.bundle_export import (  # noqa: F401 - the fixture is autouse
    fixed_time_and_resource,
    reads_without,
    recorded_store,
)
from tests.support.events_factory import START_AT, realistic_execution, small_execution


def _both_ways(db: Path, tmp_path: Path, monkeypatch) -> tuple[bytes, bytes, list]:
    """The bundle exported one execution a batch, and with every row at once."""
    batches: list = []
    original = export._execution_batches

    def recorded(conn, chosen):
        batches.append(original(conn, chosen))
        return batches[-1]

    with monkeypatch.context() as patch:
        patch.setattr(export, "_BATCH_WEIGHT", 1)
        patch.setattr(export, "_execution_batches", recorded)
        export_bundle(db, tmp_path / "batched.zip", None)
    with monkeypatch.context() as patch:
        patch.setattr(export, "_execution_batches", lambda conn, chosen: None)
        export_bundle(db, tmp_path / "whole.zip", None)
    return (tmp_path / "batched.zip").read_bytes(), (tmp_path / "whole.zip").read_bytes(), batches


def test_executions_at_the_same_instants_one_interrupted_give_the_same_bytes(tmp_path, monkeypatch):
    db = recorded_store(
        tmp_path,
        [
            realistic_execution("exec-b"),  # every event ties with exec-a's: ids break ties
            realistic_execution("exec-a"),
            realistic_execution("exec-c", start_at=START_AT + 0.3, finish=False),
            small_execution("exec-d", start_at=START_AT + 0.1),
            small_execution("exec-e", start_at=START_AT + 1e6),
        ],
    )
    batched, whole, batches = _both_ways(db, tmp_path, monkeypatch)
    assert batches == [[["exec-a"], ["exec-b"], ["exec-c"], ["exec-d"], ["exec-e"]]]
    assert batched == whole
    imported = import_bundle(tmp_path / "imported.duckdb", tmp_path / "batched.zip")
    assert sorted(imported.imported) == ["exec-a", "exec-b", "exec-c", "exec-d", "exec-e"]


def test_llm_calls_out_of_execution_order_are_exported_whole(tmp_path, monkeypatch):
    # "exec-a-b-llm-1" sorts before "exec-a-llm-1": the call ids disagree with the executions.
    db = recorded_store(tmp_path, [realistic_execution("exec-a"), realistic_execution("exec-a-b")])
    batched, whole, batches = _both_ways(db, tmp_path, monkeypatch)
    assert batches == [None]
    assert batched == whole


def test_spans_the_sdk_must_build_are_built_over_the_whole_selection(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "3")
    db = recorded_store(tmp_path, [realistic_execution("exec-a"), small_execution("exec-b")])
    batched, whole, _batches = _both_ways(db, tmp_path, monkeypatch)
    assert batched == whole
    with zipfile.ZipFile(tmp_path / "batched.zip") as archive:
        assert b'"droppedAttributesCount":' in archive.read(SPANS_MEMBER)  # the SDK's limit


def test_an_execution_removed_between_batches_refuses_the_export_and_leaves_nothing(
    tmp_path, monkeypatch
):
    db = recorded_store(tmp_path, [small_execution("exec-a"), small_execution("exec-b")])
    monkeypatch.setattr(export, "_BATCH_WEIGHT", 1)
    monkeypatch.setattr(export, "read_execution_rows",
                        reads_without(export.read_execution_rows, "exec-b"))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BundleExportError, match="exec-b was removed from the store"):
        export_bundle(db, out / "runs.zip", None)
    assert list(out.iterdir()) == []
