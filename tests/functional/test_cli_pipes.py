"""The CLI in shell pipelines: a reader that goes away early, and `--samples` before a command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli.main import EXIT_STDOUT_CLOSED
from console.samples import prepare_sample_store, sample_execution_ids
from tests.support.plans import capability, plan, run_subprocess, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply

SCRIPT = Path(sys.executable).with_name("truva-console")


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_sample_store(tmp_path_factory.mktemp("samples") / "samples.duckdb")


def _into_closed_pipe(*argv: str) -> tuple[int, str]:
    """Run `truva-console ARGV` with stdout a pipe whose reader is already gone (`| head -c0`).

    The read end is closed before the child starts, so its first write meets a closed pipe
    every time, however small the output.
    """
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        child = subprocess.run([str(SCRIPT), *argv], stdout=write_end, stderr=subprocess.PIPE,
                               text=True, timeout=120)  # fmt: skip
    finally:
        os.close(write_end)
    return child.returncode, child.stderr


@pytest.mark.parametrize(
    "command",
    [["ls", "--json"], ["ls"], ["explain", "EXEC"], ["explain", "EXEC", "--json"]],
    ids=["ls_json", "ls_table", "explain", "explain_json"],
)
def test_a_closed_pipe_ends_a_reading_command_quietly(sample_db: Path, command: list[str]):
    execution_id = sample_execution_ids()["scenario-a-invalid-city"]
    argv = [execution_id if word == "EXEC" else word for word in command]
    code, stderr = _into_closed_pipe("--db", str(sample_db), *argv)
    assert (code, stderr) == (EXIT_STDOUT_CLOSED, "")


def test_a_closed_pipe_ends_run_quietly_after_recording(tmp_path: Path):
    db = tmp_path / "debug.duckdb"
    with ScriptedToolServer() as server:
        server.script("/capabilities/lookup", ToolReply.ok({"city": "Paris"}))
        document = plan(server.base_url, {"lookup": capability("lookup")},
                        [step("step-1", "lookup")])  # fmt: skip
        plan_path = write_plan(tmp_path, document)
        code, stderr = _into_closed_pipe("run", str(plan_path), "--json", "--db", str(db))
    assert (code, stderr) == (EXIT_STDOUT_CLOSED, "")
    listed = run_subprocess("ls", "--json", "--db", str(db))
    assert [row["status"] for row in json.loads(listed.stdout)["executions"]] == ["succeeded"]


def test_a_reader_that_stops_after_100_bytes_gets_them_and_no_traceback(sample_db: Path):
    """`ls --json | head -c 100` through a real shell pipeline; the output is far over 100 B."""
    pipeline = f"'{SCRIPT}' --db '{sample_db}' ls --json | head -c 100; exit ${{PIPESTATUS[0]}}"
    child = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, timeout=120)
    assert len(child.stdout) == 100 and child.stdout.startswith('{\n  "executions": [')
    assert "Traceback" not in child.stderr and "BrokenPipe" not in child.stderr
    assert child.returncode in (0, EXIT_STDOUT_CLOSED)


# ------------------------------------------------------------------------------- --samples


def test_samples_before_ls_lists_the_sample_executions(tmp_path: Path):
    environment = {**os.environ, "TRUVA_DB": str(tmp_path / "empty.duckdb")}
    result = run_subprocess("--samples", "ls", "--json", "--limit", "100", env=environment)
    assert result.returncode == 0, result.stderr
    listed = {row["execution_id"] for row in json.loads(result.stdout)["executions"]}
    assert listed == set(sample_execution_ids().values())
    assert not (tmp_path / "empty.duckdb").exists()


def test_samples_before_explain_and_sql_read_the_sample_store():
    execution_id = sample_execution_ids()["scenario-b-rate-limit"]
    explained = run_subprocess("--samples", "explain", execution_id)
    assert explained.returncode == 0, explained.stderr
    assert "transient.retry_same" in explained.stdout
    counted = run_subprocess("--samples", "sql", "SELECT count(*) AS n FROM executions",
                             "--format", "json")  # fmt: skip
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout) == [{"n": len(sample_execution_ids())}]


def test_samples_before_export_writes_a_sample_bundle(tmp_path: Path):
    execution_id = sample_execution_ids()["flower-mound"]
    bundle = tmp_path / "flower.truva.zip"
    result = run_subprocess("--samples", "export", execution_id, "-o", str(bundle))
    assert result.returncode == 0, result.stderr
    assert bundle.is_file()


SAMPLES_REFUSAL = ("truva-console: --samples works with ls, explain, sql, export, replay, rerun, "
                   "whatif, lint, not with")


def test_the_consoles_rerun_twin_on_the_samples_runs():
    # The execution screen's re-run twin on the samples is `--samples rerun EXEC`.
    execution_id = sample_execution_ids()["no-correction"]  # failed: its step is re-run
    result = run_subprocess("--samples", "rerun", execution_id, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rerun_of"] == execution_id


def test_samples_before_whatif_and_lint_read_the_sample_store():
    # The TUI's what-if and lint screens name these twins when it runs on the samples.
    whatif = run_subprocess("--samples", "whatif", "--config", "max_attempts=5", "--json")
    assert whatif.returncode == 0, whatif.stderr
    assert json.loads(whatif.stdout)["decisions"] > 0
    lint = run_subprocess("--samples", "lint", "--json")
    assert lint.returncode in (0, 1), lint.stderr  # 1 when a sample tool fails a check
    graded = {card["tool"] for card in json.loads(lint.stdout)["tools"]}
    assert {"weather", "currency"} <= graded


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--samples", "run", "plan.json"],
         f"{SAMPLES_REFUSAL} 'run'"),
        (["--samples", "import", "x.truva.zip"],
         f"{SAMPLES_REFUSAL} 'import'"),
        (["--samples", "ls", "--db", "other.duckdb"],
         "truva-console: --samples and --db name two stores; give one of them"),
    ],
    ids=["run", "import", "with_db"],
)
def test_samples_with_a_command_it_cannot_serve_is_one_line(argv: list[str], message: str):
    result = run_subprocess(*argv)
    assert result.returncode == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_ctrl_c_during_export_is_one_line_and_leaves_no_file(
    sample_db: Path, tmp_path: Path, monkeypatch, capsys
):
    """Ctrl-C where no command cancels on its own: exit 130, one line, no traceback."""
    import store.bundle.export as bundle_export
    from console.entry import main

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bundle_export, "redact_row", interrupted)
    target = tmp_path / "trace.zip"
    code = main(["--db", str(sample_db), "export", "--all", "-o", str(target)])
    stderr = capsys.readouterr().err
    assert code == 130
    assert stderr == "truva-console: interrupted (Ctrl-C)\n"
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_inside_a_duckdb_query_is_one_line_and_leaves_no_file(
    sample_db: Path, tmp_path: Path, monkeypatch, capsys
):
    """A Ctrl-C that lands inside a DuckDB query comes back as DuckDB's error, not
    KeyboardInterrupt: the same one line and exit 130. Here a real query in the export's read
    (inside its store session) is interrupted as DuckDB's SIGINT handling does; the session
    used to turn that into a store error, exit 2 (found by review)."""
    import threading

    import store.bundle.export as bundle_export
    from console.entry import main

    original = bundle_export.read_execution_rows

    def read_interrupted(conn, ids):
        threading.Timer(0.2, conn.interrupt).start()
        conn.execute("SELECT count(*) FROM range(10000000000000) a, range(1000) b").fetchall()
        return original(conn, ids)

    monkeypatch.setattr(bundle_export, "read_execution_rows", read_interrupted)
    target = tmp_path / "trace.zip"
    code = main(["--db", str(sample_db), "export", "--all", "-o", str(target)])
    stderr = capsys.readouterr().err
    assert (code, stderr) == (130, "truva-console: interrupted (Ctrl-C)\n")
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_as_duckdb_runtime_error_is_one_line_and_leaves_no_file(
    sample_db: Path, tmp_path: Path, monkeypatch, capsys
):
    """DuckDB's client raises a bare RuntimeError("Query interrupted") on some paths (seen from
    `conn.execute` when a SIGINT reached a real export)."""
    import store.bundle.export as bundle_export
    from console.entry import main

    def interrupted(*_args, **_kwargs):
        raise RuntimeError("Query interrupted")

    monkeypatch.setattr(bundle_export, "read_execution_rows", interrupted)
    target = tmp_path / "trace.zip"
    code = main(["--db", str(sample_db), "export", "--all", "-o", str(target)])
    stderr = capsys.readouterr().err
    assert (code, stderr) == (130, "truva-console: interrupted (Ctrl-C)\n")
    assert list(tmp_path.iterdir()) == []


def test_another_runtime_error_is_not_taken_for_ctrl_c(
    sample_db: Path, tmp_path: Path, monkeypatch
):
    import store.bundle.export as bundle_export
    from console.entry import main

    def broken(*_args, **_kwargs):
        raise RuntimeError("Query interrupted, said nobody")

    monkeypatch.setattr(bundle_export, "redact_row", broken)
    with pytest.raises(RuntimeError, match="said nobody"):
        main(["--db", str(sample_db), "export", "--all", "-o", str(tmp_path / "t.zip")])


def test_version_names_truva_console_duckdb_and_python():
    import platform
    from importlib.metadata import version

    from executor import __version__

    result = run_subprocess("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"truva-console {__version__} (DuckDB {version('duckdb')}, "
                             f"Python {platform.python_version()})\n")
