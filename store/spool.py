"""The spool beside a store: fsynced Arrow segments awaiting ingest, and writer leases.

A segment is written under a `.tmp` name, fsynced, then renamed, so a reader sees either the
whole segment or nothing. A writer holds an exclusive `flock` on its lease file for as long as
it lives; the kernel drops the lock when the process dies, however it dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from store.connection import StorePaths

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".arrow"
TEMP_SUFFIX = ".tmp"
FAILED_SUFFIX = ".failed"
LEASE_SUFFIX = ".lease"


@dataclass(frozen=True, slots=True)
class WriterIdentity:
    """Who records: a random token per recorder, plus the process id and host for people."""

    token: str
    pid: int
    host: str

    @classmethod
    def for_this_process(cls) -> WriterIdentity:
        """A fresh identity for a recorder in this process."""
        return cls(token=uuid.uuid4().hex[:16], pid=os.getpid(), host=socket.gethostname())

    def to_metadata(self) -> dict[bytes, bytes]:
        """Arrow schema metadata naming the writer of a segment."""
        return {
            b"writer_token": self.token.encode(),
            b"writer_pid": str(self.pid).encode(),
            b"writer_host": self.host.encode(),
        }

    @classmethod
    def from_metadata(cls, metadata: dict[bytes, bytes] | None) -> WriterIdentity | None:
        """The writer recorded in a segment's schema metadata, if any."""
        if not metadata or b"writer_token" not in metadata:
            return None
        return cls(
            token=metadata[b"writer_token"].decode(),
            pid=int(metadata.get(b"writer_pid", b"0")),
            host=metadata.get(b"writer_host", b"").decode(),
        )


def segment_name(writer: WriterIdentity, segment_number: int) -> str:
    """`<token>-<number>.arrow`: names sort in write order within one writer."""
    return f"{writer.token}-{segment_number:010d}{SEGMENT_SUFFIX}"


def write_segment(paths: StorePaths, name: str, table: pa.Table) -> Path:
    """Write `table` as an Arrow IPC file under `name`, durably and atomically.

    On any failure (a full disk, say) the half-written file is deleted and the error raised.
    """
    paths.segments.mkdir(parents=True, exist_ok=True)
    final_path = paths.segments / name
    temp_path = paths.segments / (name + TEMP_SUFFIX)
    try:
        with temp_path.open("wb") as handle:
            with ipc.new_file(handle, table.schema) as writer:
                writer.write_table(table)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_path, final_path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp_path.unlink()
        raise
    try:
        _fsync_directory(paths.segments)
    except OSError as error:  # the segment is complete under its name; rewriting would repeat it
        log.warning("cannot fsync %s (%s)", paths.segments, error.strerror or error)
    return final_path


def read_segment(path: Path) -> pa.Table:
    """The table stored in a segment file."""
    with path.open("rb") as handle:
        return ipc.open_file(handle).read_all()


def ready_segments(paths: StorePaths) -> list[Path]:
    """Complete segments awaiting ingest, in name order (write order per writer)."""
    try:
        names = os.listdir(paths.segments)
    except FileNotFoundError:
        return []
    return [paths.segments / name for name in sorted(names) if name.endswith(SEGMENT_SUFFIX)]


def set_aside_segment(path: Path) -> Path:
    """Rename a segment that cannot be ingested to `*.failed`, keeping its bytes."""
    failed_path = path.with_name(path.name + FAILED_SUFFIX)
    os.replace(path, failed_path)
    return failed_path


def remove_files(paths: Iterable[Path]) -> list[Path]:
    """Delete files; return those now gone. One that cannot be deleted is logged and kept."""
    gone = []
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as error:
            log.warning("cannot delete %s (%s); it is kept", path, error.strerror or error)
            continue
        gone.append(path)
    return gone


def _fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class WriterLease:
    """An exclusive flock on `writers/<token>.lease`, held while the recorder lives."""

    def __init__(self, paths: StorePaths, writer: WriterIdentity) -> None:
        self.paths = paths
        self.writer = writer
        self.path = paths.writers / (writer.token + LEASE_SUFFIX)
        paths.writers.mkdir(parents=True, exist_ok=True)
        temp_path = self.path.with_name(self.path.name + TEMP_SUFFIX)
        # Locked before it appears under its final name, so no one sees it unlocked.
        self._handle = temp_path.open("w")
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._handle.write(json.dumps({"pid": writer.pid, "host": writer.host}))
        self._handle.flush()
        os.replace(temp_path, self.path)

    def release(self) -> None:
        """Remove the lease file and drop the lock."""
        if self._handle.closed:
            return
        remove_files([self.path])
        self._handle.close()


def dead_writers(paths: StorePaths, tokens: Iterable[str | None]) -> set[str | None]:
    """The writer tokens among `tokens` whose lease is gone or no longer locked."""
    return {token for token in tokens if token is None or not _lease_is_held(paths, token)}


def orphaned_leases(paths: StorePaths) -> list[str]:
    """Tokens of lease files in the spool that no living process holds."""
    try:
        names = os.listdir(paths.writers)
    except FileNotFoundError:
        return []
    tokens = [name[: -len(LEASE_SUFFIX)] for name in names if name.endswith(LEASE_SUFFIX)]
    return [token for token in tokens if not _lease_is_held(paths, token)]


def reap_writer(paths: StorePaths, token: str) -> None:
    """Delete a dead writer's lease and its half-written (never renamed) segments."""
    remove_files([paths.writers / (token + LEASE_SUFFIX)])
    try:
        names = os.listdir(paths.segments)
    except FileNotFoundError:
        return
    remove_files(
        paths.segments / name
        for name in names
        if name.startswith(token + "-") and name.endswith(TEMP_SUFFIX)
    )


def _lease_is_held(paths: StorePaths, token: str) -> bool:
    """Whether a living process holds the lease of writer `token`."""
    lease_path = paths.writers / (token + LEASE_SUFFIX)
    try:
        handle = lease_path.open("r")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False
