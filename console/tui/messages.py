"""Messages a screen posts to ask the app to show another screen (the app decides how)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from store.queries import ExecutionDetail


@dataclass
class ExecutionRequested(Message):
    """Show the execution `execution_id` (a palette entry, a finished re-run, a replay)."""

    execution_id: str


@dataclass
class ReplayRequested(Message):
    """Show the replay screen for `step_id` of the loaded execution `detail`."""

    detail: ExecutionDetail
    step_id: str
