"""Spans built in a child process (`store.bundle.span_worker`) give the bytes built here."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

import store.bundle.export as export
import store.bundle.span_worker as span_worker
from executor.events import Notice
from store.bundle import BundleExportError, export_bundle
from store.bundle.format import SPANS_MEMBER
from tests.support.bundle_export import (  # noqa: F401 - the fixture is autouse
    FIXED_RESOURCE,
    fixed_time_and_resource,
    reads_without,
    recorded_store,
)
from tests.support.events_factory import START_AT, realistic_execution, small_execution


class _Offers:
    """`SpanWorker.offer` counted: how many batches went to the child and how many not."""

    def __init__(self, monkeypatch, *, accept: bool | None = None) -> None:
        self.taken = self.declined = 0
        original = span_worker.SpanWorker.offer

        def offer(worker, rows):
            sent = original(worker, rows) if accept is not False else False
            if sent:
                self.taken += 1
            else:
                self.declined += 1
            return sent

        monkeypatch.setattr(span_worker.SpanWorker, "offer", offer)
        if accept:  # the child is never too far behind: it gets every batch
            monkeypatch.setattr(span_worker, "_OUTSTANDING_BATCHES", 10_000)


def _export(db: Path, target: Path, monkeypatch, *, worker: bool, whole: bool = False) -> bytes:
    with monkeypatch.context() as patch:
        patch.setattr(export, "_BATCH_WEIGHT", 1)  # one execution a batch
        if not worker:
            patch.setattr(export, "_SPAN_WORKER_BATCHES", 10_000)
        if whole:
            patch.setattr(export, "_execution_batches", lambda conn, chosen: None)
        export_bundle(db, target, None)
    return target.read_bytes()


def _executions() -> list[list]:
    return [
        realistic_execution("exec-b"),  # every event ties with exec-a's: ids break ties
        realistic_execution("exec-a"),
        realistic_execution("exec-c", start_at=START_AT + 0.3, finish=False),
        small_execution("exec-d", start_at=START_AT + 0.1),
        small_execution("exec-e", start_at=START_AT + 1e6),
    ]


def test_spans_built_by_the_child_give_the_bytes_built_in_process(tmp_path, monkeypatch):
    db = recorded_store(tmp_path, _executions())
    here = _export(db, tmp_path / "here.zip", monkeypatch, worker=False)
    whole = _export(db, tmp_path / "whole.zip", monkeypatch, worker=False, whole=True)
    offers = _Offers(monkeypatch, accept=True)
    child = _export(db, tmp_path / "child.zip", monkeypatch, worker=True)
    assert (offers.taken, offers.declined) == (5, 0)
    assert child == here == whole


def test_batches_the_child_declines_are_built_here_into_the_same_bytes(tmp_path, monkeypatch):
    db = recorded_store(tmp_path, _executions())
    here = _export(db, tmp_path / "here.zip", monkeypatch, worker=False)
    offers = _Offers(monkeypatch, accept=False)
    declined = _export(db, tmp_path / "declined.zip", monkeypatch, worker=True)
    assert (offers.taken, offers.declined) == (0, 5)
    assert declined == here


def _with_huge_notice(execution_id: str) -> list:
    """A small execution whose first step carries a notice with an integer beyond 64 bits,
    which only the SDK's OTLP encoder decides about (the direct encoder refuses it)."""
    events = small_execution(execution_id)
    at = next(i for i, event in enumerate(events) if event.kind == "step_started")
    notice = Notice(
        execution_id=execution_id,
        step_id="step-1",
        n=None,
        at=events[at].started_at + 0.001,
        name="test.note",
        message="a big number",
        attrs={"huge": 2**70},
    )
    return [*events[: at + 1], notice, *events[at + 1 :]]


def test_spans_the_child_cannot_build_are_built_by_the_sdk_over_the_whole_selection(
    tmp_path, monkeypatch
):
    db = recorded_store(tmp_path, [_with_huge_notice("exec-a"), _with_huge_notice("exec-b")])
    whole = _export(db, tmp_path / "whole.zip", monkeypatch, worker=False, whole=True)
    offers = _Offers(monkeypatch, accept=True)
    written: list[list[str]] = []
    original = export._write_whole

    def write_whole(store, output, chosen, **options):
        written.append(list(chosen))
        return original(store, output, chosen, **options)

    monkeypatch.setattr(export, "_write_whole", write_whole)
    child = _export(db, tmp_path / "child.zip", monkeypatch, worker=True)
    assert offers.taken >= 1
    assert written == [["exec-a", "exec-b"]]
    assert child == whole
    with zipfile.ZipFile(tmp_path / "child.zip") as archive:
        assert b'"name":"truva.test.note"' in archive.read(SPANS_MEMBER)


