"""Exit codes, the one-line error, and Ctrl-C handling shared by every `truva-console` command."""

from __future__ import annotations

import sys

from console.printable import printable_line
from executor.cancellation import Cancellable, run_cancellable

__all__ = ["EXIT_BAD_INPUT", "EXIT_CANCELLED", "EXIT_OK", "Cancellable", "fail", "run_cancellable"]

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_CANCELLED = 130


def fail(message: object, code: int = EXIT_BAD_INPUT) -> int:
    """Print `truva-console: MESSAGE` as one line on stderr and return the exit code."""
    print(f"truva-console: {printable_line(str(message))}", file=sys.stderr)
    return code
