"""Reads of an execution made before its screen is: the one under the list's cursor, read
ahead so its screen opens with it, and the one being opened, read while its screen waits."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from store.queries import ExecutionDetail, ExecutionRow


@dataclass(frozen=True, slots=True)
class Prefetched:
    """A read of one execution made before its screen. `listed` is its row as the list shows
    it, which a read ahead must match to be shown (else it changed since); None for the read
    started as the execution is opened, shown as read."""

    future: Future[ExecutionDetail]
    listed: ExecutionRow | None

    def finished_within(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the read to end; whether it has."""
        return bool(wait((self.future,), timeout=timeout_s).done)

    def ready(self) -> ExecutionDetail | None:
        """The detail when the read has finished and still matches the list, else None."""
        if not self.future.done() or self.future.exception() is not None:
            return None
        return self._matching(self.future.result())

    def wait(self) -> ExecutionDetail | None:
        """Wait for the read: the detail, or None when a read ahead failed or does not match
        the list (the caller then reads the execution itself, and meets any error there). The
        read at open is as current as the caller's own: its error is raised."""
        try:
            detail = self.future.result()
        except Exception:
            if self.listed is None:
                raise
            return None
        return self._matching(detail)

    def _matching(self, detail: ExecutionDetail) -> ExecutionDetail | None:
        return detail if self.listed is None or detail.execution == self.listed else None


# A read to do: the row as listed when it was asked for, and the future its detail goes to.
_Job = tuple[ExecutionRow, Future[ExecutionDetail]]


class ExecutionPrefetch:
    """Reads the highlighted execution (`read(execution_id)`), one read at a time.

    `want(row)` asks for `row`'s execution; while a read runs, only the newest request waits
    for the next one (holding a key down through the list starts one read, not one per row). A
    running execution is not read ahead: its screen reads it and polls. `take` hands the read
    over to the screen that opens the execution; `read_at_open` reads one that has no read to
    hand over, in a thread of its own that does not need the event loop (the app waits for it).
    """

    def __init__(self, start: Callable[[Callable[[], None]], object],
                 read: Callable[[str], ExecutionDetail]) -> None:  # fmt: skip
        self._start = start
        self._read = read
        self._lock = threading.Lock()
        self._current: _Job | None = None
        self._next: ExecutionRow | None = None
        self._running = False
        self._at_open: ThreadPoolExecutor | None = None

    def read_at_open(self, execution_id: str) -> Prefetched:
        """Start reading `execution_id` now, shown as read (`listed` None)."""
        if self._at_open is None:
            self._at_open = ThreadPoolExecutor(max_workers=1, thread_name_prefix="open-read")
        return Prefetched(self._at_open.submit(self._read, execution_id), None)

    def want(self, row: ExecutionRow) -> None:
        """Read `row`'s execution next (unless it is running or is already being read)."""
        with self._lock:
            if row.status == "running" or (self._current is not None and self._current[0] == row):
                self._next = None
                return
            if self._running:
                self._next = row
                return
            self._running = True
            job: _Job = (row, Future())
            self._current = job
        self._start(lambda: self._run(job))

    def take(self, execution_id: str, listed: ExecutionRow | None) -> Prefetched | None:
        """The read of `execution_id`, finished or not, if it is of the row the list shows now
        (`listed`; None when the list does not show it: then nothing is handed over)."""
        with self._lock:
            current = self._current
            if current is None or listed is None or current[0].execution_id != execution_id:
                return None
            if current[0] != listed:
                return None
            self._current = None
            return Prefetched(current[1], listed)

    def _run(self, job: _Job) -> None:
        """The reads, `job` first, then the newest request after newest, until none is waiting
        (in a thread). Each job is its own: `take` may hand it over before the thread starts."""
        while True:
            row, future = job
            try:
                future.set_result(self._read(row.execution_id))
            except BaseException as error:  # handed to whoever opens the execution
                future.set_exception(error)
            with self._lock:
                if self._next is None:
                    self._running = False
                    return
                job = (self._next, Future())
                self._current, self._next = job, None
