"""The execution screen as a debugging instrument, through Pilot: where it opens, failed-attempt
jumps, the pager, editor and copy keys, search, decision panel, timeline, diff and warnings."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from textual.widgets import Collapsible, Input, Static, TabbedContent, TextArea
from textual.widgets.text_area import Selection

from console.render.text_search import search_text
from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.executions import ExecutionsScreen
from console.tui.widgets.search_bar import SearchBar
from console.tui.widgets.tables import AttemptTable, ExecutionTable, StepTable
from console.tui.widgets.timeline_view import TimelineView
from tests.support.plans import run_cli
from tests.support.tui import (
    EXHAUSTED,
    SMALL,
    TRIP,
    llm_tab_shown,
    open_execution,
    record_synthetic_store,
    screen_loaded,
    static_text,
    tui_app,
)

SIZE = (120, 36)


async def trip_at(app, pilot, step_id: str, n: int, tab: str | None = None) -> ExecutionScreen:
    """Open TRIP, select `step_id` and attempt `n`, and show the tab with key `tab`."""
    screen = await open_execution(app, pilot, TRIP)
    screen.select_step(step_id)
    screen.select_attempt(n)
    if tab == "4":  # the LLM tab reads its texts from the store on a worker: wait for them
        await llm_tab_shown(pilot)
    elif tab is not None:
        await pilot.press(tab)
    await pilot.pause()
    return screen


@pytest.fixture(scope="module")
def synthetic_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_synthetic_store(tmp_path_factory.mktemp("tui-debugging") / "debug.duckdb")


async def test_an_execution_opens_on_its_first_failing_step_at_the_decisive_attempt(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        assert (screen.step_id, screen.attempt_n) == ("step-3", 1)
        assert screen.query_one(StepTable).highlighted_key() == "step-3"
        screen.dismiss()
        screen = await open_execution(app, pilot, EXHAUSTED)
        # three 503s: the third attempt was decided by budget.attempts, the step's final rule
        assert (screen.step_id, screen.attempt_n) == ("step-1", 3)
        assert screen.query_one(AttemptTable).highlighted_key() == "3"


async def test_n_and_shift_n_jump_between_failed_attempts_across_steps(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        await pilot.press("n")
        await pilot.pause()
        assert (screen.step_id, screen.attempt_n) == ("step-5", 1)
        await pilot.press("n")  # wraps around to the 429 of step-1
        await pilot.pause()
        assert (screen.step_id, screen.attempt_n) == ("step-1", 1)
        assert screen.query_one(StepTable).highlighted_key() == "step-1"
        await pilot.press("right_square_bracket")  # the 400 that the analyzer corrected
        await pilot.pause()
        assert (screen.step_id, screen.attempt_n) == ("step-2", 1)
        await pilot.press("N")
        await pilot.pause()
        assert (screen.step_id, screen.attempt_n) == ("step-1", 1)
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert (screen.step_id, screen.attempt_n) == ("step-5", 1)
        assert screen.query_one(AttemptTable).highlighted_key() == "1"


async def test_f_on_the_list_moves_to_the_next_failed_execution(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        assert isinstance(app.screen, ExecutionsScreen)
        table = app.screen.query_one(ExecutionTable)
        assert table.highlighted_key() == EXHAUSTED  # newest first: exhausted, small, trip
        await pilot.press("f")
        assert table.highlighted_key() == TRIP  # SMALL succeeded, so it is passed over
        await pilot.press("f")
        assert table.highlighted_key() == EXHAUSTED
        assert table.highlighted_key() != SMALL
        assert not isinstance(app.screen, ExecutionScreen)


async def test_decision_panel_shows_the_inputs_the_rule_read_and_folds_the_rest(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await trip_at(app, pilot, "step-1", 1)  # the 429 resent by transient.retry_same
        body = static_text(screen, "#decision-body", width=200)
        assert "Inputs transient.retry_same read" in body
        read = body.split("Inputs transient.retry_same read", 1)[1].split("Why not", 1)[0]
        assert "status" in read and "429" in read and "attempt_number" in read
        assert "max_attempts" in read and "side_effects" not in read
        folded = screen.query_one("#decision-all-inputs", Collapsible)
        assert folded.collapsed and folded.title.startswith("all inputs (")
        others = static_text(screen, "#decision-other-inputs", width=200)
        assert "side_effects" in others and "attempt_number" not in others
        folded.collapsed = False
        await pilot.pause()
        assert screen.query_one("#decision-other-inputs", Static).region.height > 0


async def test_key_6_shows_the_timeline_of_the_step_and_of_the_execution(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await trip_at(app, pilot, "step-1", 1, "6")
        tabs = screen.query_one("#detail-tabs", TabbedContent)
        assert tabs.active == "tab-timeline"
        view = screen.query_one(TimelineView)
        text = "\n".join(view.lines(view.size.width))
        assert view.size.width > 80
        assert text.startswith("Step step-1\nstep-1     0─")
        assert "wait 1.00 s planned · 1.00 s actual · Retry-After" in text
        assert "\nExecution\nexecution  0─" in text
        assert max(len(line) for line in text.splitlines()) <= view.size.width


TIMELINE_TWINS = {"step-1-attempt-1": ("step-1", 1), "step-1-attempt-2": ("step-1", 2),
                  "step-2-attempt-2": ("step-2", 2), "step-3-attempt-1": ("step-3", 1)}


@pytest.mark.parametrize(("step_id", "n"), TIMELINE_TWINS.values(), ids=TIMELINE_TWINS.keys())
async def test_the_timeline_tabs_cli_twin_prints_what_the_tab_shows(
    synthetic_db: Path, monkeypatch, step_id: str, n: int
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await trip_at(app, pilot, step_id, n, "6")
        view = screen.query_one(TimelineView)
        shown, width = view.render().plain, view.size.width
        twin = screen.action_twin("show-tab-timeline")
    assert twin == f"truva-console explain {TRIP} {step_id} --timeline --attempt {n}"
    monkeypatch.setenv("COLUMNS", str(width))
    result = run_cli("--db", str(synthetic_db), *twin.split()[1:])
    assert result.code == 0, result.stderr
    assert result.stdout == shown + "\n"
    assert shown.startswith(f"Step {step_id}\n") and f"\n▶ {step_id} " in shown


async def test_key_7_shows_the_request_diff_with_layer_and_llm_call(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await trip_at(app, pilot, "step-2", 2, "7")
        assert screen.query_one("#detail-tabs", TabbedContent).active == "tab-diff"
        diff = static_text(screen, "#diff-body", width=120)
        assert ("▶ #1 → #2  analyzer layer, LLM call 1 of attempt #1 (error_analysis, "
                "model gpt-test)") in diff
        assert 'age: "thirty" → 30' in " ".join(diff.split())
        screen.select_step("step-1")
        screen.select_attempt(1)
        await pilot.pause()
        assert "  #1 → #2  resent unchanged" in static_text(screen, "#diff-body", width=120)


def _fake_program(directory: Path, name: str) -> tuple[str, Path]:
    """A $PAGER/$EDITOR stand-in that copies the file it is given, and records its mode."""
    out = directory / f"{name}.out"
    script = directory / f"{name}.sh"
    script.write_text(f'#!/bin/sh\ncat "$1" > "{out}"\nstat -c %a "$1" > "{out}.mode"\n'
                      f'echo "$1" > "{out}.path"\n')
    script.chmod(0o755)
    return str(script), out


async def test_f3_shows_the_focused_body_in_the_pager(
    synthetic_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pager, out = _fake_program(tmp_path, "pager")
    monkeypatch.setenv("PAGER", pager)
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await trip_at(app, pilot, "step-2", 1, "3")
        area = screen.query_one("#response-body", TextArea)
        area.focus()
        await pilot.press("f3")
        await pilot.pause()
        assert out.read_text() == area.text
        assert json.loads(out.read_text())["success"] is False
        pager_copy = Path((tmp_path / "pager.out.path").read_text().strip())
        assert not pager_copy.exists()  # the pager's copy is removed afterwards
        screen.query_one(AttemptTable).focus()  # not a text pane: the whole active tab
        await pilot.press("f3")
        await pilot.pause()
        shown = out.read_text()
        assert shown.startswith("received      HTTP 400") and area.text.rstrip() in shown


async def test_f3_on_the_decision_tab_keeps_the_heading_of_the_folded_inputs(
    synthetic_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by an outside check: the pager's copy of the Decision tab ran the folded inputs on
    after the verdict without their `all inputs (N more)` heading."""
    pager, out = _fake_program(tmp_path, "pager")
    monkeypatch.setenv("PAGER", pager)
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await trip_at(app, pilot, "step-2", 1, "1")
        title = screen.query_one("#decision-all-inputs").title
        screen.query_one(AttemptTable).focus()
        await pilot.press("f3")
        await pilot.pause()
    shown = out.read_text()
    assert title.startswith("all inputs (") and f"\n{title}\n" in shown


