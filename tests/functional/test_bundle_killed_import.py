"""An import killed while it writes (SIGKILL: no cleanup runs) leaves rows without an
`executions` row; the next process to open the store removes them before anything reads it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb

from store.bundle import export_bundle
from store.schema import IMPORT_PENDING_KEY
from tests.support.plans import run_cli
from tests.support.tui import record_synthetic_store

# The import dies (os._exit: no except, no finally) once the `attempts` batches are committed,
# before the `executions` rows: what a SIGKILL at that moment leaves.
_KILLED_IMPORT = textwrap.dedent("""
    import os, sys
    import store.bundle.importer as importer
    original = importer._insert_table
    def insert_then_die(conn, scan, spec, *args, **kwargs):
        written = original(conn, scan, spec, *args, **kwargs)
        if spec.name == "attempts":
            os._exit(9)
        return written
    importer._insert_table = insert_then_die
    importer.import_bundle(sys.argv[1], sys.argv[2])
""")


def _counts(db: Path) -> dict[str, int]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("executions", "steps", "attempts")}  # fmt: skip


def test_the_rows_of_a_killed_import_are_never_read(tmp_path: Path) -> None:
    """Found by an outside check: after a SIGKILLed import, `ls` showed nothing new, but `lint`
    graded a tool from the orphan attempts and `sql` counted them."""
    source = record_synthetic_store(tmp_path / "source.duckdb")
    bundle = tmp_path / "b.zip"
    export_bundle(source, bundle, None)
    target = tmp_path / "target.duckdb"
    killed = subprocess.run([sys.executable, "-c", _KILLED_IMPORT, str(target), str(bundle)],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert killed.returncode == 9, killed.stderr
    left = _counts(target)
    assert left["executions"] == 0 and left["steps"] > 0 and left["attempts"] > 0  # orphans
    with duckdb.connect(str(target), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM schema_info WHERE key = ?",
                            [IMPORT_PENDING_KEY]).fetchone() == (1,)  # fmt: skip

    counted = run_cli("--db", str(target), "sql", "--format", "csv",
                      "SELECT count(*) AS n FROM attempts")  # fmt: skip
    assert counted.code == 0, counted.stderr
    assert counted.stdout.splitlines() == ["n", "0"]
    assert _counts(target) == {"executions": 0, "steps": 0, "attempts": 0}
    with duckdb.connect(str(target), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM schema_info WHERE key = ?",
                            [IMPORT_PENDING_KEY]).fetchone() == (0,)  # fmt: skip

    imported = run_cli("--db", str(target), "import", str(bundle))  # and it imports whole
    assert imported.code == 0, imported.stderr
    assert _counts(target) == _counts(source)


def test_an_import_that_ends_leaves_no_mark(tmp_path: Path) -> None:
    source = record_synthetic_store(tmp_path / "source.duckdb")
    bundle = tmp_path / "b.zip"
    export_bundle(source, bundle, None)
    target = tmp_path / "target.duckdb"
    assert run_cli("--db", str(target), "import", str(bundle)).code == 0
    with duckdb.connect(str(target), read_only=True) as conn:
        assert conn.execute("SELECT key FROM schema_info").fetchall() == [("schema_version",)]
