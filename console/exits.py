"""Exit codes, the one-line error, and Ctrl-C handling shared by every `truva-console` command."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from console.printable import printable_line

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_CANCELLED = 130


# An error line past this many characters keeps its start and its end (what was refused, and
# "nothing was imported"): a bundle's manifest naming a 10 MB execution id made a 10 MB line.
ERROR_LINE_CHARS = 4_000
_ERROR_LINE_END_CHARS = 400


def fail(message: object, code: int = EXIT_BAD_INPUT) -> int:
    """Print `truva-console: MESSAGE` as one line on stderr and return the exit code."""
    print(f"truva-console: {error_line(printable_line(str(message)))}", file=sys.stderr)
    return code


def error_line(text: str) -> str:
    """`text`, or past ERROR_LINE_CHARS its start and end around a note of what was cut."""
    if len(text) <= ERROR_LINE_CHARS:
        return text
    head = ERROR_LINE_CHARS - _ERROR_LINE_END_CHARS
    cut = len(text) - head - _ERROR_LINE_END_CHARS
    return f"{text[:head]}…[{cut} characters cut]…{text[-_ERROR_LINE_END_CHARS:]}"


async def run_cancellable(runner: Any) -> Any:
    """`executor.cancellation.run_cancellable`: SIGINT and SIGTERM call `runner.cancel()`.

    Imported when called, so `executor` is first imported after the shadowed-package check.
    """
    from executor.cancellation import run_cancellable as run

    return await run(runner)


class Terminated(KeyboardInterrupt):
    """A SIGTERM, raised as a Ctrl-C is (`sigterm_as_ctrl_c`)."""


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While the block runs, SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so what the
    block cleans up on the way out (an import's temporary directory, an export's partial
    file) is cleaned up for `kill` too; the command then exits 130 like a Ctrl-C. Outside the
    main thread (where no handler can be set) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
