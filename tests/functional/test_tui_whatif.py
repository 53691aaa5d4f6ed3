"""The what-if screen through Pilot, on a store recorded from the real demo runs."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from textual.widgets import Input, Static

import console.tui.screens.whatif as whatif_screen
from console.entry import main
from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.executions import ExecutionsScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.whatif import ChangeTable, TransitionTable, WhatIfScreen
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.tables import AttemptTable
from executor.policy.conditions import wait_text
from tests.support.demo_store import execution_of, record_demo_store
from tests.support.tui import screen_loaded, settle_until, shown_text, table_cell, tui_app

SIZE = (160, 40)
SCENARIO_D = "scenario-d-misclassified-503"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    return record_demo_store(Path(tmp_path_factory.mktemp("tui-whatif")) / "demo.duckdb")


def status(screen: WhatIfScreen) -> str:
    return shown_text(screen.query_one("#whatif-status", Static).content, 1000)


def detail(screen: WhatIfScreen) -> str:
    return shown_text(screen.query_one("#whatif-detail", Static).content, 300)


async def open_whatif(pilot) -> WhatIfScreen:
    await screen_loaded(pilot)
    await pilot.press("w")
    await settle_until(pilot, lambda: isinstance(pilot.app.screen, WhatIfScreen), "what-if")
    return pilot.app.screen


async def run_with(pilot, screen: WhatIfScreen, config: str, filter_text: str = "") -> None:
    screen.query_one("#whatif-config", Input).value = config
    screen.query_one(FilterBar).value = filter_text
    await pilot.press("ctrl+r")
    await settle_until(pilot, lambda: not screen.running, "the what-if finished")


def cli_json(db: Path, capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["whatif", "--db", str(db), "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


async def test_max_attempts_5_turns_scenario_d_stop_into_a_resend_and_enter_opens_that_attempt(
    demo_db: Path, capsys
) -> None:
    scenario_d = execution_of(demo_db, SCENARIO_D)
    expected = cli_json(demo_db, capsys, "--config", "max_attempts=5")
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_whatif(pilot)
        assert app.focused is screen.query_one("#whatif-config", Input)
        await pilot.press(*"max_attempts=5", "enter")  # Enter in the field runs it
        await settle_until(pilot, lambda: screen.view is not None, "the what-if result")
        shown = status(screen)
        assert (f"what-if under config max_attempts=5: {expected['decisions']} decisions in "
                f"{expected['executions']} executions re-decided") in shown  # fmt: skip
        assert f"{expected['changed']} decisions would change, in " \
               f"{expected['changed_steps']} steps" in shown
        transitions = screen.query_one(TransitionTable)
        rows = {
            (table_cell(transitions, key, "before"), table_cell(transitions, key, "after")):
            table_cell(transitions, key, "count")
            for key in map(str, range(transitions.row_count))
        }  # fmt: skip
        def shown_verdict(verdict: dict) -> str:  # the CLI twin's verdict, as the cell draws it
            wait = ("" if verdict.get("delay_ms") is None
                    else f" after {wait_text(verdict['delay_ms'])}")  # fmt: skip
            return f"{verdict['action']} {verdict['rule_id']}{wait}"

        assert rows == {
            (shown_verdict(t["before"]), shown_verdict(t["after"])): str(t["count"])
            for t in expected["by_transition"]
        }  # fmt: skip
        assert rows[("stop_budget budget.attempts",
                     "retry_same transient.retry_same after 40.0 ms")] == "1"
        changes = screen.query_one(ChangeTable)
        index = next(i for i, c in enumerate(expected["changes"])
                     if c["execution_id"] == scenario_d)  # fmt: skip
        assert table_cell(changes, str(index), "n") == "3"
        assert table_cell(changes, str(index), "before") == "stop_budget budget.attempts"
        changes.focus()
        changes.move_cursor(row=index)
        await pilot.pause()
        text = detail(screen)
        assert f"{scenario_d} step-1 #3" in text and "attempt 4 of 5" in text
        assert "the tool's answer to attempt #4 is not recorded" in text
        assert (f"truva-console --db {demo_db} replay {scenario_d} step-1 --config "
                "max_attempts=5") in text
        assert "What this cannot know" in text
        await pilot.press("R")
        assert app.clipboard == (f"truva-console --db {demo_db} replay {scenario_d} step-1 "
                                 "--config max_attempts=5")  # fmt: skip
        await pilot.press("enter")
        await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), "execution")
        await screen_loaded(pilot)
        opened = app.screen
        assert (opened.execution_id, opened.step_id, opened.attempt_n) == (scenario_d, "step-1", 3)
        assert opened.query_one(AttemptTable).highlighted_key() == "3"
        await pilot.press("escape")
        assert app.screen is screen


async def test_the_cli_twin_is_in_the_header_the_help_and_y(demo_db: Path) -> None:
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_whatif(pilot)
        await pilot.press(*"max_attempts=5 jitter=false")
        twin = f"truva-console --db {demo_db} whatif --config max_attempts=5 --config jitter=false"
        assert screen.sub_title == f"CLI: {twin}"
        screen.query_one(ChangeTable).focus()
        await pilot.press("Y")
        assert app.clipboard == twin
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        help_text = shown_text(app.screen.query_one("#help-body", Static).content, 400)
        assert "What-if screen" in help_text and twin in help_text


@pytest.mark.parametrize(
    "config",
    ["max_attempts=x", "nope=1", "max_attempts", "max_attempts=5 max_delay_ms=-3",
     "max_attempts=3 max_attempts=5"],
    ids=["not-an-integer", "unknown-key", "no-value", "second-word-bad", "repeated-key"],
)
async def test_a_bad_override_is_the_cli_line_in_the_screen_and_nothing_runs(
    demo_db: Path, capsys, config: str
) -> None:
    capsys.readouterr()
    words = [arg for word in config.split() for arg in ("--config", word)]
    assert main(["whatif", "--db", str(demo_db), *words]) == 2
    cli_line = capsys.readouterr().err.strip().removeprefix("truva-console: ")
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_whatif(pilot)
        await run_with(pilot, screen, config)
        assert screen.view is None and screen.run_number == 0
        assert status(screen).strip() == cli_line and "\n" not in cli_line
        assert screen.query_one("#whatif-config").has_class("-invalid")


async def test_a_bad_filter_token_is_the_list_filter_line_and_nothing_runs(demo_db: Path) -> None:
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_whatif(pilot)
        screen.query_one("#whatif-config", Input).value = "max_attempts=5"
        screen.query_one(FilterBar).focus()
        await pilot.press(*"status:fialed", "enter")
        await pilot.pause()
        assert screen.view is None and screen.run_number == 0
        assert status(screen).strip() == ("filter status:fialed: expected one of running, "
                                          "succeeded, partial, failed, cancelled, interrupted")
        assert screen.query_one(FilterBar).has_class("-invalid")


async def test_the_list_filter_selects_the_executions_as_ls_does(demo_db: Path, capsys) -> None:
    expected = cli_json(demo_db, capsys, "--rule", "budget.attempts", "--config", "max_attempts=5")
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        await pilot.press("slash", *"rule:budget.attempts", "enter")
        await screen_loaded(pilot)
        screen = await open_whatif(pilot)
        assert screen.query_one(FilterBar).value == "rule:budget.attempts"
        await run_with(pilot, screen, "max_attempts=5", "rule:budget.attempts")
        assert f"in {expected['executions']} matching executions re-decided" in status(screen)
        assert screen.query_one(ChangeTable).row_count == len(expected["changes"])
        assert screen.sub_title == (f"CLI: truva-console --db {demo_db} whatif --config "
                                    "max_attempts=5 --rule budget.attempts")  # fmt: skip


async def test_a_task_wide_budget_override_says_what_its_counters_cannot_know(
    demo_db: Path,
) -> None:
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_whatif(pilot)
        await run_with(pilot, screen, "max_retries_per_tool=1")
        assert screen.view is not None
        shown = " ".join(detail(screen).split())
        assert ("max_retries_per_tool is a budget counted across the steps of an execution"
                in shown)  # fmt: skip
        await run_with(pilot, screen, "max_attempts=5")
        assert "counted across the steps" not in " ".join(detail(screen).split())


async def test_no_overrides_is_the_policy_regression_check(demo_db: Path, capsys) -> None:
    expected = cli_json(demo_db, capsys)
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_whatif(pilot)
        await run_with(pilot, screen, "")
        assert "the recorded config (policy code regression check)" in status(screen)
        assert f"{expected['decisions']} decisions" in status(screen)
        assert screen.query_one(ChangeTable).row_count == 0 == expected["changed"]
        assert "No decision changes under these overrides" in detail(screen)


async def test_the_run_counts_its_progress_and_esc_cancels_it(
    demo_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted, cancelled = threading.Event(), threading.Event()
    real_what_if = whatif_screen.what_if

    def gated_what_if(store, filters, overrides, *, progress):
        def gated(done, report):
            progress(done, report)
            if not counted.is_set():  # hold the worker after its first count until Esc
                counted.set()
                assert cancelled.wait(10)
        return real_what_if(store, filters, overrides, progress=gated)

    monkeypatch.setattr(whatif_screen, "what_if", gated_what_if)
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_whatif(pilot)
        screen.query_one("#whatif-config", Input).value = "max_attempts=5"
        await pilot.press("ctrl+r")
        assert await asyncio.to_thread(counted.wait, 10)
        await pilot.pause()
        assert screen.running and screen.progress is not None
        done, total, decisions = screen.progress
        assert total == 14 and 0 < done <= total and decisions > 0
        assert f"Re-deciding… {done} of 14 executions, {decisions} decisions examined" \
            in status(screen)
        assert "esc cancels" in status(screen)
        await pilot.press("escape")  # cancels the run; the screen stays
        cancelled.set()
        await settle_until(pilot, lambda: not screen.running, "the cancelled run ended")
        assert app.screen is screen and screen.view is None
        assert "The last run was cancelled" in status(screen)
        await pilot.press("escape")
        assert isinstance(app.screen, ExecutionsScreen)


async def test_the_palette_of_the_list_offers_the_what_if_and_lint_screens(demo_db: Path) -> None:
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        commands = {c.title: c for c in app.screen.palette_commands()}
        assert "lint: Tool contract report cards" in commands
        commands["whatif: Policy what-if over the store"].run()
        await settle_until(pilot, lambda: isinstance(app.screen, WhatIfScreen), "what-if")


async def test_a_change_opens_on_its_own_attempt_not_where_the_execution_opens(
    demo_db: Path,
) -> None:
    # Under max_attempts=2 Scenario D changes at #2; the execution itself opens on #3 (its stop).
    scenario_d = execution_of(demo_db, SCENARIO_D)
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_whatif(pilot)
        await run_with(pilot, screen, "max_attempts=2")
        commands = {c.title: c for c in screen.palette_commands()}
        commands[f"whatif: Open {scenario_d} step-1 #2"].run()
        await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), "execution")
        await screen_loaded(pilot)
        assert (app.screen.step_id, app.screen.attempt_n) == ("step-1", 2)
        assert app.screen.query_one(AttemptTable).highlighted_key() == "2"
        await pilot.press("escape")
        app.open_execution(scenario_d)
        await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), "execution")
        await screen_loaded(pilot)
        assert app.screen.attempt_n == 3


async def test_the_table_lists_the_first_changes_and_says_how_many_more(
    demo_db: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = cli_json(demo_db, capsys, "--config", "max_attempts=2")
    assert len(expected["changes"]) == 3
    monkeypatch.setattr(whatif_screen, "SHOWN_CHANGES", 2)
    app = tui_app(demo_db, db_arg=str(demo_db), live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_whatif(pilot)
        await run_with(pilot, screen, "max_attempts=2")
        assert screen.query_one(ChangeTable).row_count == 2
        assert table_cell(screen.query_one(TransitionTable), "0", "count") == "3"
        assert (f"the table lists the first 2 of 3 changed steps; truva-console --db {demo_db} "
                "whatif --config max_attempts=2 --json lists all") in status(screen)
        opens = [c for c in screen.palette_commands() if c.title.startswith("whatif: Open ")]
        assert len(opens) == 2
