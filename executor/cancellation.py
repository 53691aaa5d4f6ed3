"""Running something cancellable with SIGINT and SIGTERM cancelling it, for commands and scripts."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any, Protocol

__all__ = ["Cancellable", "run_cancellable"]


class Cancellable(Protocol):
    """Something with an async `run()` that `cancel()` stops at once (executor, replayer)."""

    async def run(self) -> Any: ...

    def cancel(self) -> None: ...


async def run_cancellable(runner: Cancellable) -> Any:
    """Await `runner.run()` with SIGINT and SIGTERM calling `runner.cancel()` meanwhile.

    Outside the main thread (no signal handlers there) it simply awaits the run.
    """
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        for sig in signals:
            loop.add_signal_handler(sig, runner.cancel)
    try:
        return await runner.run()
    finally:
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
