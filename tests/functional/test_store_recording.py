"""`truva-console run` recording: secrets in URLs redacted at rest, and lost recordings said."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

import store.recorder
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


def fail_every_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the database and the spool both refuse writes, as a full disk does."""

    def database_full(conn, tables) -> None:
        raise duckdb.IOException('Could not write file "debug.duckdb.wal": No space left on device')

    def spool_full(paths, name, table) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.recorder, "apply_segments", database_full)
    monkeypatch.setattr(store.recorder, "write_segment", spool_full)


def test_the_recorder_counts_the_events_it_could_not_save(tmp_path: Path, monkeypatch) -> None:
    events = realistic_execution("exec-lost")
    recorder = StoreRecorder(tmp_path / "debug.duckdb")
    fail_every_write(monkeypatch)

    for event in events:
        recorder.record(event)
    recorder.close()

    assert recorder.unsaved_events == len(events)
    assert recorder.last_error == "No space left on device"


def test_run_says_on_stderr_when_its_recording_was_lost(
    tmp_path: Path, tool_server, monkeypatch
) -> None:
    tool_server.script("/capabilities/search", ToolReply.ok({"hotels": ["H1"]}))
    document = plan(tool_server.base_url, {"search": capability("search")},
                    [step("step-1", "search", {"city": "PAR"})])  # fmt: skip
    db = tmp_path / "debug.duckdb"
    fail_every_write(monkeypatch)

    result = run_cli("run", str(write_plan(tmp_path, document)), "--db", str(db))

    assert result.code == 0
    assert result.stdout.startswith("execution ")
    assert re.fullmatch(
        rf"truva-console: recording to {re.escape(str(db))} failed: No space left on device; "
        r"\d+ events not saved\n",
        result.stderr,
    )
