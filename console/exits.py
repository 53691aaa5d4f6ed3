"""Exit codes, the one-line error, and Ctrl-C handling shared by every `truva-console` command."""

from __future__ import annotations

import sys
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
