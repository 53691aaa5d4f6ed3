"""`StoreRecorder`: the executor's recorder that writes every event into the debug store.

`record()` only appends to a list. A background thread flushes every `flush_interval_s`, when
`batch_size` events are waiting, and at every step and execution finish. A flush writes the
batch into the database in one transaction when it is time to (at most every
`db_interval_s`, so readers in other processes get their turn with the file) and the file is
free; otherwise into the spool as one fsynced segment that the next process to open the file
ingests.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from types import TracebackType
from typing import Any

import pyarrow as pa

from store.connection import (
    DEFAULT_LOCK_TIMEOUT_S,
    first_line,
    session,
    store_paths,
)
from store.errors import StoreBusyError, StoreOpenError
from store.ingest import apply_segments, encode_events, ingest_spool
from store.spool import WriterIdentity, WriterLease, segment_name, write_segment

log = logging.getLogger(__name__)

# Events after which the batch is flushed at once rather than at the next tick.
_FLUSH_NOW_KINDS = frozenset({"execution_finished"})


class StoreRecorder:
    """Records executor events into the store at `db_path`; never raises from `record()`.

    Creates the store (and its directory) when missing. Raises StoreOpenError at construction
    when the file is not a usable store, or one this process may not write; if another process
    holds the file, recording starts in the spool. Events must not be mutated after they are
    recorded. After `close()`, `unsaved_events` counts the events that could not be made
    durable and `last_error` says why.
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        *,
        batch_size: int = 200,
        flush_interval_s: float = 0.25,
        db_interval_s: float = 1.0,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    ) -> None:
        self.paths = store_paths(db_path)
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.db_interval_s = db_interval_s
        self.lock_timeout_s = lock_timeout_s
        self.writer = WriterIdentity.for_this_process()
        self.last_error: str | None = None
        self.dropped_events = 0
        self._pending: list[Any] = []
        self._pending_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._wake = threading.Event()
        self._unsaved: list[pa.Table] = []
        self._next_seq = 1
        self._next_segment = 1
        self._stopping = False
        self._closed = False
        self._last_db_attempt = float("-inf")
        try:
            with session(self.paths, create=True, lock_timeout_s=lock_timeout_s):
                pass
        except StoreBusyError:
            log.info("%s is busy; recording into the spool until it is free", self.paths.label)
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
        """Queue one event; cheap, and never raises into the executor."""
        try:
            if self._closed:
                self.dropped_events += 1
                return
            with self._pending_lock:
                self._pending.append(event)
                waiting = len(self._pending)
            if waiting >= self.batch_size or getattr(event, "kind", None) in _FLUSH_NOW_KINDS:
                self._wake.set()
        except Exception:  # the executor must not fail because recording did
            self.dropped_events += 1

    @property
    def unsaved_events(self) -> int:
        """Events recorded but not durable: waiting, failed to write, or recorded after close."""
        with self._pending_lock:
            waiting = len(self._pending)
        return waiting + sum(table.num_rows for table in self._unsaved) + self.dropped_events

    def flush(self) -> None:
        """Make every event recorded so far durable: in the database, or else in the spool."""
        self._flush(lock_timeout_s=0.0)

    def close(self) -> None:
        """Flush (waiting up to `lock_timeout_s` for the file), stop the thread, end the lease."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=max(self.lock_timeout_s * 2, 5.0))
        self._flush(lock_timeout_s=self.lock_timeout_s)
        self._lease.release()

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

    def _flush(self, *, lock_timeout_s: float) -> None:
        """Encode waiting events, then write them to the database or else the spool."""
        with self._flush_lock:
            try:
                with self._pending_lock:
                    events, self._pending = self._pending, []
                if events:
                    self._unsaved.append(encode_events(events, self._next_seq, self.writer))
                    self._next_seq += len(events)
                if not self._unsaved:
                    return
                self._write_unsaved(lock_timeout_s=lock_timeout_s)
            except Exception as error:  # keep recording; the batch stays queued for the next try
                self._note_error(_describe(error))

    def _write_unsaved(self, *, lock_timeout_s: float) -> None:
        now = time.monotonic()
        if self._closed or now - self._last_db_attempt >= self.db_interval_s:
            self._last_db_attempt = now
            try:
                with session(self.paths, create=True, lock_timeout_s=lock_timeout_s) as conn:
                    # Earlier segments first, so rows are written in event order.
                    ingest_spool(conn, self.paths)
                    apply_segments(conn, self._unsaved)
                self._unsaved.clear()
                return
            except StoreBusyError:
                pass
            except Exception as error:
                self._note_error(f"{_describe(error)} (spooling instead)")
        batch = pa.concat_tables(self._unsaved)
        write_segment(self.paths, segment_name(self.writer, self._next_segment), batch)
        self._next_segment += 1
        self._unsaved.clear()

    def _note_error(self, message: str) -> None:
        message = message.removeprefix(f"{self.paths.label}: ")
        if message != self.last_error:
            log.warning("recording to %s: %s", self.paths.label, message)
        self.last_error = message


def _describe(error: Exception) -> str:
    """One line naming what failed: the OS's reason for an OSError, else the first line."""
    if isinstance(error, OSError) and error.strerror:
        where = f" ({error.filename})" if error.filename else ""
        return f"{error.strerror}{where}"
    return first_line(error)
