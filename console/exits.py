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


def fail(message: object, code: int = EXIT_BAD_INPUT) -> int:
    """Print `truva-console: MESSAGE` as one line on stderr and return the exit code."""
    print(f"truva-console: {printable_line(str(message))}", file=sys.stderr)
    return code


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
