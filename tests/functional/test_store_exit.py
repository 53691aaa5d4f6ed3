"""What a `truva-console` process recorded is in the database when it exits, or killed, shows.

Real `truva-console` processes against loopback tools; the store is read back with plain
`duckdb` (exit) or through the store's own open (after a kill, which seals what the dead
writer journaled and marks its execution interrupted).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from console.demo.runner import DEMO_PLAN_NAMES
from store.queries import open_store
from tests.support.holder import HOLDER_NAME, hold_file
from tests.support.plans import chain_plan, run_subprocess, write_plan
from tests.support.tool_server import ReceivedRequest, ScriptedToolServer, ToolReply

# A response recorded this long before a kill must be in the store (flush interval 250 ms,
# plus room for a loaded machine).
RESPONSE_MARGIN_S = 0.6


def plain_duckdb_rows(db: Path, sql: str) -> list[tuple]:
    """Rows of `sql`, read with a plain duckdb connection (no truva-console ingest)."""
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def spool_files(db: Path) -> list[str]:
    segments = db.with_name(db.name + ".spool") / "segments"
    return sorted(path.name for path in segments.glob("*")) if segments.is_dir() else []


def test_demo_record_leaves_every_execution_in_the_database(tmp_path: Path) -> None:
    db = tmp_path / "demo.duckdb"

    result = run_subprocess("demo", "record", "--db", str(db), timeout=120)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    rows = plain_duckdb_rows(db, "SELECT count(*), count(finished_at) FROM executions")
    assert rows == [(len(DEMO_PLAN_NAMES), len(DEMO_PLAN_NAMES))]
    assert plain_duckdb_rows(db, "SELECT count(*) FROM executions WHERE status = 'running'") == [
        (0,)
    ]
    assert spool_files(db) == []


def test_runs_of_several_plans_are_each_in_the_database_at_exit(
    tmp_path: Path, tool_server
) -> None:
    tool_server.script("/capabilities/work", ToolReply.ok({"done": True}))
    db = tmp_path / "runs.duckdb"
    execution_ids = []
    for steps in (1, 3, 5):
        path = write_plan(tmp_path, chain_plan(tool_server.base_url, steps), f"plan-{steps}.json")
        result = run_subprocess("run", str(path), "--json", "--db", str(db))
        assert result.returncode == 0, result.stderr
        execution_ids.append(json.loads(result.stdout)["execution_id"])

        rows = plain_duckdb_rows(
            db,
            "SELECT e.status, count(a.n) FROM executions AS e "
            "LEFT JOIN attempts AS a USING (execution_id) "
            f"WHERE e.execution_id = '{execution_ids[-1]}' GROUP BY e.status",
        )
        assert rows == [("succeeded", steps)]
    assert plain_duckdb_rows(db, "SELECT count(*) FROM executions") == [(3,)]
    assert spool_files(db) == []




def test_a_run_whose_file_stays_held_leaves_its_segments_and_says_so(
    tmp_path: Path, tool_server
) -> None:
    tool_server.script("/capabilities/work", ToolReply.ok({"done": True}))
    db = tmp_path / "held.duckdb"
    path = write_plan(tmp_path, chain_plan(tool_server.base_url, 2))
    first = run_subprocess("run", str(path), "--json", "--db", str(db))
    assert first.returncode == 0, first.stderr
    holder = hold_file(db)
    try:
        result = run_subprocess("run", str(path), "--json", "--db", str(db))
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait()

    assert result.returncode == 0, result.stderr
    execution_id = json.loads(result.stdout)["execution_id"]
    segments_dir = db.with_name(db.name + ".spool") / "segments"
    left = spool_files(db)
    assert left and all(name.endswith(".segment") for name in left)
    assert re.fullmatch(
        rf"truva-console: {re.escape(HOLDER_NAME)} \(pid {holder.pid}\) holds "
        rf"{re.escape(str(db))}; close it, "
        rf"or use 'truva-console sql' to query the store; {len(left)} recorded "
        rf"{'segment waits' if len(left) == 1 else 'segments wait'} "
        rf"in {re.escape(str(segments_dir))} \(run 'truva-console ls --db "
        rf"{re.escape(str(db))}' to ingest them\)\n",
        result.stderr,
    ), result.stderr

    listed = run_subprocess("ls", "--db", str(db), "--json")
    assert listed.returncode == 0, listed.stderr
    assert plain_duckdb_rows(
        db, f"SELECT status FROM executions WHERE execution_id = '{execution_id}'"
    ) == [("succeeded",)]
    assert plain_duckdb_rows(db, "SELECT count(*) FROM executions") == [(2,)]
    assert spool_files(db) == []


class TimedToolServer(ScriptedToolServer):
    """A tool server that notes when it finished writing each response (monotonic seconds)."""

    def __init__(self) -> None:
        self.responded: list[tuple[float, ReceivedRequest]] = []
        super().__init__()

    def _handle(self, handler, request: ReceivedRequest, request_number: int) -> None:
        super()._handle(handler, request, request_number)
        handler.wfile.flush()
        with self._lock:
            self.responded.append((time.monotonic(), request))


def start_run(plan_path: Path, db: Path) -> subprocess.Popen[str]:
    script = Path(sys.executable).with_name("truva-console")
    return subprocess.Popen(
        [str(script), "run", str(plan_path), "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


# Kill after this many requests reached the tool (0: after the first arrived, before its answer).
KILL_POINTS = [0, 1, 2, 3, 5, 8, 13, 20]


@pytest.mark.serial  # answers 0.6 s before the kill must be recorded
@pytest.mark.parametrize("served_before_kill", KILL_POINTS)
def test_a_killed_run_shows_interrupted_with_every_dispatched_attempt(
    tmp_path: Path, served_before_kill: int
) -> None:
    db = tmp_path / "killed.duckdb"
    with TimedToolServer() as tool:
        tool.script("/capabilities/work", ToolReply.ok({"done": True}, delay_s=0.03))
        path = write_plan(tmp_path, chain_plan(tool.base_url, 40))
        process = start_run(path, db)
        try:
            assert tool.wait_for_requests(max(served_before_kill, 1), timeout_s=30)
            if served_before_kill:
                deadline = time.monotonic() + 30
                while len(tool.responded) < served_before_kill and time.monotonic() < deadline:
                    threading.Event().wait(0.001)
        finally:
            process.kill()
            killed_at = time.monotonic()
            process.wait()
        received = tool.received()
        responded = list(tool.responded)

    store = open_store(db)
    page = store.list_executions()
    assert page.total == 1, "the killed run left no execution row"
    detail = store.get_execution(page.executions[0].execution_id)
    assert detail.execution.status == "interrupted"
    attempts = {
        (step.step_id, attempt.n): attempt for step in detail.steps for attempt in step.attempts
    }
    recorded_bodies = {bytes(attempt.request_body or b"") for attempt in attempts.values()}
    # A request the kill cut short (headers sent, body not) is not a whole request.
    assert {request.body for request in received if request.json is not None} <= recorded_bodies
    answered_long_before = [
        request.body for at, request in responded if killed_at - at > RESPONSE_MARGIN_S
    ]
    answered_bodies = {
        bytes(attempt.request_body or b"")
        for attempt in attempts.values()
        if attempt.status is not None
    }
    assert set(answered_long_before) <= answered_bodies
    assert spool_files(db) == []


@pytest.mark.serial  # a signal sent a few seconds into the run
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_during_demo_record_cancels_as_run_does(tmp_path: Path, sig) -> None:
    """Found by an outside check: Ctrl-C during `demo record` recorded the execution it was
    running as `interrupted` ("the recorder stopped"), as if the process had died, and SIGTERM
    killed it outright. The plan that runs is cancelled, as `run` cancels it, no other starts,
    exit 130."""
    db = tmp_path / "demo.duckdb"
    script = Path(sys.executable).with_name("truva-console")
    child = subprocess.Popen([str(script), "demo", "record", "--slow", "--db", str(db)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    time.sleep(4.0)  # the demo services are up and a plan is running (--slow: seconds each)
    child.send_signal(sig)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "demo plan(s) not started" in err and "Traceback" not in err
    listed = json.loads(run_subprocess("ls", "--db", str(db), "--json").stdout)["executions"]
    assert listed, out
    assert "interrupted" not in {e["status"] for e in listed}
    assert listed[0]["status"] == "cancelled"  # newest first: the one the signal stopped
