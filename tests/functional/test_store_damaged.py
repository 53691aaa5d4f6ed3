"""Damaged stores are refused on open in one line, by every command, before anything is sent."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from store.recorder import StoreRecorder
from store.schema import SCHEMA_VERSION, expected_shape
from tests.support.events_factory import small_execution
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ToolReply

# name, SQL that damages the store, the problem the one line names
DAMAGE = [
    ("missing-attempts", "DROP TABLE attempts", "table attempts is missing"),
    ("missing-llm-calls", "DROP TABLE llm_calls", "table llm_calls is missing"),
    ("missing-view", "DROP VIEW backoffs", "table backoffs is missing"),
    ("missing-column", "ALTER TABLE steps DROP COLUMN result", "column steps.result is missing"),
    (
        "wrong-type",
        "ALTER TABLE attempts ALTER http_status TYPE VARCHAR",
        "column attempts.http_status is VARCHAR, expected INTEGER",
    ),
    (
        "two-problems",
        "DROP TABLE llm_calls; DROP TABLE events",
        "table events is missing (and 1 more)",
    ),
]
COMMANDS = {
    "ls": ("ls",),
    "explain": ("explain", "exec-one"),
    "export": ("export", "exec-one", "-o", "{tmp}/out.zip"),
    "run": ("run", "{plan}"),
}


def damaged_store(tmp_path: Path, sql: str) -> Path:
    db = tmp_path / "damaged.duckdb"
    with StoreRecorder(db) as recorder:
        for event in small_execution("exec-one"):
            recorder.record(event)
    conn = duckdb.connect(str(db))
    conn.execute(sql)
    conn.close()
    return db


@pytest.mark.parametrize("command", list(COMMANDS), ids=list(COMMANDS))
@pytest.mark.parametrize(
    ("sql", "problem"), [row[1:] for row in DAMAGE], ids=[row[0] for row in DAMAGE]
)
def test_a_damaged_store_is_refused_in_one_line(
    tmp_path: Path, tool_server, command: str, sql: str, problem: str
) -> None:
    tool_server.script("/capabilities/search", ToolReply.ok({"hotels": ["H1"]}))
    plan_path = write_plan(
        tmp_path,
        plan(tool_server.base_url, {"search": capability("search")},
             [step("step-1", "search", {"city": "PAR"})]),
    )  # fmt: skip
    db = damaged_store(tmp_path, sql)
    before = db.read_bytes()
    argv = [part.format(tmp=tmp_path, plan=plan_path) for part in COMMANDS[command]]

    result = run_cli(*argv, "--db", str(db))

    assert (result.code, result.stdout) == (2, "")
    assert result.stderr == (
        f"truva-console: {db}: damaged store (schema version {SCHEMA_VERSION}): {problem}; "
        "nothing was changed — move the file aside to record into a new store, and read what "
        "remains with duckdb\n"
    )
    assert tool_server.received() == []
    assert db.read_bytes() == before
    assert not (tmp_path / "out.zip").exists()


def test_the_expected_shape_comes_from_the_migrations() -> None:
    shape = expected_shape()

    assert {"executions", "steps", "attempts", "llm_calls", "events", "backoffs"} <= set(shape)
    assert shape["attempts"]["http_status"] == "INTEGER" and "status" not in shape["attempts"]
    assert {"attempts_text", "llm_calls_text"} <= set(shape)
    assert shape["executions"]["execution_id"] == "VARCHAR"


@pytest.mark.parametrize("command", ["ls", "run"])
@pytest.mark.parametrize("link_at", ["file", "directory"])
def test_a_dangling_symlink_db_is_refused_and_nothing_is_created(
    tmp_path: Path, tool_server, command: str, link_at: str
) -> None:
    plan_path = write_plan(
        tmp_path,
        plan(tool_server.base_url, {"search": capability("search")},
             [step("step-1", "search", {"city": "PAR"})]),
    )  # fmt: skip
    target = tmp_path / "elsewhere"
    if link_at == "file":
        link = tmp_path / "link.duckdb"
        os.symlink(target / "debug.duckdb", link)
        db, dangling, which = link, target / "debug.duckdb", ""
    else:
        (tmp_path / "stores").symlink_to(target)
        db, dangling = tmp_path / "stores" / "debug.duckdb", target
        which = f" ({tmp_path / 'stores'})"
    argv = ("ls",) if command == "ls" else ("run", str(plan_path))

    result = run_cli(*argv, "--db", str(db))

    assert (result.code, result.stdout) == (2, "")
    assert result.stderr == (
        f"truva-console: {db}: a symbolic link{which} to {dangling}, which does not exist "
        "(nothing was created; fix the link or pass the real path with --db)\n"
    )
    assert not target.exists()
    assert tool_server.received() == []


def test_the_schema_is_checked_once_per_unchanged_file_and_again_after_any_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A session checked the schema each time (~20 ms of CPU of an execution's read); a file
    # no one wrote since this process checked it is not checked again, a written one is.
    import store.connection
    from store.errors import StoreOpenError
    from store.queries import open_store

    checks: list[str] = []
    real = store.connection.ensure_schema

    def counted(conn: duckdb.DuckDBPyConnection, label: str, **options: bool) -> int:
        checks.append(label)
        return real(conn, label, **options)

    monkeypatch.setattr(store.connection, "ensure_schema", counted)
    db = damaged_store(tmp_path, "SELECT 1")  # recorded, not damaged
    opened = open_store(db)
    checks.clear()
    for _ in range(3):
        assert opened.get_execution("exec-one").execution.execution_id == "exec-one"
    assert checks == []
    conn = duckdb.connect(str(db))
    conn.execute("ALTER TABLE steps DROP COLUMN result")
    conn.close()
    with pytest.raises(StoreOpenError, match=r"damaged store .*column steps\.result is missing"):
        opened.get_execution("exec-one")
    assert checks == [str(db)]