async def test_f4_opens_a_read_only_copy_in_the_editor(
    synthetic_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    editor, out = _fake_program(tmp_path, "editor")
    monkeypatch.setenv("EDITOR", editor)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the kept copy stays in tmp_path
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await trip_at(app, pilot, "step-2", 1, "4")
        area = screen.query_one("#llm-text", TextArea)
        area.focus()
        await pilot.press("f4")
        await pilot.pause()
        assert out.read_text() == area.text and "── raw response ──" in out.read_text()
        assert (tmp_path / "editor.out.mode").read_text().strip() == "444"
        assert Path((tmp_path / "editor.out.path").read_text().strip()).exists()


async def test_y_copies_the_selection_else_the_whole_pane(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await trip_at(app, pilot, "step-2", 1, "2")
        area = screen.query_one("#request-body", TextArea)
        area.focus()
        await pilot.press("y")
        assert app.clipboard == area.text and '"thirty"' in app.clipboard
        area.selection = Selection((1, 2), (1, 8))
        await pilot.press("y")
        assert app.clipboard == area.selected_text == area.text.splitlines()[1][2:8]
        await pilot.press("Y")  # the CLI twin has its own key
        assert app.clipboard == f"truva-console explain {TRIP} step-2"


async def test_ctrl_f_finds_selects_and_jumps_between_matches(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await trip_at(app, pilot, "step-2", 1)
        await llm_tab_shown(pilot)  # the LLM tab: prompt and raw answer, searched unfocused
        area = screen.query_one("#llm-text", TextArea)
        await pilot.press("ctrl+f")
        bar = screen.query_one(SearchBar)
        assert bar.has_class("-open") and app.focused is bar.query_one(Input)
        await pilot.press(*"ERROR")
        await app.workers.wait_for_complete()
        await pilot.pause()
        expected = search_text(area.text, "ERROR")
        assert bar.result == expected and len(expected.matches) >= 2
        assert area.selection == Selection(*expected.matches[0])
        assert area.selected_text.lower() == "error"
        status = screen.query_one("#search-status", Static)
        assert str(status.content) == f"1/{len(expected.matches)} matches"
        await pilot.press("enter")
        assert area.selection == Selection(*expected.matches[1])
        await pilot.press("up", "up")  # back past the first: wraps to the last
        assert area.selection == Selection(*expected.matches[-1])
        await pilot.press("escape")
        assert not bar.has_class("-open") and app.focused is area
        assert area.selection == Selection(*expected.matches[-1])


async def test_ctrl_f_on_a_step_without_attempt_says_where_search_works(
    synthetic_db: Path,
) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-4")  # skipped: the detail is a note, not tabs
        await pilot.pause()
        await pilot.press("ctrl+f")
        assert not screen.query_one(SearchBar).has_class("-open")
        assert any("search works in an attempt's tabs" in n.message
                   for n in app._notifications)  # fmt: skip
