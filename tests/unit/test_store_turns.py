"""Turns with a store file: processes queue in arrival order instead of racing for DuckDB's lock.

flock locks of two open files conflict even within one process, so threads stand in for
processes here.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

import store.turns
from store.turns import QUEUE_DIR_NAME, TurnTimeoutError, take_turn


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    path = tmp_path / "debug.duckdb.spool"
    path.mkdir()
    return path


def soon(seconds: float = 30.0) -> float:
    return time.monotonic() + seconds


def test_waiters_get_the_turn_in_the_order_they_arrived(spool: Path, monkeypatch) -> None:
    holder = take_turn(spool, stall_timeout_s=30, deadline=soon())
    assert holder is not None
    queued = threading.Semaphore(0)
    real_enter = store.turns._Ticket.enter

    def enter_and_say_so(queue: Path):
        ticket = real_enter(queue)
        queued.release()
        return ticket

    monkeypatch.setattr(store.turns._Ticket, "enter", enter_and_say_so)
    served: list[str] = []

    def wait_for_a_turn(name: str) -> None:
        turn = take_turn(spool, stall_timeout_s=30, deadline=soon())
        assert turn is not None
        served.append(name)
        turn.release()

    waiters = [threading.Thread(target=wait_for_a_turn, args=(name,)) for name in "ABC"]
    for waiter in waiters:
        waiter.start()
        assert queued.acquire(timeout=30)  # in line before the next one arrives
    holder.release()
    for waiter in waiters:
        waiter.join(timeout=30)

    assert served == ["A", "B", "C"]
    assert os.listdir(spool / QUEUE_DIR_NAME) == []


@pytest.mark.parametrize(
    ("stall_timeout_s", "wait_s", "stalled"),
    [(0.05, 30.0, True), (30.0, 0.05, False)],
    ids=["holder-keeps-it-too-long", "line-too-long"],
)
def test_a_wait_that_runs_out_names_the_holder(
    spool: Path, stall_timeout_s: float, wait_s: float, stalled: bool
) -> None:
    holder = take_turn(spool, stall_timeout_s=30, deadline=soon())
    assert holder is not None
    try:
        with pytest.raises(TurnTimeoutError) as raised:
            take_turn(spool, stall_timeout_s=stall_timeout_s, deadline=soon(wait_s))
    finally:
        holder.release()

    assert (raised.value.holder_pid, raised.value.stalled) == (os.getpid(), stalled)
    assert os.listdir(spool / QUEUE_DIR_NAME) == []


@pytest.mark.parametrize(
    "left", ["4194304", "4194304\n", "1234567890123456789"], ids=["long-pid", "newline", "wide"]
)
def test_the_holder_is_named_over_what_an_earlier_holder_left(spool: Path, left: str) -> None:
    # The pid is written over the last holder's, never truncated: its longer text must not show.
    (spool / "turn.lock").write_text(left)
    holder = take_turn(spool, stall_timeout_s=30, deadline=soon())
    assert holder is not None
    try:
        with pytest.raises(TurnTimeoutError) as raised:
            take_turn(spool, stall_timeout_s=0.05, deadline=soon())
    finally:
        holder.release()

    assert raised.value.holder_pid == os.getpid()


def test_the_ticket_of_a_waiter_that_died_is_skipped_and_removed(spool: Path) -> None:
    queue = spool / QUEUE_DIR_NAME
    queue.mkdir()
    dead = queue / "00000000000000000001-99999-deadbeef.ticket"
    dead.write_text("")  # unlocked: its process is gone

    turn = take_turn(spool, stall_timeout_s=30, deadline=soon())

    assert turn is not None
    turn.release()
    assert not dead.exists()


def test_with_no_time_to_wait_the_turn_is_taken_only_if_nobody_waits(spool: Path) -> None:
    free = take_turn(spool, stall_timeout_s=0, deadline=time.monotonic())
    assert free is not None
    free.release()
    waiting = store.turns._Ticket.enter(spool / QUEUE_DIR_NAME)
    assert waiting is not None
    try:
        with pytest.raises(TurnTimeoutError):
            take_turn(spool, stall_timeout_s=0, deadline=time.monotonic())
    finally:
        waiting.leave()


def test_without_a_spool_directory_there_is_no_line(tmp_path: Path) -> None:
    assert take_turn(tmp_path / "missing.spool", stall_timeout_s=1, deadline=soon()) is None
