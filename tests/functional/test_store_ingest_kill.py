"""A process killed inside a big ingest batch's WAL-less COMMIT leaves a store that opens and a
spool that the next session ingests once, completely.

An ingest batch past `INGEST_CHECKPOINT_THRESHOLD` (1 MB) is checkpointed by its COMMIT, which
skips the WAL: the rows go straight into the database file. The child
(`tests.support.ingest_child`) says `committing` when every row of the batch is written inside
the transaction; the test kills it then, or once the database file has grown by some MB since.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from store.connection import store_paths
from store.ingest import encode_records
from store.queries import open_store
from store.spool import Journal, WriterIdentity, journal_name
from tests.support.events_factory import one_attempt_execution

WRITER = WriterIdentity(token="deadbeef0000c0de", pid=4243, host="test-host")
STEPS = 24
BODY_BYTES = 1_000_000  # 24 MB of bodies, 48 MB with their search text: far past 1 MB
EXECUTION_ID = "exec-killed-commit"
KILL_AFTER_GROWTH_MB = {"at once": 0, "after 1 MB": 1, "after 8 MB": 8}


def bulky_events() -> tuple[list[Any], int]:
    """A succeeded execution of STEPS steps whose responses carry BODY_BYTES of hex text each
    (hex of random bytes: little for DuckDB's compression to save), and the bodies' total."""
    rng = random.Random(20261201)
    bodies = [b"Marker-%d " % s + rng.randbytes(BODY_BYTES // 2).hex().encode()
              for s in range(STEPS)]  # fmt: skip
    return one_attempt_execution(EXECUTION_ID, "killed commit", bodies), sum(map(len, bodies))


def journal_spool(db: Path, events: list[Any]) -> str:
    """A store with nothing ingested and one sealed journal of `events`; the segment's name."""
    paths = store_paths(db)
    open_store(db, create=True)  # the database, empty, and no spool yet
    journal = Journal(paths, journal_name(WRITER, 1), WRITER)
    journal.append(encode_records(events, 1))
    return journal.seal().name


def kill_inside_commit(db: Path, growth_mb: int) -> tuple[bool, int]:
    """Run the ingest child and SIGKILL it `growth_mb` MB of file growth after `committing`;
    (whether it had said `committed`, the bytes the file grew before the kill)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.ingest_child", str(db)],
        stdout=subprocess.PIPE,
        bufsize=0,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None
    output = b""
    while b"committing\n" not in output:
        chunk = child.stdout.read(64)
        assert chunk, f"the ingest child ended before its commit: {output!r}"
        output += chunk
    start_size = db.stat().st_size
    target = start_size + growth_mb * 1_000_000
    while growth_mb and db.stat().st_size < target and b"committed" not in output:
        # Wait on the child's output, a few ms at most, then look at the file again.
        readable, _, _ = select.select([child.stdout], [], [], 0.002)
        if readable:
            output += child.stdout.read(64) or b"committed?"  # EOF: it ended
    grown = db.stat().st_size - start_size
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    output += child.stdout.read()
    child.stdout.close()
    return b"committed" in output, grown


def stored_rows(db: Path) -> tuple[Any, ...]:
    with open_store(db).session() as conn:
        row = conn.execute(
            "SELECT count(*), sum(response_size), "
            "count(*) FILTER (contains(search_text, 'marker-' || split_part(step_id, '-', 2) "
            "|| ' ')), count(DISTINCT step_id) FROM attempts"
        ).fetchone()
        segments = conn.execute("SELECT segment FROM ingested_segments").fetchall()
        status = conn.execute("SELECT status FROM executions").fetchall()
        events = conn.execute(
            "SELECT count(*), count(DISTINCT seq) FROM events WHERE execution_id = $1",
            [EXECUTION_ID],
        ).fetchone()
    assert row is not None and events is not None
    return (*row, segments, status, events[0] == events[1])


@pytest.mark.parametrize("growth_mb", KILL_AFTER_GROWTH_MB.values(), ids=KILL_AFTER_GROWTH_MB)
def test_kill_inside_a_wal_less_commit_leaves_a_store_that_reingests_once(
    tmp_path: Path, growth_mb: int
) -> None:
    db = tmp_path / "debug.duckdb"
    events, body_total = bulky_events()
    segment = journal_spool(db, events)

    committed, grown = kill_inside_commit(db, growth_mb)

    # The database opens as a plain DuckDB file; a commit that did not land left no row of it.
    # (The segment's row in `ingested_segments` goes with its file, once the batch is stored.)
    with duckdb.connect(str(db)) as raw:
        attempts, steps = raw.execute(
            "SELECT (SELECT count(*) FROM attempts), (SELECT count(*) FROM steps)"
        ).fetchone() or (None, None)
        recorded = raw.execute("SELECT segment FROM ingested_segments").fetchall()
    landed = attempts == STEPS
    assert (attempts, steps) == ((STEPS, STEPS) if landed else (0, 0))
    assert recorded in ([(segment,)], []) if landed else recorded == []
    if growth_mb:
        assert grown >= growth_mb * 1_000_000 or committed  # the kill landed mid-write
    # The next session ingests the spool segment again, completely, once; and then no more.
    expected = (STEPS, body_total, STEPS, STEPS, [], [("succeeded",)], True)
    assert stored_rows(db) == expected
    assert stored_rows(db) == expected
    assert not list(store_paths(db).segments.iterdir())
