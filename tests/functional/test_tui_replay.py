"""The replay screen through Pilot, on the bundled sample store (real recorded runs)."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

import duckdb
import pytest
from textual.widgets import Static, TextArea

from console.replay.edits import ResponseSpecError
from console.replay.engine import Replayer
from console.samples import sample_execution_ids
from console.tui.app import TruvaConsoleApp
from console.tui.screens.execution import ExecutionScreen
from console.tui.screens.executions import ExecutionsScreen
from console.tui.screens.replay import ReplayScreen
from console.tui.widgets.replay_view import DispatchTable, edited_value
from console.tui.widgets.tables import ExecutionTable
from store.queries import open_store
from tests.support.demo_store import sample_store_copy
from tests.support.plans import run_cli
from tests.support.tui import screen_loaded, settle_until, shown_text, tui_app

SIZE = (120, 36)
# scenario-d: step-1 got 503 three times and stopped by budget.attempts.
MISCLASSIFIED_503 = sample_execution_ids()["scenario-d-misclassified-503"]
OK_200 = '{"status": 200, "body": {"success": true, "data": {"temp_c": 21}}}'


@pytest.fixture
def sample_db(tmp_path: Path) -> Path:
    return sample_store_copy(tmp_path / "samples.duckdb")


def console_app(db: Path, tmp_path: Path) -> TruvaConsoleApp:
    return tui_app(db, db_arg=str(db), live_refresh=False,
                   replay_files_dir=tmp_path / "replay-files")  # fmt: skip


async def open_replay(app: TruvaConsoleApp, pilot, execution_id: str) -> ReplayScreen:
    """Open the execution, then press R on its first step."""
    await screen_loaded(pilot)
    app.open_execution(execution_id)
    await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), execution_id)
    await screen_loaded(pilot)
    await pilot.press("R")
    await settle_until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay screen")
    return app.screen


async def run_replay(pilot, screen: ReplayScreen) -> None:
    await pilot.press("ctrl+r")
    await settle_until(pilot, lambda: not screen.running, "the replay finished")


def static_text(screen, selector: str, width: int = 116) -> str:
    return shown_text(screen.query_one(selector, Static).content, width)


def cell(table, row_key: str, column: str) -> str:
    value = table.get_cell(row_key, column)
    return getattr(value, "plain", str(value))


def executions_in(db: Path) -> int:
    return open_store(db).list_executions(limit=100).total


async def test_replay_screen_lists_the_dispatches_and_prefills_the_recorded_response(
    sample_db: Path, tmp_path: Path
) -> None:
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_replay(app, pilot, MISCLASSIFIED_503)
        table = screen.query_one(DispatchTable)
        assert [cell(table, str(n), "http") for n in (1, 2, 3, 4)] == ["503", "503", "503", "-"]
        assert cell(table, "3", "rule") == "budget.attempts"
        assert [cell(table, str(n), "serves") for n in (1, 2, 3, 4)] == [
            "recorded", "recorded", "recorded", "stops here"]  # fmt: skip
        editor = screen.query_one("#response-editor", TextArea)
        recorded = json.loads(editor.text)
        assert recorded["status"] == 503
        assert recorded["body"]["error"]["code"] == "UPSTREAM_ERROR"
        assert editor.border_subtitle == "recorded (unchanged)"
        summary = static_text(screen, "#replay-summary")
        assert "original: stop_budget by budget.attempts after 3 dispatches" in summary
        assert screen.sub_title == (
            f"CLI: truva-console --db {sample_db} replay {MISCLASSIFIED_503} step-1"
        )
        screen.edit_response(1, '{"status": 422}')
        await pilot.pause()
        assert screen.edits == {1: '{"status": 422}'}
        assert editor.border_subtitle == "edited"
        await pilot.press("ctrl+t")  # restore the recorded response
        assert json.loads(editor.text) == recorded
        assert screen.edits == {}
        assert cell(table, "1", "serves") == "recorded"


async def test_edited_200_instead_of_503_changes_the_outcome_and_lists_the_replay(
    sample_db: Path, tmp_path: Path
) -> None:
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_replay(app, pilot, MISCLASSIFIED_503)
        await pilot.press("j", "enter")  # dispatch 2, into the editor
        assert app.focused is screen.query_one("#response-editor", TextArea)
        edited = '{"status":200,"body":{"success":true}}'
        await pilot.press("f7", *edited)  # select all, type over it
        assert screen.edits == {2: edited}
        assert cell(screen.query_one(DispatchTable), "2", "serves") == "edited"
        edit_file = tmp_path / "replay-files" / f"{MISCLASSIFIED_503}-step-1-dispatch-2.json"
        assert screen.sub_title.endswith(f"replay {MISCLASSIFIED_503} step-1 "
                                         f"--response 2={edit_file}")  # fmt: skip
        await run_replay(pilot, screen)
        assert screen.problem is None
        result = static_text(screen, "#replay-result")
        assert "outcome changed" in result
        assert "replay   success after 2 dispatches" in result
        assert "original stop_budget by budget.attempts after 3 dispatches" in result
        assert "200*" in result and "success.2xx" in result
        replay_id = screen.result.execution_id
        assert f"replay execution {replay_id} recorded in the store" in result
        assert json.loads(edit_file.read_text())["status"] == 200
        await pilot.press("ctrl+o")  # open the replay execution
        await settle_until(
            pilot,
            lambda: (
                isinstance(app.screen, ExecutionScreen) and app.screen.execution_id == replay_id
            ),
            "the replay execution",
        )
        await screen_loaded(pilot)
        assert app.screen.detail.execution.status == "succeeded"
        await pilot.press("escape", "escape", "escape")
        await settle_until(pilot, lambda: isinstance(app.screen, ExecutionsScreen), "the list")
        await screen_loaded(pilot)
        listed = app.screen.query_one(ExecutionTable)
        # its first dispatch is still the recorded 503 describing an input error
        assert cell(listed, replay_id, "status") == "succeeded ⚠1"
    row = open_store(sample_db).get_execution(replay_id).execution
    assert row.plan_path == f"replay of {MISCLASSIFIED_503} step-1"


async def test_the_cli_twin_replays_the_same_way(sample_db: Path, tmp_path: Path) -> None:
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_replay(app, pilot, MISCLASSIFIED_503)
        execution_screen = app.screen_stack[-2]
        titles = [command.title for command in execution_screen.palette_commands()]
        assert "replay: Replay step-1" in titles
        screen.edit_response(4, OK_200)
        screen.edit_response(2, "drop")
        screen.set_llm_mode("off")
        await pilot.click("#config-overrides")
        await pilot.press(*"max_attempts=4")
        await pilot.pause()
        twin = screen.sub_title.removeprefix("CLI: ")
        assert "--llm off --config max_attempts=4" in twin
        assert "--response 2=" in twin and "--response 4=" in twin
        await run_replay(pilot, screen)
        shown = [(a.status, a.action, a.rule) for a in screen.result.step.attempts]
        assert "outcome changed" in static_text(screen, "#replay-result")
    assert shown == [(503, "retry_same", "transient.retry_same"),
                     (0, "retry_same", "transient.retry_same"),
                     (503, "retry_same", "transient.retry_same"),
                     (200, "success", "success.2xx")]  # fmt: skip
    argv = shlex.split(twin)
    assert argv[0] == "truva-console"
    cli = await asyncio.to_thread(run_cli, *argv[1:], "--json")
    assert cli.code == 0, cli.stderr
    document = json.loads(cli.stdout)
    assert [(a["status"], a["action"], a["rule"]) for a in document["replay"]["attempts"]] == shown
    assert document["edited_dispatches"] == [2, 4]


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        ('{"status": 200,', "dispatch 2: invalid JSON at line 1, column 16"),
        ('{"status": 999}', "dispatch 2: status: expected an integer from 100 to 599, got 999"),
        ('{"status": "200"}', 'dispatch 2: status: expected an integer from 100 to 599, got "200"'),
        ('{"status": 200, "bdy": {}}', 'dispatch 2: unknown field "bdy"'),
        ('{"body": {}}', 'dispatch 2: missing required field "status"'),
        ('{"status": 200, "headers": {"Content-Length": "4"}}',
         "dispatch 2: headers.Content-Length: the replay server sets it from the body"),
        ('{"status": 200, "headers": {"X-A": 1}}', "dispatch 2: headers.X-A: expected a string"),
        ("dropp", "dispatch 2: invalid JSON at line 1, column 1"),
        ("[]", 'dispatch 2: expected an object {"status", "headers", "body"}, "drop" or '
               '"timeout", got an array'),
    ],
    ids=["truncated-json", "status-out-of-range", "status-as-text", "unknown-field",
         "missing-status", "framing-header", "header-not-text", "misspelt-keyword",
         "not-an-object"],
)  # fmt: skip
def test_edited_value_names_the_dispatch_and_the_problem(edit: str, problem: str) -> None:
    with pytest.raises(ResponseSpecError) as raised:
        edited_value(edit, "dispatch 2")
    assert str(raised.value).startswith(problem)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("edit", "value"),
    [("drop", "drop"), ("  timeout\n", "timeout"), ('"drop"', "drop"),
     ('{"status": 422, "body": "plain text"}', {"status": 422, "body": "plain text"})],
    ids=["bare-drop", "bare-timeout", "quoted-drop", "string-body"],
)  # fmt: skip
def test_edited_value_accepts_responses_and_keywords(edit: str, value: object) -> None:
    assert edited_value(edit, "dispatch 1") == value


INVALID_INPUTS = [
    ('{"status": 999}', "", "dispatch 2: status: expected an integer from 100 to 599, got 999"),
    ('{"status": 200}', "max_attempts=0", "--config max_attempts=0: expected"),
]


async def test_invalid_edit_or_override_shows_one_line_and_runs_nothing(
    sample_db: Path, tmp_path: Path
) -> None:
    before = executions_in(sample_db)
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_replay(app, pilot, MISCLASSIFIED_503)
        for edit, overrides, problem in INVALID_INPUTS:
            screen.edit_response(2, edit)
            screen.query_one("#config-overrides").value = overrides
            await pilot.pause()
            await run_replay(pilot, screen)
            assert screen.problem.startswith(problem) and "\n" not in screen.problem
            shown = static_text(screen, "#replay-problem", width=300)
            assert problem in shown and "Traceback" not in shown
            assert screen.result is None
            assert "Not replayed yet" in static_text(screen, "#replay-result")
    assert not (tmp_path / "replay-files").exists()
    assert executions_in(sample_db) == before


class HeldReplayer(Replayer):
    """A real replayer that waits, before it starts, until it is cancelled."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.released = asyncio.Event()

    def cancel(self) -> None:
        super().cancel()
        self.released.set()

    async def run(self):
        await self.released.wait()
        return await super().run()


