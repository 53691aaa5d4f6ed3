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
from tests.support.plans import capability, plan, run_subprocess, step, write_plan
from tests.support.tool_server import ToolReply
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


@pytest.fixture
def deep_store(tmp_path: Path, tool_server) -> tuple[Path, str]:
    tool_server.script("/capabilities/search", ToolReply(status=404, body=DEEP))
    document = plan(tool_server.base_url, {"search": capability("search")},
                    [step("step-1", "search", {"city": "Paris"})])  # fmt: skip
    db = tmp_path / "store.duckdb"
    result = run_subprocess("run", str(write_plan(tmp_path, document)), "--db", str(db))
    assert result.returncode == 0, result.stderr
    listed = run_subprocess("ls", "--db", str(db), "--json")
    return db, json.loads(listed.stdout)["executions"][0]["execution_id"]


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
