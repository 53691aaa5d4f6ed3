"""Keys taken in the order they were typed, each after the one before has had its effect.

Textual picks a key's target (the focused widget) when the app reads it, and hands it on
without waiting. A burst of keys (a paste into the terminal, `tmux send-keys "/status:failed"
Enter`, a fast typist) is therefore aimed before the first key has done anything: the `/`
that moves the cursor into the filter bar takes effect after `status:failed` has gone to the
table, whose `s`, `t` and `:` sort it and open the SQL screen. A focus change, a screen pushed
or popped, all happen in messages that the first key queued.

`KeyOrder` holds each key the terminal sends until what its predecessor set going is done:
every message queue of the app and of the current screen's widgets empty for a few turns of
the event loop, and the workers it started that load what the next key acts on (a page, a
detail, a search) finished. Nothing is dropped or reordered; a key typed alone is not delayed
(only the next one waits). A burst of 221 keys into the filter bar takes 0.34 s, about 1.5 ms
a key (1.1 s while the wait spun the event loop instead of polling a running worker).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

from textual import events
from textual.worker import WorkerState

if TYPE_CHECKING:
    from textual.app import App

# A key's effects are in within a few milliseconds; if the queues do not empty (a widget
# busy in a long handler, a stream of messages), the held keys go on anyway after this long.
_SETTLE_TIMEOUT_S = 2.0
# Workers whose answer is what the next key acts on: a page of the list, an execution's detail,
# the texts of its panes, a search's matches. A key that starts one is in once it is done (the
# list a filter reloads is there before `j` moves its cursor). Workers that run for long and
# whose keys must stay live (a replay, a re-run, a what-if, an SQL query: Ctrl-C cancels it)
# and the read-ahead of the row under the cursor are not waited for.
WAITED_WORKER_GROUPS = frozenset({
    "executions-page", "execution-detail", "lint-cards", "llm-texts", "long-text",
    "replay-texts", "text-search",
})
_RUNNING = (WorkerState.PENDING, WorkerState.RUNNING)

_WORKER_POLL_S = 0.005
_NEVER_HELD = frozenset({"ctrl+c", "ctrl+q"})
# Turns of the event loop with every queue empty after which a key's effects are taken to be
# in (a turn is one step of every task that is ready).
_QUIET_TURNS = 3


class KeyOrder:
    """Serialises the terminal's keys for `app` (see the module's docstring)."""

    def __init__(self, app: App[object]) -> None:
        self.app = app
        self._held: deque[events.Key] = deque()
        self._turn: events.Key | None = None  # the key being aimed, or waited on
        self._task: asyncio.Task[None] | None = None  # held: the loop keeps tasks weakly
        self._settling: events.Key | None = None  # the key whose turn is being waited out

    def hold(self, event: events.Event) -> bool:
        """Whether `event` is a key that must wait for the one before (it is queued and sent
        again when its turn comes); False for any other event, and for a key whose turn it is."""
        if not isinstance(event, events.Key) or event.is_forwarded:
            return False
        if event.key in _NEVER_HELD:  # quitting and cancelling do not wait behind other keys
            return False
        if event is self._turn:
            return False
        if self._turn is not None:
            self._held.append(event)
            return True
        self._turn = event
        return False

    def handled(self, event: events.Event) -> None:
        """After the app has aimed a key (which marks it forwarded): let the next one go once
        this one's effects are in."""
        # A key a binding handles comes back to the app a second time (forwarded, bubbled up
        # for the app's bindings): its turn's wait starts once, when it was first aimed.
        if event is self._turn and self._settling is not event:
            self._settling = event
            self._task = asyncio.get_running_loop().create_task(
                self._next_when_settled(self._workers())
            )

    def _workers(self) -> set[object]:
        return set(self.app.workers)

    async def _next_when_settled(self, workers_before: set[object]) -> None:
        try:
            await self._settle(workers_before)
        finally:
            self._turn = self._held.popleft() if self._held else None
            if self._turn is not None:
                self.app.post_message(self._turn)

    async def _settle(self, workers_before: set[object]) -> None:
        """Wait until the app and every widget of the current screen have had empty message
        queues for `_QUIET_TURNS` turns of the event loop in a row (a key's effects travel
        from queue to queue: the key to the focused widget, up to the screen and the app for
        its binding, the action's focus change back down; each arrives a turn or more after
        the last) with no worker of `WAITED_WORKER_GROUPS` started since `workers_before`
        still running, or until `_SETTLE_TIMEOUT_S` has passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _SETTLE_TIMEOUT_S
        quiet = 0
        pause = 0.0
        while quiet < _QUIET_TURNS and loop.time() < deadline:
            await asyncio.sleep(pause)
            if not self._all_queues_empty():
                quiet, pause = 0, 0.0
            elif self._waited_worker_running(workers_before):
                # A worker's read: look again in a few ms rather than spin the loop, which
                # would take the GIL from the worker's thread.
                quiet, pause = 0, _WORKER_POLL_S
            else:
                quiet, pause = quiet + 1, 0.0

    def _waited_worker_running(self, workers_before: set[object]) -> bool:
        return any(
            worker.state in _RUNNING and worker.group in WAITED_WORKER_GROUPS
            and worker not in workers_before
            for worker in self.app.workers
        )

    def _all_queues_empty(self) -> bool:
        app = self.app
        if app.message_queue_size:
            return False
        try:
            screen = app.screen
        except Exception:  # no screen: the app is starting or closing
            return True
        return not any(node.message_queue_size for node in screen.walk_children(with_self=True))
