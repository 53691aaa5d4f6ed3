"""Stores made with older DDL (v1, v2) migrate forward on open and can be re-run from.

v2 adds `executions.rerun_of`, `attempts.recovery` and `attempts.impact`; rows recorded before
keep every value and read NULL in the new columns. v3 renames `attempts.status` to
`http_status`, drops `attempts.attempt_number` (derived), makes times TIMESTAMPTZ and token
counts BIGINT, keeps each prompt once, and adds `search_text` and the `*_text` views.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from executor.plan import parse_plan
from store.queries import ExecutionFilter, open_store
from store.schema import MIGRATIONS, SCHEMA_VERSION, shape_problems, stored_schema_version
from tests.support.plans import capability, plan, run_cli, step
from tests.support.tool_server import ScriptedToolServer, ToolReply

V2_COLUMNS = {("executions", "rerun_of"), ("attempts", "recovery"), ("attempts", "impact")}


def _columns(conn: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    return set(conn.execute(
        "SELECT table_name, column_name FROM duckdb_columns() "
        "WHERE database_name = current_database()"
    ).fetchall())  # fmt: skip


def make_v1_store(path: Path, base_url: str, version: int = 1) -> None:
    """A store of schema `version` (1 or 2) holding one partial execution: step-1 succeeded,
    step-2 failed after an LLM call; and a call whose prompt was never sent."""
    document = plan(base_url, {"search": capability("search"), "book": capability("book")},
                    [step("step-1", "search", {"city": "Paris"}),
                     step("step-2", "book", {"city": "{{step-1.data.code}}"})])  # fmt: skip
    snapshot = parse_plan(document).to_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = duckdb.connect(str(path))
    try:
        for migration in MIGRATIONS[:version]:
            for statement in migration.statements:
                conn.execute(statement)
        conn.execute("INSERT INTO schema_info VALUES ('schema_version', ?)", [str(version)])
        conn.execute(
            "INSERT INTO executions (execution_id, status, started_at, finished_at, query, "
            "incomplete_steps, llm_calls, llm_total_tokens, tool_version) VALUES "
            "('20260101-000000-v1', 'partial', TIMESTAMP '2026-01-01 00:00:00', "
            "TIMESTAMP '2026-01-01 00:00:01', 'old run', ['step-2'], 0, 0, '0.1.0')"
        )
        conn.execute("INSERT INTO execution_snapshots (execution_id, plan, config) VALUES "
                     "('20260101-000000-v1', ?, ?)",
                     [json.dumps(snapshot), json.dumps(document["config"])])  # fmt: skip
        conn.execute(
            "INSERT INTO steps (execution_id, step_id, tool, capability, status, dispatch_count, "
            "attempts, final_action, final_rule_id, result, started_at) VALUES "
            "('20260101-000000-v1', 'step-1', 'demo', 'search', 'succeeded', 1, 1, 'success', "
            "'success.2xx', '{\"success\": true, \"data\": {\"code\": \"PAR\"}}', "
            "TIMESTAMP '2026-01-01 00:00:00'), "
            "('20260101-000000-v1', 'step-2', 'demo', 'book', 'failed', 1, 1, 'stop_refused', "
            "'refused.explicit_false', NULL, TIMESTAMP '2026-01-01 00:00:00.5')"
        )
        conn.execute(
            "INSERT INTO attempts (execution_id, step_id, n, attempt_number, dispatched, status, "
            "action, rule_id, request_body, response_body, started_at) VALUES "
            "('20260101-000000-v1', 'step-1', 1, 1, true, 200, 'success', 'success.2xx', "
            "'{\"city\": \"Paris\"}', '{\"data\": {\"code\": \"PAR\"}}', "
            "TIMESTAMP '2026-01-01 00:00:00.25'), "
            "('20260101-000000-v1', 'step-2', 1, 1, true, 409, 'stop_refused', "
            "'refused.explicit_false', '{}', 'Zimmer ausgebucht', NULL)"
        )
        prompt = [{"role": "user", "content": "Why was Zimmer refused?"}]
        conn.execute(
            "INSERT INTO llm_calls (call_id, execution_id, step_id, n, site, messages, "
            "request_body, raw_text, prompt_tokens, completion_tokens, total_tokens, called_at) "
            "VALUES ('call-sent', '20260101-000000-v1', 'step-2', 1, 'error_analysis', ?, ?, "
            "'{\"should_retry\": false}', 2000000000, 1, 2000000001, "
            "TIMESTAMP '2026-01-01 00:00:00.75'), "
            "('call-unsent', '20260101-000000-v1', 'step-2', 1, 'error_analysis', ?, '', "
            "NULL, NULL, NULL, NULL, TIMESTAMP '2026-01-01 00:00:00.8')",
            [json.dumps(prompt), json.dumps({"model": "m", "messages": prompt}).encode(),
             json.dumps([{"role": "user", "content": "never sent"}])],
        )  # fmt: skip
    finally:
        conn.close()


@pytest.fixture
def v1_store(tmp_path: Path, tool_server: ScriptedToolServer) -> Path:
    path = tmp_path / "store" / "debug.duckdb"
    make_v1_store(path, tool_server.base_url)
    with duckdb.connect(str(path), read_only=True) as conn:
        assert stored_schema_version(conn) == 1
        assert not V2_COLUMNS & _columns(conn)
    return path


def test_a_v1_store_migrates_on_open_keeping_its_rows(v1_store: Path) -> None:
    assert SCHEMA_VERSION == 4
    detail = open_store(v1_store).get_execution("20260101-000000-v1")
    assert detail.execution.rerun_of is None
    assert [(a.step_id, a.rule_id, a.recovery, a.impact) for s in detail.steps
            for a in s.attempts] == [("step-1", "success.2xx", None, None),
                                     ("step-2", "refused.explicit_false", None, None)]  # fmt: skip
    with duckdb.connect(str(v1_store), read_only=True) as conn:
        assert stored_schema_version(conn) == SCHEMA_VERSION
        assert _columns(conn) >= V2_COLUMNS
        assert conn.execute("SELECT count(*) FROM attempts").fetchone() == (2,)


def test_ls_on_a_v1_store_migrates_it_and_lists_rerun_of(v1_store: Path) -> None:
    result = run_cli("ls", "--json", "--db", str(v1_store))
    assert result.code == 0, result.stderr
    (row,) = result.json()["executions"]
    assert (row["execution_id"], row["rerun_of"], row["status"]) == (
        "20260101-000000-v1", None, "partial")


def test_an_execution_recorded_at_v1_can_be_re_run(v1_store: Path, tool_server) -> None:
    tool_server.script("/capabilities/book", ToolReply.ok({"booking": "B1"}))
    result = run_cli("rerun", "20260101-000000-v1", "--json", "--db", str(v1_store))
    assert result.code == 0, result.stderr
    document = result.json()
    assert (document["status"], document["rerun_of"]) == ("succeeded", "20260101-000000-v1")
    assert tool_server.received("/capabilities/search") == []
    assert [r.json for r in tool_server.received("/capabilities/book")] == [{"city": "PAR"}]
    with duckdb.connect(str(v1_store), read_only=True) as conn:
        assert conn.execute(
            "SELECT rerun_of FROM executions WHERE execution_id = ?", [document["execution_id"]]
        ).fetchone() == ("20260101-000000-v1",)



@pytest.mark.parametrize("version", [1, 2])
def test_an_older_store_reads_as_v3_columns_views_and_types(
    tmp_path: Path, tool_server: ScriptedToolServer, version: int
) -> None:
    path = tmp_path / f"v{version}.duckdb"
    make_v1_store(path, tool_server.base_url, version)

    store = open_store(path)

    detail = store.get_execution("20260101-000000-v1")
    attempts = [a for step in detail.steps for a in step.attempts]
    assert [(a.step_id, a.status, a.attempt_number) for a in attempts] == [
        ("step-1", 200, 1), ("step-2", 409, 1)]
    assert attempts[0].started_at == 1767225600.25  # 2026-01-01 00:00:00.25 UTC, exactly
    sent, unsent = attempts[1].llm_calls
    assert sent.messages == [{"role": "user", "content": "Why was Zimmer refused?"}]
    assert unsent.messages == [{"role": "user", "content": "never sent"}]
    assert (sent.total_tokens, sent.text_recorded, unsent.text_recorded) == (2000000001, True, True)
    assert detail.execution.llm_total_tokens == 2000000001  # summed as BIGINT
    found = store.list_executions(ExecutionFilter(text="zimmer")).executions
    assert [row.execution_id for row in found] == ["20260101-000000-v1"]
    assert store.list_executions(ExecutionFilter(text="never sent")).total == 1
    assert store.list_executions(ExecutionFilter(http_status=409)).total == 1
    with duckdb.connect(str(path), read_only=True) as conn:
        assert stored_schema_version(conn) == SCHEMA_VERSION
        assert shape_problems(conn) == []  # reopened: the views' types are the tables' types
        columns = _columns(conn)
        assert {("attempts", "http_status"), ("llm_calls", "unsent_messages"),
                ("llm_calls", "response_headers")} <= columns  # fmt: skip
        assert not {("attempts", "status"), ("attempts", "attempt_number"),
                    ("llm_calls", "messages")} & columns  # fmt: skip
        assert conn.execute(
            "SELECT typeof(started_at), typeof(total_tokens) FROM attempts, llm_calls LIMIT 1"
        ).fetchone() == ("TIMESTAMP WITH TIME ZONE", "BIGINT")
        assert conn.execute(
            "SELECT step_id, http_status, response_text FROM attempts_text ORDER BY step_id"
        ).fetchall() == [("step-1", 200, '{"data": {"code": "PAR"}}'),
                         ("step-2", 409, "Zimmer ausgebucht")]  # fmt: skip
        assert conn.execute(
            "SELECT call_id, CAST(messages AS VARCHAR) FROM llm_calls_text ORDER BY call_id"
        ).fetchall() == [
            ("call-sent", '[{"role":"user","content":"Why was Zimmer refused?"}]'),
            ("call-unsent", '[{"role": "user", "content": "never sent"}]')]  # fmt: skip


def test_a_new_store_reopened_in_another_process_has_the_expected_shape(tmp_path: Path) -> None:
    path = tmp_path / "new.duckdb"
    open_store(path, create=True)
    code = (
        "import sys, duckdb; from store.schema import shape_problems; "
        "conn = duckdb.connect(sys.argv[1], read_only=True); print(shape_problems(conn))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_migration_left_in_the_wal_by_a_killed_process_replays_in_utc(tmp_path: Path) -> None:
    path = tmp_path / "killed.duckdb"
    make = (
        "import os, sys, duckdb; from store.schema import MIGRATIONS, ensure_schema; "
        "c = duckdb.connect(sys.argv[1]); c.execute(\"SET TimeZone = 'America/New_York'\"); "
        "[c.execute(s) for s in MIGRATIONS[0].statements]; "
        "c.execute(\"INSERT INTO schema_info VALUES ('schema_version', '1')\"); "
        "c.execute(\"INSERT INTO executions (execution_id, status, started_at) VALUES "
        "('e', 'failed', TIMESTAMP '2026-01-01 00:00:00.5')\"); c.execute('CHECKPOINT'); "
        "ensure_schema(c, 'x', create=True); os._exit(0)"  # killed: the migration is in the WAL
    )
    subprocess.run([sys.executable, "-c", make, str(path)], check=True)
    assert path.with_name(path.name + ".wal").exists()
    read = (
        "import sys, duckdb; from store.schema import shape_problems; "
        "c = duckdb.connect(sys.argv[1], read_only=True); "
        "print(shape_problems(c), c.execute('SELECT epoch(started_at) FROM executions').fetchall())"
    )
    out = subprocess.run([sys.executable, "-c", read, str(path)], capture_output=True, text=True)
    assert out.stdout.strip() == "[] [(1767225600.5,)]", out.stdout + out.stderr