async def test_escape_cancels_a_running_replay_before_it_leaves(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("console.tui.screens.replay.Replayer", HeldReplayer)
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_replay(app, pilot, MISCLASSIFIED_503)
        await pilot.press("ctrl+r")
        for _ in range(200):  # the worker is held, so wait for its message, not for it
            if screen.replayer is not None:
                break
            await pilot.pause()
        assert screen.running and "Replaying step-1" in static_text(screen, "#replay-result")
        await pilot.press("escape")
        await settle_until(pilot, lambda: not screen.running, "the cancelled replay")
        assert app.screen is screen
        assert screen.result.cancelled_by_user
        await pilot.press("escape")
        assert isinstance(app.screen, ExecutionScreen)


async def test_a_replay_that_ran_out_of_responses_says_so_not_outcome_changed(
    sample_db: Path, tmp_path: Path
) -> None:
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_replay(app, pilot, MISCLASSIFIED_503)
        await pilot.click("#config-overrides")
        await pilot.press(*"max_attempts=4")
        await pilot.pause()
        await run_replay(pilot, screen)
        result = static_text(screen, "#replay-result")
    assert screen.result.unscripted_dispatch == 4
    assert "outcome changed" not in result
    assert "ran out of scripted responses: dispatch 4 has no recorded or edited" in result


async def test_edited_parameters_are_sent_and_in_the_cli_twin(sample_db: Path, tmp_path: Path):
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_replay(app, pilot, MISCLASSIFIED_503)
        screen.edit_response(1, OK_200)
        await pilot.click("#param-edits")
        await pilot.press(*"location=Dallas")
        await pilot.pause()
        twin = screen.sub_title.removeprefix("CLI: ")
        assert "--param location=Dallas" in twin
        await run_replay(pilot, screen)
        assert screen.problem is None
        sent = [a.parameters for a in screen.result.step.attempts]
    assert sent == [{"location": "Dallas", "units": "metric"}]
    cli = await asyncio.to_thread(run_cli, *shlex.split(twin)[1:], "--json")
    assert cli.code == 0, cli.stderr
    document = json.loads(cli.stdout)
    assert [a["parameters"] for a in document["replay"]["attempts"]] == sent
    assert document["edited_parameters"] == {"location": "Dallas"}


async def test_live_endpoint_field_is_refused_without_llm_live(sample_db: Path, tmp_path: Path):
    before = executions_in(sample_db)
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_replay(app, pilot, MISCLASSIFIED_503)
        screen.query_one("#llm-endpoint").value = "http://127.0.0.1:9/v1 other-model"
        await pilot.pause()
        twin = screen.sub_title.removeprefix("CLI: ")
        assert "--llm-base-url http://127.0.0.1:9/v1 --llm-model other-model" in twin
        await run_replay(pilot, screen)
        assert screen.problem == (
            "--llm-base-url and --llm-model: only with --llm live (the LLM mode is recorded)"
        )
        assert screen.result is None
    assert executions_in(sample_db) == before


async def test_the_comparison_names_the_first_divergence(sample_db: Path, tmp_path: Path):
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_replay(app, pilot, MISCLASSIFIED_503)
        screen.edit_response(2, OK_200)
        await run_replay(pilot, screen)
        shown = static_text(screen, "#replay-result", width=300)
    assert "first divergence: attempt 2: status 503 → 200, action retry_same → success" in shown


async def test_replay_of_a_step_whose_llm_texts_were_not_read_yet_answers_from_them(
    sample_db: Path, tmp_path: Path
) -> None:
    # The execution screen reads prompts and answers only for the step it shows (step-1 here);
    # replaying step-2, whose two LLM calls it has not read, must read them first.
    execution_id = sample_execution_ids()["tesla-layer4"]
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await screen_loaded(pilot)
        app.open_execution(execution_id)
        await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen), execution_id)
        await screen_loaded(pilot)
        unread = app.screen.detail.step("step-2")
        assert app.screen.step_id == "step-1" and not unread.attempts[0].llm_calls[0].texts_loaded
        app.screen.action_replay_step("step-2")
        await settle_until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay")
        screen = app.screen
        calls = [call for attempt in screen.detail.step("step-2").attempts
                 for call in attempt.llm_calls]  # fmt: skip
        assert len(calls) == 2 and all(call.texts_loaded and call.request_body for call in calls)
        await run_replay(pilot, screen)
        assert screen.problem is None
        result = static_text(screen, "#replay-result")
    assert "outcome changed" not in result
    assert "replay   success" in result


async def test_the_comparison_shows_a_stored_rule_id_that_looks_like_markup(
    sample_db: Path, tmp_path: Path
):
    # The comparison gave Rich plain str cells for rule ids: `[/i]` (from an imported bundle or
    # an edited store) raised MarkupError when the replay finished.
    with duckdb.connect(str(sample_db)) as conn:
        conn.execute("UPDATE attempts SET rule_id = '[/i]' || rule_id WHERE execution_id = ?",
                     [MISCLASSIFIED_503])  # fmt: skip
    app = console_app(sample_db, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_replay(app, pilot, MISCLASSIFIED_503)
        await run_replay(pilot, screen)
        shown = static_text(screen, "#replay-result", width=300)
        assert app.screen is screen
    assert "[/i]" in shown
