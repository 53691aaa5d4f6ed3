"""Messages a screen posts to ask the app to show another screen (the app decides how)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from store.queries import ExecutionDetail


@dataclass
class ExecutionRequested(Message):
    """Show the execution `execution_id` (a palette entry, a finished re-run, a replay, a SQL
    result row), opened on `step_id` and its attempt `n` when they are given."""

    execution_id: str
    step_id: str | None = None
    n: int | None = None


@dataclass
class SqlRequested(Message):
    """Show the SQL screen."""


@dataclass
class ReplayRequested(Message):
    """Show the replay screen for `step_id` of the loaded execution `detail`."""

    detail: ExecutionDetail
    step_id: str
