"""The Pilot helpers of tests.support.tui on a small Textual app."""

from __future__ import annotations

import threading

from textual import work
from textual.app import App

from tests.support.tui import settle_until


class _Polling(App[None]):
    """An app whose exclusive worker is started again while it runs, as a live list's timer
    starts a poll while a test polls: the first is cancelled by the second."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.finished: list[int] = []

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def poll(self, number: int) -> None:
        self.release.wait(5)
        self.call_from_thread(self.finished.append, number)


async def test_settle_until_takes_a_worker_cancelled_by_its_exclusive_group_as_done() -> None:
    app = _Polling()
    async with app.run_test() as pilot:
        first = app.poll(1)
        app.poll(2)  # cancels the first
        app.release.set()
        await settle_until(pilot, lambda: 2 in app.finished, "the second poll's answer")
        assert first.is_cancelled
