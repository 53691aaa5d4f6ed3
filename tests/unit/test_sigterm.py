"""SIGTERM during `import` and `export` raises as Ctrl-C does, so their clean-up runs."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from console.exits import Terminated, sigterm_as_ctrl_c


def test_sigterm_in_the_block_raises_terminated_and_the_old_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    cleaned = []
    with pytest.raises(Terminated), sigterm_as_ctrl_c():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises at once
        finally:
            cleaned.append(True)  # what an import's temporary directory relies on
    assert cleaned == [True]
    assert signal.getsignal(signal.SIGTERM) is before
    assert isinstance(Terminated(), KeyboardInterrupt)  # every Ctrl-C path handles it


def test_outside_the_main_thread_nothing_changes() -> None:
    seen = []

    def block() -> None:
        with sigterm_as_ctrl_c():
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=block)
    thread.start()
    thread.join()
    assert seen == [before]
