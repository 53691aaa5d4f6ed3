"""Turns with a store file: processes that want it wait in arrival order instead of racing.

DuckDB's file lock fails at once when it is held and never queues, so under contention whoever
retries at the right instant wins and a patient reader can starve. Before opening the file, a
process takes an exclusive `flock` on `<db>.spool/turn.lock`, holding it until it closes the
file. While it waits it holds a locked ticket in `<db>.spool/queue/`, named by its arrival time,
and it only tries the turn lock once no living ticket is older than its own. The kernel drops
the locks of a process that dies; its ticket file is then unlocked and is deleted by the next
process that finds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import time
import uuid
from pathlib import Path

TURN_LOCK_NAME = "turn.lock"
QUEUE_DIR_NAME = "queue"
_TICKET_SUFFIX = ".ticket"
_TEMP_SUFFIX = ".tmp"
_POLL_S = (0.001, 0.003)
# The holder's process id is written in this many bytes (a Linux pid has at most 7 digits).
_HOLDER_WIDTH = 20


class TurnTimeoutError(Exception):
    """No turn in time: `stalled` when one holder kept it too long, else the line was too long.

    `holder_pid` is the process holding the turn when the wait ended, if known.
    """

    def __init__(self, holder_pid: int | None, *, stalled: bool) -> None:
        super().__init__(f"turn held by process {holder_pid}")
        self.holder_pid = holder_pid
        self.stalled = stalled


class Turn:
    """This process's turn with the store file; `release()` hands it to the next in line."""

    def __init__(self, descriptor: int) -> None:
        self._descriptor: int | None = descriptor

    def release(self) -> None:
        """Drop the turn lock (closing the descriptor drops the flock)."""
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None


def take_turn(spool: Path, *, stall_timeout_s: float, deadline: float) -> Turn | None:
    """Wait in line for the store's turn lock; give up when the line stalls or at `deadline`.

    The line stalls when neither the process ahead nor the turn's holder moves on for
    `stall_timeout_s` seconds: a holder keeps the turn that long. `deadline` (a
    `time.monotonic()` value) bounds the whole wait. With no time to wait, the turn is taken
    only if it is free and nobody is in line. Returns None when the spool has no usable turn
    lock (a missing spool directory, or one this process may not create the lock file in), so
    the caller relies on DuckDB's lock alone. Raises TurnTimeoutError naming the holder.
    """
    descriptor = _open_lock_file(spool / TURN_LOCK_NAME)
    if descriptor is None:
        return None
    ticket = None
    try:
        ticket = _Ticket.enter(spool / QUEUE_DIR_NAME)
        ahead: str | None = ""
        stall_deadline = 0.0
        while True:
            now = time.monotonic()
            head = ticket.first_living_elder() if ticket is not None else None
            if head is None and _try_flock(descriptor):
                _note_holder(descriptor)
                return Turn(descriptor)
            if head != ahead:  # the line moved: the one ahead now has its own time
                ahead, stall_deadline = head, now + stall_timeout_s
            if now >= min(stall_deadline, deadline):
                stalled = stall_deadline <= deadline
                raise TurnTimeoutError(_holder_pid(descriptor), stalled=stalled)
            time.sleep(random.uniform(*_POLL_S))
    except BaseException:
        os.close(descriptor)
        raise
    finally:
        if ticket is not None:
            ticket.leave()


def _open_lock_file(path: Path) -> int | None:
    """A descriptor on `path`, created if missing; None when it cannot be had."""
    if not path.parent.is_dir():
        return None
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            return os.open(path, flags | os.O_CLOEXEC, 0o666)
        except OSError:
            continue
    return None


def _try_flock(descriptor: int) -> bool:
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _note_holder(descriptor: int) -> None:
    """Write this process id into the turn lock, so a waiter that times out can name it.

    Always `_HOLDER_WIDTH` bytes, space-padded, over what the last holder wrote: the file never
    needs truncating, which on ext4 can wait for the journal while another file is being
    written (up to 3.4 ms a turn of an export deflating its members, 43 ms once under a
    profiler; a pwrite in place takes microseconds).
    """
    with contextlib.suppress(OSError):
        os.pwrite(descriptor, str(os.getpid()).encode().ljust(_HOLDER_WIDTH), 0)


def _holder_pid(descriptor: int) -> int | None:
    try:
        text = os.pread(descriptor, _HOLDER_WIDTH, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class _Ticket:
    """A locked file in the queue directory whose name orders this process among the waiters."""

    def __init__(self, queue: Path, name: str, descriptor: int) -> None:
        self.queue = queue
        self.name = name
        self._descriptor = descriptor

    @classmethod
    def enter(cls, queue: Path) -> _Ticket | None:
        """Join the queue; None when the queue directory cannot be used (the caller just polls)."""
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}{_TICKET_SUFFIX}"
        temp_path = queue / (name + _TEMP_SUFFIX)
        try:
            queue.mkdir(exist_ok=True)
            descriptor = os.open(temp_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            # Locked before it appears under its ticket name, so no one takes it for a dead one.
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.replace(temp_path, queue / name)
        except OSError:
            os.close(descriptor)
            with contextlib.suppress(OSError):
                temp_path.unlink()
            return None
        return cls(queue, name, descriptor)

    def first_living_elder(self) -> str | None:
        """The ticket of the living process that joined the queue first, if before this one."""
        try:
            names = sorted(os.listdir(self.queue))
        except OSError:
            return None
        for name in names:
            if name >= self.name:
                return None
            if name.endswith(_TICKET_SUFFIX) and _is_held(self.queue / name):
                return name
        return None

    def leave(self) -> None:
        """Remove the ticket and drop its lock."""
        with contextlib.suppress(OSError):
            (self.queue / self.name).unlink()
        os.close(self._descriptor)


def _is_held(ticket: Path) -> bool:
    """Whether a living process holds `ticket`; a dead one's ticket is deleted."""
    try:
        descriptor = os.open(ticket, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not _try_flock(descriptor):
            return True
        with contextlib.suppress(OSError):
            ticket.unlink()
        return False
    finally:
        os.close(descriptor)
