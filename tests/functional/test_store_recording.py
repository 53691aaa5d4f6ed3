"""`truva-console run` recording: secrets in URLs redacted at rest, and lost recordings said."""

from __future__ import annotations

import errno
import json
import re
from pathlib import Path

import duckdb
import pytest

import store.spool
from store.queries import open_store
from store.recorder import StoreRecorder
from tests.support.events_factory import realistic_execution
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ToolReply

TOOL_PASSWORD = "tool-pass-1"
PATH_KEY = "sk-path-secret-2"
LLM_PASSWORD = "llm-pass-3"


def _analysis(changes: dict) -> str:
    return json.dumps({"should_retry": True, "reason": "fix", "suggested_changes": changes,
                       "is_transient_error": False})  # fmt: skip


def _with_userinfo(url: str, userinfo: str) -> str:
    return url.replace("http://", f"http://{userinfo}@", 1)


@pytest.fixture
def recorded(tmp_path, tool_server, llm_server):
    """A store holding one corrected step whose tool and LLM URLs carry credentials."""
    tool_server.script(
        "/capabilities/search",
        ToolReply.error(400, "INVALID_CITY", "bad city code", "INPUT_ERROR", retryable=True),
        ToolReply.ok({"hotels": ["H1"]}),
    )
    llm_server.script(_analysis({"city": "PAR"}))
    search = {**capability("search"), "path": f"/capabilities/search?api_key={PATH_KEY}"}
    document = plan(
        _with_userinfo(tool_server.base_url, f"alice:{TOOL_PASSWORD}"),
        {"search": search},
        [step("step-1", "search", {"city": "PARIS"})],
        llm_base_url=_with_userinfo(llm_server.base_url, f"bob:{LLM_PASSWORD}"),
    )
    db = tmp_path / "store" / "debug.duckdb"
    result = run_cli("run", str(write_plan(tmp_path, document)), "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    return db, result.json()["execution_id"]


def test_credentials_in_urls_never_reach_the_disk(recorded) -> None:
    db, execution_id = recorded
    open_store(db).get_execution(execution_id)  # ingest anything still spooled
    conn = duckdb.connect(str(db))
    try:
        urls = conn.execute(
            "SELECT url FROM steps UNION ALL SELECT url FROM attempts "
            "UNION ALL SELECT base_url FROM llm_calls"
        ).fetchall()
        snapshot = conn.execute("SELECT plan, llm FROM execution_snapshots").fetchone()
    finally:
        conn.close()

    assert len(urls) == 4
    # Userinfo is taken out of the URLs requests go to (sent as Authorization instead), so the
    # recorded URLs have none; the plan snapshot keeps it as written, redacted.
    assert all(url.startswith("http://127.0.0.1:") for (url,) in urls)
    assert all("api_key=[REDACTED]" in url for (url,) in urls[:3])
    assert snapshot is not None and "[REDACTED]@" in snapshot[0]
    assert json.loads(snapshot[1]) == {"base_url": urls[3][0], "model": "scripted-model",
                                       "auth_source": "llm.base_url userinfo"}
    for path in [db, *db.parent.rglob("*")]:
        if path.is_file():
            content = path.read_bytes()
            for secret in (TOOL_PASSWORD, PATH_KEY, LLM_PASSWORD):
                assert secret.encode() not in content, (path, secret)


@pytest.mark.parametrize("llm_mode", ["recorded", "live"])
def test_a_step_recorded_with_redacted_urls_still_replays(
    recorded, llm_server, monkeypatch, llm_mode: str
) -> None:
    db, execution_id = recorded
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    llm_server.script(_analysis({"city": "PAR"}))
    requests_before = len(llm_server.requests)

    result = run_cli("replay", execution_id, "step-1", "--db", str(db), "--llm", llm_mode, "--json")

    assert result.code == 0, result.stderr
    document = result.json()
    assert document["summary"]["replay"] == "success after 2 dispatches"
    assert document["changed"] is False
    live_requests = len(llm_server.requests) - requests_before
    assert live_requests == (1 if llm_mode == "live" else 0)


class FullDisk:
    """The spool's writes fail with ENOSPC while `full` is true, as on a full disk."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, full: bool = True) -> None:
        self.full = full
        self.refused = 0
        real_writev_all = store.spool._writev_all

        def writev_all(descriptor: int, parts: list[bytes]) -> None:
            if self.full:
                self.refused += 1
                raise OSError(errno.ENOSPC, "No space left on device")
            real_writev_all(descriptor, parts)

        monkeypatch.setattr(store.spool, "_writev_all", writev_all)


def stored_counts(db: Path) -> tuple[int, int, int]:
    """Executions, attempts and events in the database file, read with plain duckdb."""
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return tuple(
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("executions", "attempts", "events")
        )
    finally:
        conn.close()


def test_the_recorder_counts_the_events_it_could_not_save(tmp_path: Path, monkeypatch) -> None:
    events = realistic_execution("exec-lost")
    recorder = StoreRecorder(tmp_path / "debug.duckdb")
    FullDisk(monkeypatch)

    for event in events:
        recorder.record(event)
    recorder.close()

    assert recorder.unsaved_events == len(events)
    assert recorder.last_error is not None
    assert recorder.last_error.startswith("No space left on device")
    assert stored_counts(tmp_path / "debug.duckdb") == (0, 0, 0)


def test_events_refused_by_a_full_disk_are_kept_and_saved_once_space_is_freed(
    tmp_path: Path, monkeypatch
) -> None:
    db = tmp_path / "debug.duckdb"
    events = realistic_execution("exec-full")
    recorder = StoreRecorder(db)
    disk = FullDisk(monkeypatch)
    for event in events:
        recorder.record(event)
    recorder.flush()
    recorder.flush()
    kept_while_full = recorder.unsaved_events

    disk.full = False
    recorder.close()

    assert disk.refused >= 2
    assert kept_while_full == len(events)
    assert recorder.unsaved_events == 0
    assert recorder.exit_notice() is None
    executions, attempts, _ = stored_counts(db)
    assert (executions, attempts) == (1, sum(e.kind == "attempt_decided" for e in events))
    conn = duckdb.connect(str(db), read_only=True)
    assert conn.execute("SELECT status FROM executions").fetchone() == (events[-1].status,)
    conn.close()


def test_events_kept_for_a_full_disk_are_bounded(tmp_path: Path, monkeypatch) -> None:
    events = realistic_execution("exec-bounded")
    recorder = StoreRecorder(tmp_path / "debug.duckdb", max_unsaved_bytes=1)
    FullDisk(monkeypatch)

    for event in events:
        recorder.record(event)
        recorder.flush()

    kept = len(recorder._unsaved)
    assert kept < len(events)
    assert recorder.dropped_events == len(events) - kept
    recorder.close()
    assert recorder.unsaved_events == len(events)


def test_run_says_in_one_line_when_its_recording_was_lost(
    tmp_path: Path, tool_server, monkeypatch
) -> None:
    tool_server.script("/capabilities/search", ToolReply.ok({"hotels": ["H1"]}))
    document = plan(tool_server.base_url, {"search": capability("search")},
                    [step("step-1", "search", {"city": "PAR"})])  # fmt: skip
    db = tmp_path / "debug.duckdb"
    FullDisk(monkeypatch)

    result = run_cli("run", str(write_plan(tmp_path, document)), "--db", str(db))

    assert result.code == 0
    assert result.stdout.startswith("execution ")
    assert re.fullmatch(
        rf"truva-console: recording to {re.escape(str(db))} failed: No space left on device"
        r"[^;\n]*; (\d+) of \1 events not saved \(free space where the store is, or pass "
        r"another --db, and run it again\)\n",
        result.stderr,
    ), result.stderr
