"""Terminal escapes from tools and plans are shown, never obeyed: CLI output and TUI cells.

A tool answers with a text body and a header holding OSC (set the window title) and CSI
(clear the screen) sequences, the plan `query` holds ESC too; `run`, `ls` and `explain` of the
real binary print no ESC byte, and the TUI's cells and detail panes show `\\x1b` instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.printable import printable, printable_line
from console.tui.screens.execution import ExecutionScreen
from console.tui.widgets.attempt_detail import AttemptDetail
from console.tui.widgets.tables import ExecutionTable
from tests.support.demo_store import copy_store
from tests.support.plans import capability, plan, run_subprocess, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply
from tests.support.tui import screen_loaded, shown_text, tui_app

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
QUERY = f"find hotels {TITLE}now"


@pytest.fixture(scope="module")
def hostile_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The hostile answer's run recorded by the real CLI once per module."""
    work = tmp_path_factory.mktemp("escapes")
    with ScriptedToolServer() as tool_server:
        tool_server.script(
            "/capabilities/search",
            ToolReply(status=404, body=f"no such city {TITLE}{CLEAR}\r\nbye\x9b31m",
                      headers={"X-Debug": "a\x1b[31mred"}),
        )  # fmt: skip
        document = plan(tool_server.base_url, {"search": capability("search")},
                        [step("step-1", "search", {"city": "Paris"})], query=QUERY)  # fmt: skip
        db = work / "store.duckdb"
        result = run_subprocess("run", str(write_plan(work, document)), "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    listed = run_subprocess("ls", "--db", str(db), "--json")
    return db, json.loads(listed.stdout)["executions"][0]["execution_id"]


@pytest.fixture
def hostile_store(hostile_recording: tuple[Path, str], tmp_path: Path) -> tuple[Path, str]:
    """A copy of the module's recording in tmp_path, and its execution id."""
    db, execution_id = hostile_recording
    return copy_store(db, tmp_path / "store.duckdb"), execution_id


CASES = [
    ("osc_title", "a\x1b]0;t\x07b", "a\\x1b]0;t\\x07b"),
    ("csi_clear", "\x1b[2J", "\\x1b[2J"),
    ("carriage_return", "ok\rno", "ok\\rno"),
    ("c1_csi", "x\x9b31m", "x\\x9b31m"),
    ("delete", "a\x7fb", "a\\x7fb"),
    ("bidi_override", "abc\u202edcba", "abc\\u202edcba"),
    ("newline_and_tab_kept", "a\n\tb", "a\n\tb"),
    ("plain_unicode_kept", "Zürich ✓", "Zürich ✓"),
]


@pytest.mark.parametrize(("text", "shown"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_printable(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_line_shows_line_breaks_too() -> None:
    assert printable_line("a\n\tb\x1b") == "a\\n\\tb\\x1b"


def test_explain_and_ls_print_no_escape_byte(hostile_store: tuple[Path, str]) -> None:
    db, execution_id = hostile_store

    explained = run_subprocess("explain", execution_id, "--db", str(db))
    listed = run_subprocess("ls", "--db", str(db))

    assert explained.returncode == 0 and listed.returncode == 0, explained.stderr
    for output in (explained.stdout, listed.stdout):
        assert "\x1b" not in output and "\x07" not in output and "\x9b" not in output
        assert "\r" not in output
    assert "find hotels \\x1b]0;pwned\\x07now" in listed.stdout
    assert "no such city \\x1b]0;pwned\\x07\\x1b[2J\\x1b[H\\r" in explained.stdout


async def test_tui_cells_and_panes_show_escapes(hostile_store: tuple[Path, str]) -> None:
    db, execution_id = hostile_store
    app = tui_app(db, live_refresh=False)
    async with app.run_test(size=(200, 40)) as pilot:  # every list column fits
        await screen_loaded(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        query_cell = app.screen.query_one(ExecutionTable).get_cell(execution_id, "query")
        assert str(query_cell) == "find hotels \\x1b]0;pwned\\x07now"

        await pilot.press("enter")
        await screen_loaded(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ExecutionScreen)
        summary = shown_text(app.screen.query_one("#execution-summary").content, 136)
        assert "query find hotels \\x1b]0;pwned\\x07now" in summary
        await pilot.press("3")  # the Response tab, built when first shown
        detail = app.screen.query_one(AttemptDetail)
        response_head = shown_text(detail.query_one("#response-head").content, 136)
        assert "x-debug: a\\x1b[31mred" in response_head.lower()
        body = detail.query_one("#response-body").text
        assert body.startswith("no such city \\x1b]0;pwned\\x07\\x1b[2J\\x1b[H\\r\nbye\\x9b31m")
        everything = summary + response_head + body
        assert "\x1b" not in everything and "\x9b" not in everything
