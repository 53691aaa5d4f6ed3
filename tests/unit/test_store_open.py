"""Opening a store: path resolution, schema versions, and bad files refused without a write."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import store.connection
from console.cli import explain as cmd_explain
from console.cli import ls as cmd_ls
from store.connection import resolve_db_path, store_paths
from store.errors import StoreOpenError
from store.ingest import encode_events
from store.queries import open_store
from store.recorder import StoreRecorder
from store.schema import SCHEMA_VERSION, stored_schema_version
from store.spool import WriterIdentity, segment_name, write_segment
from tests.support.events_factory import small_execution
from tests.support.tool_server import ToolReply


@pytest.mark.parametrize(
    ("cli_value", "env", "expected"),
    [
        ("cli.duckdb", {"TRUVA_DB": "env.duckdb"}, Path("cli.duckdb")),
        (None, {"TRUVA_DB": "env.duckdb"}, Path("env.duckdb")),
        (None, {}, Path(".truva/debug.duckdb")),
        ("", {"TRUVA_DB": ""}, Path(".truva/debug.duckdb")),
    ],
    ids=["flag-wins", "env-var", "default", "empty-values-ignored"],
)
def test_resolve_db_path(cli_value: str | None, env: dict[str, str], expected: Path) -> None:
    assert resolve_db_path(cli_value, env) == expected


def make_text_file(path: Path) -> None:
    path.write_text("these are my notes, not a database\n")


def make_empty_file(path: Path) -> None:
    path.write_bytes(b"")


def make_directory(path: Path) -> None:
    path.mkdir()


def make_newer_store(path: Path) -> None:
    StoreRecorder(path).close()
    conn = duckdb.connect(str(path))
    conn.execute("UPDATE schema_info SET value = '999' WHERE key = 'schema_version'")
    conn.close()


def make_foreign_duckdb(path: Path) -> None:
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.close()


def make_empty_duckdb(path: Path) -> None:
    duckdb.connect(str(path)).close()


def make_corrupt_duckdb(path: Path) -> None:
    make_foreign_duckdb(path)
    data = bytearray(path.read_bytes())
    data[4096:8192] = b"\x5a" * 4096  # keep the magic, wreck the database headers
    path.write_bytes(bytes(data))


BAD_FILES = [
    ("text-file", make_text_file, "not a DuckDB database (no DuckDB header)"),
    ("empty-file", make_empty_file, "not a DuckDB database (empty file)"),
    ("directory", make_directory, "is a directory"),
    ("newer-schema", make_newer_store,
     f"schema version 999 is newer than this truva-console understands ({SCHEMA_VERSION}); "
     "upgrade truva-console"),
    ("foreign-duckdb", make_foreign_duckdb, "a DuckDB database but not a truva-console store"),
    ("empty-duckdb", make_empty_duckdb, "an empty DuckDB database, not a truva-console store"),
    ("corrupt-duckdb", make_corrupt_duckdb, "cannot open"),
]  # fmt: skip


def snapshot(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


@pytest.mark.parametrize(
    ("make", "message"),
    [(make, message) for _, make, message in BAD_FILES],
    ids=[name for name, _, _ in BAD_FILES],
)
def test_bad_file_is_refused_and_left_untouched(tmp_path: Path, make, message: str) -> None:
    path = tmp_path / "x.duckdb"
    make(path)
    before = snapshot(path)

    with pytest.raises(StoreOpenError) as raised:
        open_store(path)

    assert message in str(raised.value)
    assert str(raised.value).startswith(str(path))
    assert "\n" not in str(raised.value)
    assert snapshot(path) == before


@pytest.mark.parametrize(
    "make",
    [make for name, make, _ in BAD_FILES if name not in ("empty-duckdb",)],
    ids=[name for name, _, _ in BAD_FILES if name not in ("empty-duckdb",)],
)
def test_recorder_refuses_a_bad_file_too(tmp_path: Path, make) -> None:
    path = tmp_path / "x.duckdb"
    make(path)
    before = snapshot(path)

    with pytest.raises(StoreOpenError):
        StoreRecorder(path)

    assert snapshot(path) == before


def test_missing_file_names_the_path_and_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "debug.duckdb"

    with pytest.raises(StoreOpenError) as raised:
        open_store(path)

    assert str(raised.value) == (
        f"{path}: no such file (run 'truva-console run PLAN' to record one, or pass --db)"
    )
    assert not path.parent.exists()


def test_recorder_creates_a_store_with_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "new" / "debug.duckdb"

    StoreRecorder(path).close()

    conn = duckdb.connect(str(path))
    try:
        assert stored_schema_version(conn) == SCHEMA_VERSION
    finally:
        conn.close()


def cli(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="truva-console")
    parser.add_argument("--db")
    subparsers = parser.add_subparsers(dest="command")
    cmd_ls.add_parser(subparsers)
    cmd_explain.add_parser(subparsers)
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("make", "message"),
    [(make, message) for _, make, message in BAD_FILES] + [(None, "no such file")],
    ids=[name for name, _, _ in BAD_FILES] + ["missing"],
)
@pytest.mark.parametrize("command", [("ls",), ("explain", "exec-1")], ids=["ls", "explain"])
def test_cli_bad_store_exits_2_with_one_line(
    tmp_path: Path, capsys, make, message: str, command: tuple[str, ...]
) -> None:
    path = tmp_path / "x.duckdb"
    if make is not None:
        make(path)
    before = snapshot(path)
    args = cli("--db", str(path), *command)

    exit_code = args.handler(args)

    captured = capsys.readouterr()
    assert exit_code == 2
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"truva-console: {path}")
    assert message in captured.err
    assert snapshot(path) == before


def test_store_package_imports_no_ui_libraries() -> None:
    code = (
        "import sys, store, store.queries, store.recorder, store.ingest, store.spool; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')); "
        "print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_a_named_pipe_is_refused_without_reading_from_it(tmp_path: Path) -> None:
    path = tmp_path / "x.duckdb"
    os.mkfifo(path)
    # A writer keeps the pipe from blocking; the bytes in it show whether anyone read them.
    descriptor = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(descriptor, b"0123456789abcdef")
        with pytest.raises(StoreOpenError) as raised:
            open_store(path)
        unread = os.read(descriptor, 64)
    finally:
        os.close(descriptor)

    assert str(raised.value) == f"{path}: is a named pipe, expected a DuckDB database file"
    assert unread == b"0123456789abcdef"


def record_one_execution(path: Path) -> None:
    with StoreRecorder(path) as recorder:
        for event in small_execution("exec-one"):
            recorder.record(event)


@pytest.mark.parametrize("size", [1024 * 1024, 2 * 1024 * 1024], ids=["1-mib", "2-mib"])
@pytest.mark.parametrize("command", [("ls",), ("explain", "exec-one")], ids=["ls", "explain"])
def test_cli_on_a_truncated_store_exits_2_with_one_line(
    tmp_path: Path, capsys, size: int, command: tuple[str, ...]
) -> None:
    path = tmp_path / "x.duckdb"
    record_one_execution(path)
    os.truncate(path, size)  # the header and the schema still read; the tables do not
    args = cli("--db", str(path), *command)

    exit_code = args.handler(args)

    captured = capsys.readouterr()
    assert (exit_code, captured.out) == (2, "")
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"truva-console: {path}: the file is truncated: {size:,} "
                                   "bytes where the blocks it uses need ")  # fmt: skip


@pytest.mark.parametrize("command", [("sql", "SELECT 1"), ("run",)], ids=["sql", "run"])
def test_a_truncated_store_is_refused_before_anything_is_read_or_sent(
    tmp_path: Path, command: tuple[str, ...], tool_server
) -> None:
    """Found by an outside check: `run` into a store cut in half made its tool calls, then
    could not ingest them, and from then on every `sql` of the store was refused."""
    from tests.support.plans import capability, plan, run_subprocess, step, write_plan

    path = tmp_path / "x.duckdb"
    record_one_execution(path)
    os.truncate(path, path.stat().st_size // 2)
    before = path.read_bytes()
    tool_server.script("/capabilities/x", ToolReply.ok({"x": 1}))
    if command == ("run",):
        command = ("run", str(write_plan(tmp_path, plan(
            tool_server.base_url, {"x": capability("x")}, [step("step-1", "x", {})]))))
    ran = run_subprocess("--db", str(path), *command)
    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr.startswith(f"truva-console: {path}: the file is truncated: ")
    assert tool_server.received("/capabilities/x") == []
    assert path.read_bytes() == before


def spool_is_a_file(path: Path) -> None:
    path.with_name(path.name + ".spool").write_text("not a directory")


def segments_is_a_file(path: Path) -> None:
    spool = path.with_name(path.name + ".spool")
    spool.mkdir()
    (spool / "segments").write_text("not a directory")


@pytest.mark.parametrize(
    ("break_spool", "where"),
    [(spool_is_a_file, "x.duckdb.spool/"), (segments_is_a_file, "x.duckdb.spool/segments")],
    ids=["spool-is-a-file", "segments-is-a-file"],
)
def test_a_spool_that_is_not_a_directory_is_one_line_exit_2(
    tmp_path: Path, capsys, break_spool, where: str
) -> None:
    path = tmp_path / "x.duckdb"
    record_one_execution(path)
    shutil.rmtree(path.with_name(path.name + ".spool"))
    break_spool(path)
    args = cli("--db", str(path), "ls")

    exit_code = args.handler(args)

    captured = capsys.readouterr()
    assert (exit_code, captured.out) == (2, "")
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"truva-console: {path}: cannot use its spool: ")
    assert where in captured.err and "Not a directory" in captured.err


@pytest.mark.parametrize(
    ("break_spool", "where"),
    [(spool_is_a_file, "x.duckdb.spool"), (segments_is_a_file, "x.duckdb.spool/segments")],
    ids=["spool-is-a-file", "segments-is-a-file"],
)
def test_run_into_a_spool_that_is_not_a_directory_sends_nothing(
    tmp_path: Path, break_spool, where: str, tool_server
) -> None:
    """Found by an outside check: with `segments` a file, `run` sent every request, recorded
    none of them and ended in a traceback; it now refuses before anything is sent."""
    from tests.support.plans import capability, plan, run_subprocess, step, write_plan

    path = tmp_path / "x.duckdb"
    record_one_execution(path)
    shutil.rmtree(path.with_name(path.name + ".spool"))
    break_spool(path)
    tool_server.script("/capabilities/x", ToolReply.ok({"x": 1}))
    plan_path = write_plan(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                          [step("step-1", "x", {})]))  # fmt: skip
    ran = run_subprocess("--db", str(path), "run", str(plan_path))
    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr.count("\n") == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.startswith(f"truva-console: {path}: cannot use its spool: ")
    assert where in ran.stderr and "Not a directory" in ran.stderr
    assert tool_server.received("/capabilities/x") == []


def test_a_store_opened_through_a_symlink_shares_its_spool_and_leases(tmp_path: Path) -> None:
    real = tmp_path / "real.duckdb"
    record_one_execution(real)
    link = tmp_path / "link.duckdb"
    link.symlink_to(real)

    with StoreRecorder(link, flush_interval_s=60) as recorder:
        for event in small_execution("exec-live")[:5]:
            recorder.record(event)
        recorder.flush()
        live = {
            row.execution_id: row.status for row in open_store(real).list_executions().executions
        }

    assert live["exec-live"] == "running"
    assert sorted(entry.name for entry in tmp_path.iterdir()) == [
        "link.duckdb",
        "real.duckdb",
        "real.duckdb.spool",
    ]


def test_a_store_this_process_may_not_write_is_browsed_read_only(
    tmp_path: Path, monkeypatch
) -> None:
    path = tmp_path / "ro" / "debug.duckdb"
    record_one_execution(path)
    dead = WriterIdentity(token="deadbeef00000009", pid=1, host="test-host")
    paths = store_paths(path)
    segment = write_segment(
        paths, segment_name(dead, 1), encode_events(small_execution("exec-spooled")[:5], 1, dead)
    )
    conn = duckdb.connect(str(path))
    conn.execute("UPDATE executions SET status = 'running', writer_token = 'gone'")
    conn.close()
    path.chmod(0o444)
    path.parent.chmod(0o555)
    before = path.read_bytes()
    real_access = os.access
    monkeypatch.setattr(
        store.connection.os, "access",
        lambda target, mode: False if mode & os.W_OK else real_access(target, mode),
    )  # fmt: skip
    opened_read_only = []
    real_connect = duckdb.connect

    def spy_connect(database: str, read_only: bool = False, **options):
        opened_read_only.append(read_only)
        return real_connect(database, read_only=read_only, **options)

    monkeypatch.setattr(store.connection.duckdb, "connect", spy_connect)
    try:
        page = open_store(path).list_executions()
        with pytest.raises(StoreOpenError) as refused:
            StoreRecorder(path)
    finally:
        path.parent.chmod(0o755)

    assert [(row.execution_id, row.status) for row in page.executions] == [("exec-one", "running")]
    assert opened_read_only and all(opened_read_only)
    assert segment.exists()
    assert path.read_bytes() == before
    assert not path.with_name(path.name + ".wal").exists()
    assert str(refused.value) == (
        f"{path}: not writable by this process (no write permission on the file or its directory)"
    )


@pytest.mark.parametrize("version", ["0", "3"])
def test_a_schema_version_that_does_not_fit_the_tables_is_named(
    tmp_path: Path, capsys, version: str
) -> None:
    """Found by an outside check: the line was DuckDB's `Table … already exists!`, which did not
    say that the store's recorded version was wrong."""
    import duckdb

    path = tmp_path / "x.duckdb"
    record_one_execution(path)
    with duckdb.connect(str(path)) as conn:
        conn.execute("UPDATE schema_info SET value = ? WHERE key = 'schema_version'", [version])
    before = path.read_bytes()
    args = cli("--db", str(path), "ls")

    exit_code = args.handler(args)

    captured = capsys.readouterr()
    assert (exit_code, captured.out) == (2, "")
    assert captured.err.startswith(
        f"truva-console: {path}: damaged store: schema_info says version {version}, but its "
        "tables do not fit that version (Catalog Error: ")
    assert captured.err.endswith("); nothing was changed\n")
    assert path.read_bytes() == before
