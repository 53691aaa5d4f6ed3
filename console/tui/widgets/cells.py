"""Cell texts shared by the TUI tables: coloured statuses, HTTP outcomes, delays, CLI twins."""

from __future__ import annotations

import json
import shlex
from typing import Any

from rich.text import Text

from console.printable import printable
from console.render.formats import format_duration
from console.render.rich_views import STATUS_STYLES, action_text, status_text
from store.queries import AttemptRecord, ExecutionRow

__all__ = [
    "STATUS_STYLES",
    "action_text",
    "delay_text",
    "duration_text",
    "http_text",
    "inline_json",
    "status_text",
    "twin_command",
]

def http_text(attempt: AttemptRecord) -> Text:
    """What came back: the HTTP status, a transport error, `not sent` or `in flight`."""
    if not attempt.dispatched:
        return Text("not sent", style="dim")
    if attempt.transport_error:
        return Text(f"{attempt.transport_error} error", style="bold yellow")
    if attempt.responded_at is None or attempt.status is None:
        return Text("in flight", style="cyan")
    status = attempt.status
    if 200 <= status < 300:
        style = "green"
    elif status in (408, 429) or status >= 500:
        style = "yellow"
    else:
        style = "red"
    return Text(str(status), style=style)


def delay_text(delay_ms: float | None, source: str | None) -> str:
    """`1.0 s (retry_after_header)`, or `-` when no wait follows."""
    if delay_ms is None:
        return "-"
    return f"{format_duration(delay_ms)} ({source or '?'})"


def duration_text(row: ExecutionRow) -> str:
    """How long an execution took; `running` while it runs."""
    return "running" if row.status == "running" else format_duration(row.duration_ms)


def inline_json(value: Any) -> str:
    """A value as compact one-line JSON; strings as they are; control characters visible."""
    if isinstance(value, str):
        return printable(value)
    return printable(json.dumps(value, ensure_ascii=False))


# The `db_arg` of an app on the bundled samples: its twins say `--samples`, since the app's
# copy of the sample store is deleted when it exits (and `--samples` rebuilds the same ids).
SAMPLES_DB_ARG = "--samples"


def twin_command(db_arg: str | None, *args: str) -> str:
    """The headless `truva-console` command line that shows the same thing, shell-quoted."""
    if db_arg == SAMPLES_DB_ARG:
        return shlex.join(["truva-console", SAMPLES_DB_ARG, *args])
    prefix = ["truva-console"] + (["--db", db_arg] if db_arg else [])
    return shlex.join([*prefix, *args])
