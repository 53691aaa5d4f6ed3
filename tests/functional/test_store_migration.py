"""Schema v2: a v1 store, made with the v1 DDL, migrates forward on open and can be re-run from.

v2 adds `executions.rerun_of`, `attempts.recovery` and `attempts.impact`; rows recorded before
keep every value and read NULL in the new columns.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from executor.plan import parse_plan
from store.queries import open_store
from store.schema import MIGRATIONS, SCHEMA_VERSION, stored_schema_version
from tests.support.plans import capability, plan, run_cli, step
from tests.support.tool_server import ScriptedToolServer, ToolReply

V2_COLUMNS = {("executions", "rerun_of"), ("attempts", "recovery"), ("attempts", "impact")}


def _columns(conn: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    return set(conn.execute(
        "SELECT table_name, column_name FROM duckdb_columns() "
        "WHERE database_name = current_database()"
    ).fetchall())  # fmt: skip


def make_v1_store(path: Path, base_url: str) -> None:
    """A version-1 store holding one partial execution: step-1 succeeded, step-2 failed."""
    document = plan(base_url, {"search": capability("search"), "book": capability("book")},
                    [step("step-1", "search", {"city": "Paris"}),
                     step("step-2", "book", {"city": "{{step-1.data.code}}"})])  # fmt: skip
    snapshot = parse_plan(document).to_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = duckdb.connect(str(path))
    try:
        for statement in MIGRATIONS[0].statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_info VALUES ('schema_version', '1')")
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
            "INSERT INTO attempts (execution_id, step_id, n, dispatched, status, action, "
            "rule_id) VALUES ('20260101-000000-v1', 'step-1', 1, true, 200, 'success', "
            "'success.2xx'), ('20260101-000000-v1', 'step-2', 1, true, 409, 'stop_refused', "
            "'refused.explicit_false')"
        )
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


def test_a_v1_store_migrates_to_v2_on_open_keeping_its_rows(v1_store: Path) -> None:
    assert SCHEMA_VERSION >= 2
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

