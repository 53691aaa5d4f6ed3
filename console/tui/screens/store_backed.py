"""What every store-backed screen shares: the request counter, polling, worker errors.

A screen reads the store (or writes a bundle) in a thread worker that only posts messages; the
answer to a superseded request is dropped; a crashed worker becomes one line for the screen.
`StoreBacked` is a mixin for `Screen` and `ModalScreen` subclasses (Textual dispatches the
`on_worker_state_changed` handler by name along the MRO).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from textual.message import Message
from textual.worker import Worker, WorkerState

from console.tui.screens.store_source import StoreUnavailable

T = TypeVar("T")


def one_line(error: BaseException) -> str:
    """An error's text on one line (its type name when it has no text)."""
    return " ".join(str(error).split()) or type(error).__name__


@dataclass
class StoreLoadFailed(Message):
    """The store could not be read; `problem` is one line; `held`: another process has it.

    Each screen nests its own subclass (`ExecutionsScreen.LoadFailed`), so handlers can tell
    whose read failed.
    """

    request: int
    problem: str
    held: bool = False


class StoreRequests:
    """Numbers a screen's store requests; only the answer to the newest one is used."""

    def __init__(self) -> None:
        self.current = 0
        self.in_flight = False

    def start(self) -> int:
        """A new request: its number; any earlier answer is now stale."""
        self.current += 1
        self.in_flight = True
        return self.current

    def answered(self, request: int) -> bool:
        """Whether `request` is the newest one; if so it is no longer in flight."""
        if request != self.current:
            return False
        self.in_flight = False
        return True

    def abandoned(self) -> None:
        """The worker of the newest request died without answering."""
        self.in_flight = False


class StoreBacked:
    """Mixin for a screen whose store or file work runs in the worker group `WORKER_GROUP`.

    The screen sets `requests = StoreRequests()` in `__init__`, starts its work with
    `run_store_work`, checks answers with `requests.answered(request)` and implements
    `store_work_crashed(problem)`; a polling screen also sets `refresh_interval_s`, implements
    `reload()` and may narrow `wants_poll()`.
    """

    WORKER_GROUP: ClassVar[str]
    LoadFailed: ClassVar[type[StoreLoadFailed]] = StoreLoadFailed
    requests: StoreRequests
    refresh_interval_s: float | None = None

    # Provided by textual's Screen, which the concrete class also derives from.
    post_message: Callable[[Message], bool]
    run_worker: Callable[..., Worker[Any]]
    set_interval: Callable[..., Any]

    def start_polling(self) -> None:
        """Call `poll_store` every `refresh_interval_s` seconds (no polling when it is None)."""
        if self.refresh_interval_s:
            self.set_interval(self.refresh_interval_s, self.poll_store, name="poll-store")

    def poll_store(self) -> None:
        """Reload when `wants_poll()` and no read is running (what the refresh timer calls)."""
        if self.wants_poll() and not self.requests.in_flight:
            self.reload()

    def wants_poll(self) -> bool:
        """Whether the timer should read the store again now."""
        return True

    def reload(self) -> None:
        """Start reading what the screen shows (screens that poll override it)."""

    def store_work_crashed(self, problem: str) -> None:
        """The worker raised something unexpected; `problem` is one line."""
        raise NotImplementedError

    def run_store_work(
        self,
        work: Callable[[], T],
        done: Callable[[int, T], Message],
        *,
        failed: Callable[[int, BaseException], Message] | None = None,
        expected: tuple[type[BaseException], ...] = (StoreUnavailable,),
    ) -> int:
        """Run `work()` in a thread worker as a new request; post `done(request, result)`.

        An `expected` error posts `failed(request, error)`, by default the screen's
        `LoadFailed(request, problem, held)`. Returns the request number.
        """
        request = self.requests.start()
        report = failed or self._load_failed_message

        def job() -> None:
            try:
                result = work()
            except expected as error:
                self.post_message(report(request, error))
                return
            self.post_message(done(request, result))

        self.run_worker(job, thread=True, exclusive=True, exit_on_error=False,
                        group=self.WORKER_GROUP)  # fmt: skip
        return request

    def _load_failed_message(self, request: int, error: BaseException) -> Message:
        held = isinstance(error, StoreUnavailable) and error.held
        return self.LoadFailed(request, str(error), held)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A store worker that raised: report it once, as one line."""
        if event.worker.group == self.WORKER_GROUP and event.state == WorkerState.ERROR:
            self.requests.abandoned()
            self.store_work_crashed(f"unexpected error: {one_line(event.worker.error)}")
