"""Several processes on one store: a recorder killed at random points, and a browser polling."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from store.errors import StoreBusyError
from store.queries import open_store
from tests.support.holder import HOLDER_NAME, hold_file

# Processes racing on one store against wall-clock deadlines (visible within 2 s, polls while a
# paced recorder runs, a briefly held file released within the 5 s lock wait).
pytestmark = pytest.mark.serial

FINISHED = ("succeeded", "partial", "failed", "cancelled")
STEPS_PER_EXECUTION = 3


def start_recorder(db: Path, *options: str) -> subprocess.Popen[str]:
    """The events factory recording into `db` in a child process; waits for its `ready`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.events_factory", "--db", str(db), *options],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def read_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline().strip()




def assert_store_consistent(db: Path) -> dict[str, int]:
    """Every execution is complete with all its rows, or interrupted; returns status counts."""
    store = open_store(db)
    with store.session() as conn:
        statuses = dict(
            conn.execute("SELECT status, count(*) FROM executions GROUP BY status").fetchall()
        )
        incomplete_finished = conn.execute(
            f"""
            SELECT e.execution_id
            FROM executions AS e
            LEFT JOIN steps AS s USING (execution_id)
            LEFT JOIN attempts AS a USING (execution_id, step_id)
            WHERE e.status IN {FINISHED}
            GROUP BY e.execution_id
            HAVING count(DISTINCT s.step_id) <> {STEPS_PER_EXECUTION}
                OR count(DISTINCT s.step_id || '/' || a.n) <> {2 * STEPS_PER_EXECUTION}
                OR count(a.action) <> count(a.n)
                OR bool_or(s.status <> 'succeeded')
            """
        ).fetchall()
        duplicated_events = conn.execute(
            "SELECT execution_id, seq FROM events GROUP BY ALL HAVING count(*) > 1"
        ).fetchall()
    assert "running" not in statuses, "a dead writer's execution must show as interrupted"
    assert set(statuses) <= {*FINISHED, "interrupted"}
    assert incomplete_finished == []
    assert duplicated_events == []
    return statuses


def test_sigkill_at_random_points_leaves_complete_or_interrupted_executions(
    tmp_path: Path,
) -> None:
    rng = random.Random(20261129)
    db = tmp_path / "debug.duckdb"
    statuses: dict[str, int] = {}
    for round_number in range(20):
        # Every third round another process holds the file, so the kill lands in spool writes.
        holder = hold_file(db) if round_number % 3 == 2 else None
        recorder = start_recorder(
            db, "--executions", "100000", "--batch-size", "7", "--flush-interval", "0.003",
            "--db-interval", "0.02", "--lock-timeout", "0.01", "--event-pace-s", "0.0003",
            "--progress-every-event",
        )  # fmt: skip
        for _ in range(rng.randint(1, 600)):
            read_line(recorder)
        recorder.kill()
        recorder.wait()
        if holder is not None:
            holder.kill()
            holder.wait()

        statuses = assert_store_consistent(db)

    assert statuses.get("interrupted", 0) > 0
    assert not [
        path.name
        for path in (tmp_path / "debug.duckdb.spool" / "segments").iterdir()
        if path.suffix in (".arrow", ".segment", ".journal")
    ]


def test_browser_polls_while_another_process_records(tmp_path: Path) -> None:
    db = tmp_path / "debug.duckdb"
    executions = 40
    recorder = start_recorder(
        db, "--executions", str(executions), "--pace-s", "0.12", "--flush-interval", "0.02"
    )
    store = open_store(db)
    polls = 0
    seen_totals = []
    while recorder.poll() is None:
        page = store.list_executions(limit=5)
        seen_totals.append(page.total)
        if page.executions:
            detail = store.get_execution(page.executions[0].execution_id)
            assert detail.execution.status in ("running", "succeeded")
        store.summary_counts()
        polls += 1
    assert recorder.returncode == 0

    final = store.list_executions(limit=100)
    counts = store.summary_counts()

    assert polls >= 3
    assert seen_totals == sorted(seen_totals)
    assert final.total == executions
    assert {row.status for row in final.executions} == {"succeeded"}
    assert counts["attempts"] == executions * STEPS_PER_EXECUTION * 2
    assert counts["attempts_by_action"] == {
        "retry_same": executions * STEPS_PER_EXECUTION,
        "success": executions * STEPS_PER_EXECUTION,
    }


def test_running_execution_shows_running_then_succeeded(tmp_path: Path) -> None:
    db = tmp_path / "debug.duckdb"
    recorder = start_recorder(db, "--executions", "0", "--hold")
    execution_id = read_line(recorder).removeprefix("holding ")
    store = open_store(db)

    # The recorder flushes on its own within 250 ms; the browser must see it within 2 s.
    deadline = time.monotonic() + 2.0
    detail = None
    while time.monotonic() < deadline:
        page = store.list_executions()
        if page.total:
            detail = store.get_execution(execution_id)
            if detail.steps and detail.steps[0].attempts:
                break
    assert detail is not None and detail.steps[0].attempts, "attempt not visible within 2 s"
    assert detail.execution.status == "running"
    assert detail.steps[0].status == "running"

    assert recorder.stdin is not None
    recorder.stdin.write("\n")
    recorder.stdin.flush()
    assert read_line(recorder) == "closed"
    recorder.wait()

    assert store.get_execution(execution_id).execution.status == "succeeded"


def test_execution_of_a_killed_writer_shows_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "debug.duckdb"
    recorder = start_recorder(db, "--executions", "0", "--hold", "--flush-interval", "0.01")
    execution_id = read_line(recorder).removeprefix("holding ")
    store = open_store(db)
    deadline = time.monotonic() + 2.0
    while store.list_executions().total == 0 and time.monotonic() < deadline:
        pass
    assert store.get_execution(execution_id).execution.status == "running"

    recorder.kill()
    recorder.wait()
    detail = store.get_execution(execution_id)

    assert detail.execution.status == "interrupted"
    assert f"pid {recorder.pid}" in (detail.execution.stop_reason or "")
    assert detail.steps[0].status == "interrupted"
    assert detail.execution.finished_at is not None


def test_reader_waits_for_a_briefly_held_file_instead_of_failing(tmp_path: Path) -> None:
    db = tmp_path / "debug.duckdb"
    recorder = start_recorder(db, "--executions", "1")
    assert read_line(recorder).startswith("recorded")
    recorder.communicate()
    holder = hold_file(db)
    assert holder.stdin is not None
    holder.stdin.write("\n")  # the holder exits right after this line, releasing the lock
    holder.stdin.flush()

    page = open_store(db, lock_timeout_s=5.0).list_executions()

    assert page.total == 1
    holder.wait()


def test_reader_reports_a_file_held_for_too_long_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "debug.duckdb"
    duckdb.connect(str(db)).close()
    holder = hold_file(db)
    try:
        try:
            open_store(db, lock_timeout_s=0.1)
        except StoreBusyError as error:
            message = str(error)
        else:
            raise AssertionError("expected StoreBusyError")
    finally:
        holder.kill()
        holder.wait()
    assert "\n" not in message
    assert message == (
        f"{HOLDER_NAME} (pid {holder.pid}) holds {db}; close it, or use 'truva-console sql' to "
        "query the store"
    )
