"""Reads of an execution before its screen (console/tui/prefetch.py): the read-ahead of the one
under the list's cursor, and the read at open."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from console.tui.prefetch import ExecutionPrefetch


@dataclass(frozen=True)
class Row:
    """Stands for an `ExecutionRow`: the prefetch reads only its id, status and equality."""

    execution_id: str
    status: str = "succeeded"
    attempts: int = 1


@dataclass(frozen=True)
class Detail:
    """Stands for an `ExecutionDetail`: its `execution` is the row as read."""

    execution: Row


def run_now(job: Callable[[], None]) -> None:
    job()


def prefetch_of(rows: dict[str, Row], read_ids: list[str]) -> ExecutionPrefetch:
    def read(execution_id: str) -> Any:
        read_ids.append(execution_id)
        return Detail(rows[execution_id])

    return ExecutionPrefetch(run_now, read)


def test_a_finished_read_is_handed_over_once() -> None:
    row, reads = Row("e1"), []
    prefetch = prefetch_of({"e1": row}, reads)
    prefetch.want(row)
    prefetch.want(row)  # the same row again: not read twice
    taken = prefetch.take("e1", row)
    assert taken is not None and taken.ready() == Detail(row) and taken.wait() == Detail(row)
    assert prefetch.take("e1", row) is None
    assert reads == ["e1"]


@pytest.mark.parametrize(
    ("asked", "listed"),
    [
        pytest.param("e2", Row("e2"), id="another-execution-opened"),
        pytest.param("e1", None, id="not-on-the-list"),
        pytest.param("e1", Row("e1", attempts=2), id="list-shows-a-changed-row"),
    ],
)
def test_nothing_is_handed_over_for_another_row(asked: str, listed: Row | None) -> None:
    prefetch = prefetch_of({"e1": Row("e1")}, [])
    prefetch.want(Row("e1"))
    assert prefetch.take(asked, listed) is None


def test_a_read_that_does_not_match_the_list_is_not_shown() -> None:
    # The execution changed between the list's read and the prefetch's: the screen reads it.
    listed = Row("e1")
    prefetch = prefetch_of({"e1": replace(listed, attempts=3)}, [])
    prefetch.want(listed)
    taken = prefetch.take("e1", listed)
    assert taken is not None and taken.ready() is None and taken.wait() is None


def test_a_failed_read_is_not_shown() -> None:
    def read(execution_id: str) -> Any:
        raise OSError("store unreadable")

    prefetch = ExecutionPrefetch(run_now, read)
    prefetch.want(Row("e1"))
    taken = prefetch.take("e1", Row("e1"))
    assert taken is not None and taken.ready() is None and taken.wait() is None


def test_a_running_execution_is_not_read_ahead() -> None:
    reads: list[str] = []
    running = Row("e1", status="running")
    prefetch = prefetch_of({"e1": running}, reads)
    prefetch.want(running)
    assert reads == [] and prefetch.take("e1", running) is None


def test_while_a_read_runs_only_the_newest_request_is_read_next() -> None:
    rows = {name: Row(name) for name in ("e1", "e2", "e3")}
    reads: list[str] = []
    release = threading.Event()
    finished = threading.Event()

    def read(execution_id: str) -> Any:
        reads.append(execution_id)
        if execution_id == "e1":
            release.wait(5)
        return Detail(rows[execution_id])

    def start(job: Callable[[], None]) -> None:
        def run() -> None:
            job()
            finished.set()

        threading.Thread(target=run).start()

    prefetch = ExecutionPrefetch(start, read)
    prefetch.want(rows["e1"])
    prefetch.want(rows["e2"])
    prefetch.want(rows["e3"])
    running = prefetch.take("e3", rows["e3"])
    assert running is None  # not started yet: e1 is being read
    release.set()
    assert finished.wait(5)
    assert reads == ["e1", "e3"]
    taken = prefetch.take("e3", rows["e3"])
    assert taken is not None and taken.ready() == Detail(rows["e3"])


def test_a_read_still_running_is_handed_over_to_wait_for() -> None:
    row = Row("e1")
    release = threading.Event()

    def read(execution_id: str) -> Any:
        release.wait(5)
        return Detail(row)

    prefetch = ExecutionPrefetch(lambda job: threading.Thread(target=job).start(), read)
    prefetch.want(row)
    taken = prefetch.take("e1", row)
    assert taken is not None and taken.ready() is None
    release.set()
    assert taken.wait() == Detail(row)


def test_a_read_taken_before_its_thread_starts_still_finishes() -> None:
    # The app starts the read in a worker thread later: Enter may open the execution first.
    row, reads, started = Row("e1"), [], []
    prefetch = ExecutionPrefetch(started.append, lambda execution_id: (
        reads.append(execution_id), Detail(row))[1])  # fmt: skip
    prefetch.want(row)
    taken = prefetch.take("e1", row)
    assert taken is not None and taken.ready() is None
    started.pop()()  # the worker thread runs now
    assert taken.wait() == Detail(row) and reads == ["e1"]
    prefetch.want(Row("e2"))  # and the read-ahead goes on working
    assert len(started) == 1


def test_a_read_at_open_is_shown_as_read_even_off_the_list() -> None:
    row, reads = Row("e1", status="running"), []
    prefetch = prefetch_of({"e1": row}, reads)
    opened = prefetch.read_at_open("e1")  # a running one too: its screen polls after
    assert opened.finished_within(10.0)
    assert opened.listed is None and opened.ready() == Detail(row) == opened.wait()
    assert reads == ["e1"]


def test_a_read_at_open_that_failed_raises_its_error_to_whoever_waits() -> None:
    def read(execution_id: str) -> Any:
        raise OSError(f"{execution_id}: held")

    opened = ExecutionPrefetch(run_now, read).read_at_open("e1")
    assert opened.finished_within(10.0)
    assert opened.ready() is None
    with pytest.raises(OSError, match="e1: held"):
        opened.wait()


def test_a_read_at_open_not_back_in_time_is_still_running() -> None:
    gate = threading.Event()

    def read(execution_id: str) -> Any:
        assert gate.wait(timeout=10)
        return Detail(Row(execution_id))

    opened = ExecutionPrefetch(run_now, read).read_at_open("e1")
    waited = opened.finished_within(0.01)
    ready_before = opened.ready()
    gate.set()
    assert (waited, ready_before) == (False, None)
    assert opened.wait() == Detail(Row("e1"))
