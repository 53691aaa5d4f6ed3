"""`truva-console sql`, `export --parquet`, and a store file another process holds, via the CLI."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from store.queries import open_store
from store.recorder import StoreRecorder
from tests.support.demo_store import copy_store
from tests.support.events_factory import small_execution
from tests.support.holder import HOLDER_NAME, hold_file, release
from tests.support.plans import run_cli, run_subprocess

EXECUTION_ID = "exec-sql-0001"
SPOOLED_ID = "exec-sql-spooled"






@pytest.fixture(scope="module")
def one_execution(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one execution, recorded once per module (tests get copies)."""
    return record(tmp_path_factory.mktemp("one-execution") / "debug.duckdb", EXECUTION_ID)


@pytest.fixture
def held(one_execution: Path, tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A store with one execution, held open by another process for the test."""
    db = copy_store(one_execution, tmp_path / "debug.duckdb")
    holder = hold_file(db)
    try:
        yield db, holder
    finally:
        release(holder)


def record(db: Path, execution_id: str, *, lock_timeout_s: float = 2.0) -> Path:
    with StoreRecorder(db, lock_timeout_s=lock_timeout_s) as recorder:
        for event in small_execution(execution_id):
            recorder.record(event)
    return db


def segments(db: Path) -> list[Path]:
    folder = db.with_name(db.name + ".spool") / "segments"
    return sorted(folder.iterdir()) if folder.exists() else []


@pytest.fixture(scope="module")
def spooled_template(one_execution: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One execution in the database and one only in spool segments, made once per module."""
    db = copy_store(one_execution, tmp_path_factory.mktemp("spooled") / "debug.duckdb")
    holder = hold_file(db)
    try:
        record(db, SPOOLED_ID, lock_timeout_s=0.05)
    finally:
        release(holder)
    assert segments(db), "the recorder could not get the file, so its events wait in the spool"
    return db


@pytest.fixture
def spooled_store(spooled_template: Path, tmp_path: Path) -> Path:
    """A copy of the spooled store (its file and spool) in tmp_path: the spool not yet ingested."""
    db = copy_store(spooled_template, tmp_path / "debug.duckdb")
    assert segments(db), "the copy has the spooled segments"
    return db


def test_sql_answers_on_a_store_with_spooled_segments(spooled_store: Path) -> None:
    result = run_cli(
        "sql", "SELECT execution_id, status FROM executions ORDER BY execution_id",
        "--db", str(spooled_store), "--format", "json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == [
        {"execution_id": EXECUTION_ID, "status": "succeeded"},
        {"execution_id": SPOOLED_ID, "status": "succeeded"},
    ]
    assert segments(spooled_store) == []


def test_sql_table_format_aligns_columns_and_counts_rows(spooled_store: Path) -> None:
    result = run_cli(
        "sql", "SELECT execution_id, status, NULL AS nothing FROM executions "
        "ORDER BY execution_id", "--db", str(spooled_store),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "execution_id      status     nothing",
        "----------------  ---------  -------",
        f"{EXECUTION_ID}     succeeded  NULL",
        f"{SPOOLED_ID}  succeeded  NULL",
        "(2 rows)",
    ]


def test_sql_table_cuts_long_cells_to_one_line(spooled_store: Path) -> None:
    result = run_cli(
        "sql", "SELECT repeat('x', 100) || chr(10) || 'next' AS long", "--db", str(spooled_store)
    )
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines()[2] == "x" * 59 + "…"


def test_sql_csv_keeps_values_whole(spooled_store: Path) -> None:
    result = run_cli(
        "sql", "SELECT 'a,b' AS text, NULL AS nothing, 'ab'::BLOB AS body, "
        "[1, 2] AS list, repeat('y', 100) AS long", "--db", str(spooled_store), "--format", "csv",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert list(csv.reader(io.StringIO(result.stdout))) == [
        ["text", "nothing", "body", "list", "long"],
        ["a,b", "", "ab", "[1, 2]", "y" * 100],
    ]


def test_sql_json_writes_bodies_times_and_nested_values(spooled_store: Path) -> None:
    query = (
        "SELECT '\\x00\\xff'::BLOB AS binary, encode('héllo') AS utf8, "
        "TIMESTAMPTZ '2026-01-31 14:00:05+00' AS at, {'k': 1} AS struct, 1.5::DECIMAL(4,2) AS d"
    )
    result = run_cli("sql", query, "--db", str(spooled_store), "--format", "json")
    assert result.code == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert row["binary"] == "\\x00\\xff"
    assert row["utf8"] == "héllo"
    assert row["at"].startswith("2026-01-31T14:00:05")
    assert row["struct"] == {"k": 1}
    assert row["d"] == "1.50"


def test_sql_writes_parquet_to_a_file(spooled_store: Path, tmp_path: Path) -> None:
    target = tmp_path / "out" / "attempts.parquet"
    target.parent.mkdir()
    result = run_cli(
        "sql", "SELECT execution_id, step_id FROM attempts ORDER BY ALL",
        "--db", str(spooled_store), "--format", "parquet", "-o", str(target),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    table = pq.read_table(target)
    assert table.column_names == ["execution_id", "step_id"]
    assert set(table.column("execution_id").to_pylist()) == {EXECUTION_ID, SPOOLED_ID}
    assert result.stderr == f"wrote {table.num_rows} rows to {target}\n"
    assert [p.name for p in target.parent.iterdir()] == ["attempts.parquet"]


def test_sql_writes_csv_to_a_file(spooled_store: Path, tmp_path: Path) -> None:
    target = tmp_path / "count.csv"
    result = run_cli(
        "sql", "SELECT count(*) AS n FROM executions", "--db", str(spooled_store),
        "--format", "csv", "-o", str(target),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert (result.stdout, target.read_text()) == ("", "n\n2\n")


@pytest.mark.parametrize("output_format", ["csv", "json", "parquet", "table"])
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_sql_refuses_an_output_that_is_not_a_regular_file(
    spooled_store: Path, tmp_path: Path, output_format: str, kind: str
) -> None:
    # A rename onto it replaced a device or pipe with a regular file (as root, /dev/full).
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "target"
    os.mkfifo(target) if kind == "fifo" else target.mkdir()
    result = run_cli("sql", "SELECT 1 AS n", "--db", str(spooled_store),
                     "--format", output_format, "-o", str(target))  # fmt: skip
    assert result.code == 2
    expected = ("is a directory, expected a file name" if kind == "directory" else
                "exists and is not a regular file (a device, pipe or socket); choose a file name")
    assert result.stderr == f"truva-console: sql: {target}: {expected}\n"
    assert (target.is_fifo() if kind == "fifo" else target.is_dir())
    assert sorted(p.name for p in target.parent.iterdir()) == ["target"]


@pytest.mark.parametrize("output_format", ["csv", "parquet"])
def test_sql_writes_through_a_symbolic_link_and_keeps_it(
    spooled_store: Path, tmp_path: Path, output_format: str
) -> None:
    real = tmp_path / "real"
    real.write_text("old\n")
    link = tmp_path / "link"
    link.symlink_to(real)
    result = run_cli("sql", "SELECT 7 AS n", "--db", str(spooled_store),
                     "--format", output_format, "-o", str(link))  # fmt: skip
    assert result.code == 0, result.stderr
    assert link.is_symlink() and link.resolve() == real
    if output_format == "csv":
        assert real.read_text() == "n\n7\n"
    else:
        assert pq.read_table(real).column("n").to_pylist() == [7]


@pytest.mark.parametrize("output_format", ["csv", "json", "table", "parquet"])
def test_sql_output_keeps_the_mode_of_the_file_it_replaces_or_the_umask(
    spooled_store: Path, tmp_path: Path, output_format: str
) -> None:
    """Found by an outside check: every `sql -o` file was 0600 (mkstemp's), an existing
    file's 0644 was reset to it too; a bundle or `export --parquet` file is not."""
    existing, new = tmp_path / "shared.out", tmp_path / "new.out"
    existing.write_text("old\n")
    existing.chmod(0o640)
    umask = os.umask(0o022)
    try:
        for target in (existing, new):
            result = run_cli("sql", "SELECT 1 AS n", "--db", str(spooled_store),
                             "--format", output_format, "-o", str(target))  # fmt: skip
            assert result.code == 0, result.stderr
    finally:
        os.umask(umask)
    assert (existing.stat().st_mode & 0o777, new.stat().st_mode & 0o777) == (0o640, 0o644)


def test_sql_output_dash_is_stdout(spooled_store: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli("sql", "SELECT 1 AS n", "--db", str(spooled_store), "--format", "csv",
                     "-o", "-")  # fmt: skip
    assert (result.code, result.stdout) == (0, "n\n1\n")
    assert not (tmp_path / "-").exists()


def test_sql_parquet_needs_an_output_file(spooled_store: Path) -> None:
    result = run_cli("sql", "SELECT 1", "--db", str(spooled_store), "--format", "parquet")
    assert result.code == 2
    assert result.stderr == (
        "truva-console: sql: --format parquet needs -o FILE (Parquet is not written to a "
        "terminal)\n"
    )


@pytest.mark.parametrize(
    ("query", "error"),
    [
        pytest.param("SELEC 1", 'Parser Error: syntax error at or near "SELEC"', id="syntax"),
        pytest.param(
            "SELECT * FROM no_such_table",
            "Catalog Error: Table with name no_such_table does not exist!",
            id="unknown-table",
        ),
        pytest.param(
            "DELETE FROM executions",
            'Invalid Input Error: Cannot execute statement of type "DELETE" on database',
            id="read-only",
        ),
    ],
)
def test_sql_bad_sql_is_one_line_and_exit_2(
    spooled_store: Path, tmp_path: Path, query: str, error: str
) -> None:
    target = tmp_path / "never.parquet"
    result = run_cli("sql", query, "--db", str(spooled_store))
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"truva-console: sql: {error}")
    assert result.stderr.count("\n") == 1
    as_parquet = run_cli(
        "sql", query, "--db", str(spooled_store), "--format", "parquet", "-o", str(target)
    )
    assert as_parquet.code == 2
    assert list(tmp_path.glob("*never*")) == []
    assert run_cli("sql", "SELECT count(*) FROM executions", "--db", str(spooled_store),
                   "--format", "csv").stdout == "count_star()\n2\n"  # fmt: skip


def test_sql_prompt_reads_statements_from_stdin(spooled_store: Path) -> None:
    script = (
        "SELECT count(*) AS n\n  FROM executions;\n"
        "SELEC oops;\n"
        "\n"
        "SELECT 'second' AS s;\n"
        "\\q\n"
        "SELECT 'never' AS s;\n"
    )
    result = run_subprocess("sql", "--db", str(spooled_store), "--format", "csv", input=script)
    assert result.stdout == "n\n2\ns\nsecond\n"
    assert re.fullmatch(
        r'truva-console: sql: Parser Error: syntax error at or near "SELEC"[^\n]*\n',
        result.stderr,
    ), result.stderr
    assert result.returncode == 2


def test_sql_prompt_runs_what_is_left_at_end_of_input(spooled_store: Path) -> None:
    result = run_subprocess("sql", "--db", str(spooled_store), input="SELECT 7 AS seven")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == ["seven", "-----", "7", "(1 row)"]


def test_export_parquet_writes_every_table_and_view(spooled_store: Path, tmp_path: Path) -> None:
    target = tmp_path / "parquet"
    result = run_cli("export", "--parquet", str(target), "--db", str(spooled_store), "--json")
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    with open_store(spooled_store).session() as conn:
        tables = {name for (name,) in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT internal").fetchall()}
        views = {name for (name,) in conn.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        attempts = conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
    assert {"executions", "steps", "attempts", "llm_calls", "events"} <= tables
    assert "backoffs" in views
    written = {entry["name"]: entry for entry in document["files"]}
    assert set(written) == tables | views
    assert {entry["kind"] for name, entry in written.items() if name in views} == {"view"}
    assert sorted(p.name for p in target.iterdir()) == sorted(f"{n}.parquet" for n in written)
    executions = pq.read_table(target / "executions.parquet")
    assert sorted(executions.column("execution_id").to_pylist()) == [EXECUTION_ID, SPOOLED_ID]
    assert pq.read_table(target / "attempts.parquet").num_rows == attempts
    assert written["attempts"]["rows"] == attempts
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_export_parquet_refuses_to_replace_files_without_force(
    spooled_store: Path, tmp_path: Path
) -> None:
    target = tmp_path / "parquet"
    target.mkdir()
    (target / "executions.parquet").write_text("mine")
    refused = run_cli("export", "--parquet", str(target), "--db", str(spooled_store))
    assert refused.code == 2
    assert refused.stderr == (
        f"truva-console: {target}: already holds executions.parquet (pass --force to replace "
        "the files of this export)\n"
    )
    assert [p.name for p in target.iterdir()] == ["executions.parquet"]
    forced = run_cli("export", "--parquet", str(target), "--db", str(spooled_store), "--force")
    assert forced.code == 0, forced.stderr
    assert pq.read_table(target / "executions.parquet").num_rows == 2


def test_export_parquet_takes_no_bundle_options(spooled_store: Path, tmp_path: Path) -> None:
    result = run_cli("export", "--parquet", str(tmp_path / "p"), "--all", "--db",
                     str(spooled_store))  # fmt: skip
    assert result.code == 2
    assert "--parquet DIR writes every table whole" in result.stderr
    assert not (tmp_path / "p").exists()


def test_export_without_output_or_parquet_is_one_line(spooled_store: Path) -> None:
    result = run_cli("export", "--all", "--db", str(spooled_store))
    assert (result.code, result.stderr) == (
        2, "truva-console: export: give -o FILE, the bundle to write (or --parquet DIR)\n"
    )


# --------------------------------------------------------------- a held file


def test_ls_names_the_process_holding_the_file(held: tuple[Path, subprocess.Popen[str]]) -> None:
    db, holder = held
    result = run_cli("ls", "--db", str(db))
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"truva-console: {HOLDER_NAME} (pid {holder.pid}) holds {db}; close it, or use "
        "'truva-console sql' to query the store\n"
    )


def test_sql_on_a_held_file_does_not_advise_itself(
    held: tuple[Path, subprocess.Popen[str]],
) -> None:
    # Was "…; close it, or use 'truva-console sql' to query the store", said by that very
    # command (found by an outside check).
    db, holder = held
    result = run_cli("sql", "SELECT count(*) FROM executions", "--db", str(db))
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr == (
        f"truva-console: {HOLDER_NAME} (pid {holder.pid}) holds {db}; close it, then run the query "
        "again\n"
    )


def test_run_records_into_the_spool_while_the_file_is_held_and_says_so(
    held: tuple[Path, subprocess.Popen[str]], tmp_path: Path, tool_server
) -> None:
    from tests.support.plans import chain_plan, write_plan
    from tests.support.tool_server import ToolReply

    db, holder = held
    tool_server.script("/capabilities/work", ToolReply.ok({"done": True}))
    plan = write_plan(tmp_path, chain_plan(tool_server.base_url, 1))
    result = run_cli("run", str(plan), "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    left = segments(db)
    assert left
    assert result.stderr == (
        f"truva-console: {HOLDER_NAME} (pid {holder.pid}) holds {db}; close it, or use "
        f"'truva-console sql' to query the store; {len(left)} recorded "
        f"{'segment waits' if len(left) == 1 else 'segments wait'} in "
        f"{left[0].parent} (run 'truva-console ls --db {db}' to ingest them)\n"
    )
    release(holder)
    listed = run_cli("ls", "--db", str(db), "--json")
    ids = {row["execution_id"] for row in json.loads(listed.stdout)["executions"]}
    assert ids == {EXECUTION_ID, result.json()["execution_id"]}


def test_ls_names_a_holder_by_the_script_it_runs(one_execution: Path, tmp_path: Path) -> None:
    db = copy_store(one_execution, tmp_path / "debug.duckdb")
    script = tmp_path / "harlequin"
    script.write_text(
        f"#!{sys.executable}\nimport duckdb, sys\nc = duckdb.connect(sys.argv[1])\n"
        "print('locked', flush=True)\nsys.stdin.readline()\n"
    )
    script.chmod(0o755)
    holder = subprocess.Popen([str(script), str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        result = run_cli("ls", "--db", str(db))
    finally:
        release(holder)
    assert result.code == 2
    assert result.stderr.startswith(f"truva-console: harlequin (pid {holder.pid}) holds {db};")


STREAMED_QUERIES = {
    # 5,000 rows: three of SqlSession.batches' 2,048-row batches; NULLs, text, nested values.
    "batches": "SELECT i, CASE WHEN i % 7 = 0 THEN NULL ELSE 'v,\"' || i || '\"' END AS text, "
               "[i, i + 1] AS pair, {'k': i} AS record FROM range(5000) t(i)",
    "stored_rows": "SELECT * FROM attempts ORDER BY execution_id, step_id, n",
    "no_rows": "SELECT 1 AS n WHERE false",
}


@pytest.mark.parametrize("output_format", ["csv", "json"])
@pytest.mark.parametrize("name", sorted(STREAMED_QUERIES))
def test_sql_streams_csv_and_json_to_a_file_as_it_prints_them(
    spooled_store: Path, tmp_path: Path, name: str, output_format: str
) -> None:
    # -o writes batch by batch (memory stays one batch); the file holds what stdout shows.
    query = STREAMED_QUERIES[name]
    printed = run_cli("sql", query, "--db", str(spooled_store), "--format", output_format)
    assert printed.code == 0, printed.stderr
    target = tmp_path / f"rows.{output_format}"
    written = run_cli(
        "sql", query, "--db", str(spooled_store), "--format", output_format, "-o", str(target)
    )
    assert written.code == 0, written.stderr
    assert target.read_text(encoding="utf-8") == printed.stdout
    if name == "batches" and output_format == "json":
        assert len(json.loads(printed.stdout)) == 5000


def test_sql_a_statement_failing_while_streamed_leaves_no_file(
    spooled_store: Path, tmp_path: Path
) -> None:
    target = tmp_path / "rows.csv"
    failing = "SELECT CASE WHEN i < 4000 THEN i ELSE error('row ' || i) END FROM range(5000) t(i)"
    result = run_cli("sql", failing, "--db", str(spooled_store), "--format", "csv", "-o",
                     str(target))  # fmt: skip
    assert result.code == 2
    assert result.stderr.startswith("truva-console: sql: ") and "row 4000" in result.stderr
    assert result.stderr.count("\n") == 1
    assert not target.exists() and list(tmp_path.glob(".rows.csv.*")) == []


def test_sql_a_statement_failing_after_its_first_batch_is_one_line(spooled_store: Path) -> None:
    # DuckDB's error after the first batch comes through Arrow as OSError: it was a traceback.
    failing = "SELECT CASE WHEN i < 4000 THEN i ELSE error('row ' || i) END FROM range(5000) t(i)"
    result = run_cli("sql", failing, "--db", str(spooled_store))
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr == "truva-console: sql: Invalid Input Error: row 4000\n"


@pytest.mark.parametrize("to_file", [False, True], ids=["stdout", "file"])
def test_sql_a_value_python_cannot_represent_is_one_line(
    spooled_store: Path, tmp_path: Path, to_file: bool
) -> None:
    # DuckDB's infinite timestamp has no Python datetime: it was an OverflowError traceback.
    target = tmp_path / "t.csv"
    output = ["--format", "csv", "-o", str(target)] if to_file else []
    result = run_cli("sql", "SELECT 'infinity'::TIMESTAMP AS t", "--db", str(spooled_store),
                     *output)  # fmt: skip
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr == (
        "truva-console: sql: column 't' holds a value Python cannot represent (date value out "
        "of range); cast it to VARCHAR to see it\n"
    )
    assert not target.exists()
