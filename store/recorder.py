"""`StoreRecorder`: the executor's recorder that writes every event into the debug store.

`record()` appends the event to a list; an execution start or a dispatch (with the step start
queued before it) is also written at once to this recorder's journal in the spool (one
`write`, no fsync), so a request never leaves before its record does. A background thread
flushes every `flush_interval_s`, when `batch_size` events are waiting, and at every execution
finish: it appends what is waiting to the journal, fsyncs it and renames it to a segment,
then, when it is time to and the file is free, ingests the spool into the database. It is
time at the first flush, then 2 × `db_interval_s` later, the wait doubling after each ingest
up to `DB_INTERVAL_GROWTH` × `db_interval_s`: each of the recorder's database sessions costs
an open, a schema check and a checkpoint (~0.1 s), so a long run pays a few of them rather
than one a second, and readers in other processes get their turn with the file (they ingest
the spool themselves when they open it, so what they see does not wait for the recorder).
`close()` waits for its turn with the file, as readers do, and ingests what it wrote.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from types import TracebackType
from typing import Any

from executor.policy.conditions import counted
from store.connection import (
    DEFAULT_LOCK_TIMEOUT_S,
    first_line,
    session,
    store_paths,
)
from store.errors import StoreBusyError, StoreOpenError
from store.ingest import SegmentRecord, encode_records, ingest_spool
from store.spool import (
    Journal,
    WriterIdentity,
    WriterLease,
    ensure_spool_directories,
    journal_name,
    writer_segments,
)

log = logging.getLogger(__name__)

# Events after which the batch is flushed at once rather than at the next tick.
_FLUSH_NOW_KINDS = frozenset({"execution_finished"})
# Events written to the journal before `record()` returns: what happens next leaves the process.
# A step start is not among them: the step's dispatch, which must follow it before any request
# leaves, carries it in the same frame (one encode and one `write` per step, not two).
_JOURNAL_NOW_KINDS = frozenset({"execution_started", "attempt_dispatched"})
DEFAULT_MAX_UNSAVED_BYTES = 64 * 1024 * 1024
# The recorder's wait between its own database ingests doubles up to this many db_interval_s.
DB_INTERVAL_GROWTH = 8


class StoreRecorder:
    """Records executor events into the store at `db_path`; never raises from `record()`.

    Creates the store (and its directory) when missing. Raises StoreOpenError at construction
    when the file is not a usable store, or one this process may not write; if another process
    holds the file, recording starts in the spool. Events must not be mutated after they are
    recorded. Events the spool refuses (a full disk) are kept in memory, up to
    `max_unsaved_bytes` encoded, and retried at every flush. After `close()`,
    `unsaved_events` counts the events that could not be made durable and `last_error` says
    why; `spooled_segments` counts the segments left in the spool because the file stayed held.
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        *,
        batch_size: int = 200,
        flush_interval_s: float = 0.25,
        db_interval_s: float = 1.0,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
        max_unsaved_bytes: int = DEFAULT_MAX_UNSAVED_BYTES,
    ) -> None:
        self.paths = store_paths(db_path)
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.db_interval_s = db_interval_s
        self.lock_timeout_s = lock_timeout_s
        self.max_unsaved_bytes = max_unsaved_bytes
        self.writer = WriterIdentity.for_this_process()
        self.last_error: str | None = None
        self.dropped_events = 0
        self.recorded_events = 0
        self.spooled_segments = 0
        self._pending: list[Any] = []
        self._pending_lock = threading.Lock()
        self._journal_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._wake = threading.Event()
        self._unsaved: list[SegmentRecord] = []
        self._unsaved_bytes = 0
        self._journal: Journal | None = None
        self._next_seq = 1
        self._next_segment = 1
        self._stopping = False
        self._closed = False
        self._last_db_attempt = float("-inf")
        self._db_wait_s = db_interval_s
        self._ingest_problem: str | None = None
        try:
            with session(self.paths, create=True, lock_timeout_s=lock_timeout_s):
                pass
        except StoreBusyError:
            log.info("%s is busy; recording into the spool until it is free", self.paths.label)
        try:
            # Every directory the journal and segments go to, before anything is sent: a
            # run whose recording could not be written would make its tool calls unrecorded.
            ensure_spool_directories(self.paths)
        except OSError as error:
            where = error.filename or self.paths.spool
            raise StoreOpenError(
                f"{self.paths.label}: cannot use its spool: {where}: {error.strerror or error}"
            ) from error
        try:
            self._lease = WriterLease(self.paths, self.writer)
        except OSError as error:
            raise StoreOpenError(
                f"{self.paths.label}: cannot create the spool beside it: {error}"
            ) from error
        self._thread = threading.Thread(target=self._run, name="store-recorder", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def record(self, event: Any) -> None:
        """Queue one event; cheap, and never raises into the executor.

        An execution start or a dispatch is appended to the journal before this returns, with
        every event queued before it (the step's start among them).
        """
        try:
            if self._closed:
                self.dropped_events += 1
                return
            kind = getattr(event, "kind", None)
            with self._pending_lock:
                self._pending.append(event)
                self.recorded_events += 1
                waiting = len(self._pending)
            if kind in _JOURNAL_NOW_KINDS:
                self._append_waiting()
            elif waiting >= self.batch_size or kind in _FLUSH_NOW_KINDS:
                self._wake.set()
        except Exception:  # the executor must not fail because recording did
            self.dropped_events += 1

    @property
    def unsaved_events(self) -> int:
        """Events recorded but not durable: waiting, refused by the disk, or dropped."""
        with self._pending_lock:
            waiting = len(self._pending)
        return waiting + len(self._unsaved) + self.dropped_events

    def flush(self) -> None:
        """Make every event recorded so far durable in the spool, and ingest it if it is time."""
        self._flush(lock_timeout_s=0.0)

    def close(self) -> None:
        """Flush, ingest the spool (waiting for the file as readers do), end the lease."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=max(self.lock_timeout_s * 2, 5.0))
        self._flush(lock_timeout_s=self.lock_timeout_s)
        with self._journal_lock:
            if self._journal is not None:  # its seal failed: a reader seals it once we are gone
                self._journal.close()
                self._journal = None
        self.spooled_segments = len(writer_segments(self.paths, self.writer))
        self._lease.release()

    def exit_notice(self) -> str | None:
        """One line for stderr after `close()` when not everything recorded is in the database."""
        label = self.paths.label
        if self.unsaved_events:
            return (
                f"recording to {label} failed: {self.last_error}; {self.unsaved_events} of "
                f"{self.recorded_events + self.dropped_events} events not saved (free space "
                "where the store is, or pass another --db, and run it again)"
            )
        if self.spooled_segments:
            why = self._ingest_problem or "the file stayed held by another process"
            lead = why if label in why else f"{label}: {why}"
            return (
                f"{lead}; {counted(self.spooled_segments, 'recorded segment')} "
                f"{'waits' if self.spooled_segments == 1 else 'wait'} in "
                f"{self.paths.segments} (run 'truva-console ls --db {label}' to ingest them)"
            )
        return None

    def __enter__(self) -> StoreRecorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            if self._stopping:
                return
            self._flush(lock_timeout_s=0.0)

    def _append_waiting(self, *, seal: bool = False) -> None:
        """Encode waiting events and append them, with any kept back, to the journal.

        With `seal`, the journal is then fsynced and renamed to a segment, outside the journal
        lock: a dispatch on the event loop appends to a new journal meanwhile instead of waiting
        for the fsync. A refused write (a full disk) keeps the encoded events in memory, within
        `max_unsaved_bytes`.
        """
        sealing: Journal | None = None
        with self._journal_lock:
            with self._pending_lock:
                events, self._pending = self._pending, []
            if events:
                records = encode_records(events, self._next_seq)
                self._next_seq += len(events)
                size = sum(_record_bytes(record) for record in records)
                if self._unsaved and self._unsaved_bytes + size > self.max_unsaved_bytes:
                    self.dropped_events += len(records)
                else:
                    self._unsaved.extend(records)
                    self._unsaved_bytes += size
            try:
                if self._unsaved:
                    if self._journal is None:
                        self._journal = Journal(
                            self.paths, journal_name(self.writer, self._next_segment), self.writer
                        )
                        self._next_segment += 1
                    self._journal.append(self._unsaved)
                    self._unsaved = []
                    self._unsaved_bytes = 0
                if seal:
                    sealing, self._journal = self._journal, None
            except OSError as error:
                self._note_error(_describe(error))
        if sealing is None:
            return
        try:  # only the flushing thread (under _flush_lock) seals, one journal at a time
            if sealing.has_frames:
                sealing.seal()
            else:
                sealing.discard()
        except OSError as error:
            self._note_error(_describe(error))

    def _flush(self, *, lock_timeout_s: float) -> None:
        """Make waiting events durable in the spool, then ingest the spool when it is time."""
        with self._flush_lock:
            try:
                self._append_waiting(seal=True)
                now = time.monotonic()
                if not self._closed and now - self._last_db_attempt < self._db_wait_s:
                    return
                if not writer_segments(self.paths, self.writer):
                    return
                if not self._closed:
                    self._db_wait_s = min(
                        self._db_wait_s * 2, self.db_interval_s * DB_INTERVAL_GROWTH
                    )
                self._last_db_attempt = now
                self._ingest_problem = None
                with session(self.paths, create=True, lock_timeout_s=lock_timeout_s) as conn:
                    ingest_spool(conn, self.paths)
            except StoreBusyError as error:
                self._ingest_problem = first_line(error).removeprefix(f"{self.paths.label}: ")
            except Exception as error:  # keep recording; the events stay in the spool
                self._ingest_problem = _describe(error).removeprefix(f"{self.paths.label}: ")
                self._note_error(self._ingest_problem)

    def _note_error(self, message: str) -> None:
        message = message.removeprefix(f"{self.paths.label}: ")
        if message != self.last_error:
            log.debug("recording to %s: %s", self.paths.label, message)
        self.last_error = message


def _record_bytes(record: SegmentRecord) -> int:
    _, kind, execution_id, payload, request_body, response_body = record
    return (
        64 + len(kind) + len(execution_id or "") + len(payload or "")
        + len(request_body or b"") + len(response_body or b"")
    )


def _describe(error: Exception) -> str:
    """One line naming what failed: the OS's reason for an OSError, else the first line."""
    if isinstance(error, OSError) and error.strerror:
        where = f" ({error.filename})" if error.filename else ""
        return f"{error.strerror}{where}"
    return first_line(error)
