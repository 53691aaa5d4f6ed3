"""Opening a store: path resolution, schema versions, and bad files refused without a write."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from console import cmd_explain, cmd_ls
from store.connection import resolve_db_path
from store.errors import StoreOpenError
from store.queries import open_store
from store.recorder import StoreRecorder
from store.schema import SCHEMA_VERSION, stored_schema_version


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
