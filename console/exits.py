"""Exit codes, the one-line error, and Ctrl-C handling shared by every `truva-console` command."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import Any, Protocol

from console.printable import printable_line

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_CANCELLED = 130


def fail(message: object, code: int = EXIT_BAD_INPUT) -> int:
    """Print `truva-console: MESSAGE` as one line on stderr and return the exit code."""
    print(f"truva-console: {printable_line(str(message))}", file=sys.stderr)
    return code


class Cancellable(Protocol):
    """Something with an async `run()` that `cancel()` stops at once (executor, replayer)."""

    async def run(self) -> Any: ...

    def cancel(self) -> None: ...


async def run_cancellable(runner: Cancellable) -> Any:
    """Await `runner.run()` with SIGINT and SIGTERM calling `runner.cancel()` meanwhile."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    with contextlib.suppress(NotImplementedError, RuntimeError):
        for sig in signals:
            loop.add_signal_handler(sig, runner.cancel)
    try:
        return await runner.run()
    finally:
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
