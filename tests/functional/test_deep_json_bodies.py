"""A tool body of valid JSON nested far deeper than Python's recursion limit: `explain`, the
console's Response tab and the replay editor show it as text instead of failing on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.render.views import body_display
from console.replay.edits import ResponseSpecError
from console.tui.screens.execution import ExecutionScreen
from console.tui.widgets.attempt_detail import AttemptDetail
from console.tui.widgets.replay_view import edited_value, same_response_text
from tests.support.demo_store import copy_store
from tests.support.plans import capability, plan, run_subprocess, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply
from tests.support.tui import screen_loaded, tui_app

DEPTH = 200_000
DEEP = "[" * DEPTH + "]" * DEPTH


def test_body_display_shows_deep_json_as_text() -> None:
    shown = body_display(DEEP.encode())
    assert shown.text == DEEP and shown.pretty is None
    assert shown.note == f"{len(DEEP)} bytes, UTF-8 text"


def test_replay_edit_of_deep_json_is_one_line() -> None:
    with pytest.raises(ResponseSpecError, match=r"^edit: JSON nested too deeply to read$"):
        edited_value(DEEP, "edit")
    assert same_response_text(DEEP, "[]") is False


@pytest.fixture(scope="module")
def deep_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The deep body's run recorded by the real CLI once per module."""
    work = tmp_path_factory.mktemp("deep")
    with ScriptedToolServer() as tool_server:
        tool_server.script("/capabilities/search", ToolReply(status=404, body=DEEP))
        document = plan(tool_server.base_url, {"search": capability("search")},
                        [step("step-1", "search", {"city": "Paris"})])  # fmt: skip
        db = work / "store.duckdb"
        result = run_subprocess("run", str(write_plan(work, document)), "--db", str(db))
    assert result.returncode == 0, result.stderr
    listed = run_subprocess("ls", "--db", str(db), "--json")
    return db, json.loads(listed.stdout)["executions"][0]["execution_id"]


@pytest.fixture
def deep_store(deep_recording: tuple[Path, str], tmp_path: Path) -> tuple[Path, str]:
    """A copy of the module's recording in tmp_path, and its execution id."""
    db, execution_id = deep_recording
    return copy_store(db, tmp_path / "store.duckdb"), execution_id


def test_explain_and_the_response_tab_show_a_deep_json_body(deep_store) -> None:
    db, execution_id = deep_store
    explained = run_subprocess("explain", execution_id, "--db", str(db))
    assert explained.returncode == 0, explained.stderr
    assert "Traceback" not in explained.stderr
    assert "[[[[" in explained.stdout


async def test_the_console_opens_an_execution_with_a_deep_json_body(deep_store) -> None:
    db, execution_id = deep_store
    app = tui_app(db, live_refresh=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await screen_loaded(pilot)
        app.open_execution(execution_id)
        await screen_loaded(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ExecutionScreen) and app.screen.detail is not None
        await pilot.press("3")  # the Response tab
        await pilot.pause()
        body = app.screen.query_one(AttemptDetail).query_one("#response-body").text
        assert body.startswith("[[[[") and len(body) >= 2 * DEPTH


def test_a_recording_of_deeply_nested_error_bodies_exports_and_imports(tool_server, tmp_path):
    # The decision quotes the 500's error text, 1.5 MB of JSON cut short 300,000 deep: the
    # import keys that decision in SQL, which needed ~85 MiB; at 4 times the longest row (a
    # 64 MiB limit) the import failed, "Out of Memory Error … nothing was imported".
    tool_server.script("/capabilities/deep", ToolReply(
        status=200, body='{"success":true,"data":' + "[" * 200_000 + "]" * 200_000 + "}"))
    tool_server.script("/capabilities/deep400", ToolReply(
        status=400, body='{"success":false,"error":{"message":' + "[" * 200_000 + "]" * 200_000
        + "}}"))
    tool_server.script("/capabilities/deepbad", ToolReply(status=500, body='{"a":' * 300_000))
    names = ("deep", "deep400", "deepbad")
    document = plan(tool_server.base_url, {name: capability(name) for name in names},
                    [step(f"step-{n}", name, {}) for n, name in enumerate(names, 1)],
                    config={"max_attempts": 1})  # fmt: skip
    db, bundle, target = tmp_path / "s.duckdb", tmp_path / "b.zip", tmp_path / "t.duckdb"
    ran = run_subprocess("run", str(write_plan(tmp_path, document)), "--db", str(db))
    assert ran.returncode in (0, 1), ran.stderr
    exported = run_subprocess("export", "--all", "-o", str(bundle), "--db", str(db))
    assert exported.returncode == 0, exported.stderr
    imported = run_subprocess("import", str(bundle), "--db", str(target))
    assert (imported.returncode, imported.stderr) == (0, "")
    assert "imported: 1" in imported.stdout
