"""Errors raised by the debug store; each message is one line naming the file and the problem."""

from __future__ import annotations


class StoreError(Exception):
    """Base class for debug store errors; `str(error)` is a one-line message for the user."""


class StoreOpenError(StoreError):
    """The store file is missing, unreadable, not a DuckDB database, or of a newer schema."""


class StoreAccessError(StoreError):
    """Reading or writing an open store failed part-way: a damaged file, a full disk, no memory."""


class StoreBusyError(StoreError):
    """Another process held the store file for longer than the lock timeout.

    `holder` is the line naming the process that holds it, without advice (None when the wait
    in line ran out instead); `str(error)` adds what to do about it.
    """

    def __init__(self, message: str, *, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class ExecutionNotFoundError(StoreError):
    """No execution, or more than one, matches the requested id or prefix."""


class StepNotFoundError(StoreError):
    """The execution has no step with the requested id."""
