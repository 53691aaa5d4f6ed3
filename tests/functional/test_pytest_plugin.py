"""The pytest plugin through pytester: `--truva-db PATH` records each test's API runs, labelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.tui.widgets.filter_bar import parse_filter
from executor import api
from store.queries import open_store
from tests.support.plans import run_cli

pytest_plugins = ["pytester"]
# Inner runs share this process: the modules the plugin uses are imported here first, so that
# pytester's restoring of sys.modules after each inner run keeps one copy of them; and the
# snapshot plugin's session state does not survive a second session.
assert api.record_runs
QUIET = ("-p", "no:cacheprovider", "-p", "no:textual-snapshot",
         "-o", "asyncio_default_fixture_loop_scope=function")

INNER_TESTS = '''
import asyncio

import pytest

from console.demo.server import DemoHTTPServer, DemoResponse
from executor import Plan, Step, Tool, call_tool, run_plan_sync


@pytest.fixture
def echo():
    server = DemoHTTPServer("echo", lambda r: DemoResponse(200, {"success": True, "data": r.json}))
    yield Tool("echo", server.base_url)
    server.close()


def test_one(echo):
    plan = Plan([Step("step-1", echo.capability("say"), {"word": "one"})], query="say one")
    assert run_plan_sync(plan).status == "succeeded"


@pytest.mark.parametrize("word", ["a", "b"])
def test_two(echo, word):
    assert asyncio.run(call_tool(echo, "say", {"word": word}))["data"] == {"word": word}


def test_without_the_api():
    assert True
'''


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_inner=INNER_TESTS)
    return pytester


def test_truva_db_records_every_api_run_labelled_with_its_test(
    inner: pytest.Pytester, tmp_path: Path
) -> None:
    db = tmp_path / "ci.duckdb"
    result = inner.runpytest("--truva-db", str(db), *QUIET)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([f"truva: 3 execution(s) recorded into {db} *"])
    rows = open_store(db).list_executions().executions
    assert sorted(row.labels["test"] for row in rows) == [
        "test_inner.py::test_one", "test_inner.py::test_two[a]", "test_inner.py::test_two[b]"]


def test_ls_shows_the_label_and_filters_by_test(inner: pytest.Pytester, tmp_path: Path) -> None:
    db = tmp_path / "ci.duckdb"
    inner.runpytest("--truva-db", str(db), *QUIET).assert_outcomes(passed=4)
    listed = run_cli("ls", "--db", str(db), "--test", "test_two")
    assert listed.code == 0, listed.stderr
    assert "[test=test_inner.py::test_two[a]]" in listed.stdout
    assert "[test=test_inner.py::test_two[b]]" in listed.stdout
    assert "test_one" not in listed.stdout
    assert listed.stdout.rstrip().endswith("1-2 of 2")
    parsed = parse_filter("test:test_one")
    assert parsed.ls_args == ("--test", "test_one")
    (row,) = open_store(db).list_executions(parsed.filters).executions
    assert (row.labels, row.query) == ({"test": "test_inner.py::test_one"}, "say one")


def test_the_plugin_is_off_without_truva_db(inner: pytest.Pytester) -> None:
    inner.makeconftest('''
def pytest_sessionfinish(session):
    assert not session.config.pluginmanager.has_plugin("truva-recording")
    from executor import api
    assert api._ambient_recorders == []
''')
    result = inner.runpytest(*QUIET)
    result.assert_outcomes(passed=4)
    assert "truva:" not in result.stdout.str()
    assert result.ret == 0


def test_a_store_that_cannot_be_opened_is_a_usage_error(
    inner: pytest.Pytester, tmp_path: Path
) -> None:
    not_a_store = tmp_path / "notes.duckdb"
    not_a_store.write_text("these are my notes\n")
    result = inner.runpytest("--truva-db", str(not_a_store), *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --truva-db: {not_a_store}: *"])
    assert not_a_store.read_text() == "these are my notes\n"


def test_the_test_labels_travel_in_a_bundle(inner: pytest.Pytester, tmp_path: Path) -> None:
    db, bundle, target = tmp_path / "ci.duckdb", tmp_path / "ci.zip", tmp_path / "copy.duckdb"
    inner.runpytest("--truva-db", str(db), *QUIET).assert_outcomes(passed=4)
    exported = run_cli("export", "--db", str(db), "--all", "-o", str(bundle))
    assert exported.code == 0, exported.stderr
    imported = run_cli("import", "--db", str(target), str(bundle))
    assert imported.code == 0, imported.stderr
    listed = run_cli("ls", "--db", str(target), "--test", "test_one", "--json")
    assert [row["labels"] for row in listed.json()["executions"]] == [
        {"test": "test_inner.py::test_one"}]