def test_a_child_that_fails_is_one_line_naming_the_bundle_and_its_error(tmp_path):
    taken: list = []
    worker = span_worker.SpanWorker(tmp_path / "out.zip", FIXED_RESOURCE, taken.extend)
    with worker:
        assert worker.offer({"executions": [{"no execution_id": 1}]})
        with pytest.raises(BundleExportError) as caught:
            worker.finish()
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'out.zip'}: the process building the spans failed: ")
    assert "KeyError" in message and "\n" not in message
    assert taken == []
    assert worker._process.returncode not in (0, None)


def test_an_error_keeping_the_lines_stops_the_child_and_is_raised(tmp_path):
    from store.bundle.format import read_execution_rows
    from store.queries import open_store

    store = open_store(recorded_store(tmp_path, [small_execution("exec-a")]))
    with store.session() as conn:
        rows = read_execution_rows(conn, ["exec-a"])

    def take(lines):
        raise BundleExportError(f"{tmp_path}: cannot write: No space left on device")

    worker = span_worker.SpanWorker(tmp_path / "out.zip", FIXED_RESOURCE, take)
    with worker:
        assert worker.offer(rows)
        with pytest.raises(BundleExportError, match="cannot write: No space left on device"):
            worker.finish()
    assert worker._process.returncode is not None


def test_a_failure_keeping_the_lines_here_is_not_blamed_on_the_child(tmp_path):
    # Was "the process building the spans failed: exit code -9" (found by review).
    from store.bundle.format import read_execution_rows
    from store.queries import open_store

    store = open_store(recorded_store(tmp_path, [small_execution("exec-a")]))
    with store.session() as conn:
        rows = read_execution_rows(conn, ["exec-a"])

    def take(lines):
        raise ValueError("write to closed file")

    worker = span_worker.SpanWorker(tmp_path / "out.zip", FIXED_RESOURCE, take)
    with worker:
        assert worker.offer(rows)
        with pytest.raises(BundleExportError) as caught:
            worker.finish()
    assert str(caught.value) == (
        f"{tmp_path / 'out.zip'}: keeping the spans failed: write to closed file"
    )
    assert isinstance(caught.value.__cause__, ValueError)


def test_an_interrupted_finish_still_ends_the_child(tmp_path, monkeypatch):
    # `finish` marked itself finished before it waited, so a Ctrl-C in the wait left the child
    # and the reader running after the `with` (found by review).
    taken: list = []
    worker = span_worker.SpanWorker(tmp_path / "out.zip", FIXED_RESOURCE, taken.extend)
    stop = worker._stop

    def interrupted_stop():
        monkeypatch.setattr(worker, "_stop", stop)  # the `with`'s own clean-up waits for real
        raise KeyboardInterrupt

    monkeypatch.setattr(worker, "_stop", interrupted_stop)
    with pytest.raises(KeyboardInterrupt), worker:
        worker.finish()
    assert worker._process.returncode is not None
    assert not worker._reader.is_alive() and not worker._writer.is_alive()


def test_an_export_refused_midway_ends_its_child_and_leaves_nothing(tmp_path, monkeypatch):
    db = recorded_store(tmp_path, [small_execution("exec-a"), small_execution("exec-b")])
    workers: list = []
    started = span_worker.SpanWorker.__init__

    def init(worker, *args, **kwargs):
        started(worker, *args, **kwargs)
        workers.append(worker)

    monkeypatch.setattr(span_worker.SpanWorker, "__init__", init)
    monkeypatch.setattr(export, "_BATCH_WEIGHT", 1)
    monkeypatch.setattr(export, "read_execution_rows",
                        reads_without(export.read_execution_rows, "exec-b"))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BundleExportError, match="exec-b was removed from the store"):
        export_bundle(db, out / "runs.zip", None)
    assert list(out.iterdir()) == []
    assert len(workers) == 1 and workers[0]._process.returncode is not None
