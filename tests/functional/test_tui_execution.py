"""The execution screen through Pilot: steps, attempts, and the tabs of the attempt detail."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from textual.widgets import TabbedContent, TextArea

from console.tui.app import TruvaConsoleApp
from console.tui.screens.executions import ExecutionsScreen
from console.tui.widgets.attempt_detail import AttemptDetail
from console.tui.widgets.tables import AttemptTable, StepTable
from store.recorder import StoreRecorder
from tests.support.events_factory import NON_UTF8_BODY, START_AT, realistic_execution
from tests.support.tui import (
    ANALYZER_ANSWER,
    TRIP,
    RealStore,
    open_execution,
    settle_until,
    static_text,
    tui_app,
)

SIZE = (120, 36)


async def settle(app: TruvaConsoleApp, pilot) -> None:
    """Wait until every worker has finished and its messages are handled."""
    await app.workers.wait_for_complete()
    await pilot.pause()


def row_keys(table) -> list[str]:
    return [table.coordinate_to_cell_key((row, 0)).row_key.value for row in range(table.row_count)]


def cell(table, row_key: str, column: str) -> str:
    value = table.get_cell(row_key, column)
    return getattr(value, "plain", str(value))


async def test_steps_and_attempts_of_a_failed_execution(real_store: RealStore) -> None:
    app = tui_app(real_store.db, db_arg="debug.duckdb", live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, real_store.refused)
        steps = screen.query_one(StepTable)
        assert row_keys(steps) == ["step-1", "step-2"]
        assert cell(steps, "step-1", "status") == "failed"
        assert cell(steps, "step-1", "rule") == "terminal.auth_or_method"
        assert cell(steps, "step-2", "status") == "skipped"
        attempts = screen.query_one(AttemptTable)
        assert row_keys(attempts) == ["1"]
        assert cell(attempts, "1", "http") == "401"
        assert cell(attempts, "1", "action") == "stop_terminal"
        summary = static_text(screen, "#execution-summary")
        assert "failed" in summary and "Book a flight from LHR" in summary
        assert screen.sub_title == (
            f"CLI: truva-console --db debug.duckdb explain {real_store.refused} step-1"
        )
        await pilot.press("j")  # to the skipped step
        assert screen.step_id == "step-2"
        assert screen.sub_title.endswith(f"explain {real_store.refused} step-2")
        assert row_keys(attempts) == []
        note = static_text(screen, "#detail-note")
        assert note.startswith("step-2 was skipped:") and "It sent nothing" in note
        await pilot.press("k")
        assert screen.step_id == "step-1"


async def test_decision_tab_shows_rule_reason_inputs_and_rules_that_did_not_match(
    real_store: RealStore,
) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, real_store.corrected)
        assert (screen.step_id, screen.attempt_n) == ("step-1", 1)
        attempt = screen.detail.step("step-1").attempts[0]
        decision = static_text(screen, "#decision-body", width=300)
        assert "retry_corrected by rule analyzer.accept (layer analyzer)" in decision
        assert f"reason     {attempt.reason}" in decision
        assert 'corrected  {"city": "Tokyo"}' in decision
        assert "Why not: earlier rules that did not match" in decision
        not_matched = attempt.decision["not_matched"]
        transient = next(m for m in not_matched if m["rule_id"] == "transient.retry_same")
        assert "transient.retry_same" in decision and transient["reason"] in decision
        assert "Inputs analyzer.accept read" in decision
        assert "analyzer.changes.city" in decision and "validation_retries" not in decision
        assert "validation_retries" in static_text(screen, "#decision-other-inputs", width=300)


async def test_decision_tab_shows_recovery_impact_and_why_no_layer_ran(
    real_store: RealStore,
) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, real_store.refused)
        decision = " ".join(static_text(screen, "#decision-body", width=300).split())
        assert "recovery request authorization" in decision
        assert "impact the tool refused the credentials or the method (HTTP 401)" in decision
        assert "Correction layers: consulted, or why not" in decision
        assert "analyzer not consulted HTTP 401 is terminal: no layer may correct it" in decision


async def test_moving_to_the_next_attempt_shows_its_decision(real_store: RealStore) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    messages: list[object] = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        screen = await open_execution(app, pilot, real_store.rate_limited)
        await pilot.press("enter")  # step-1: focus its attempts
        assert app.focused is screen.query_one(AttemptTable)
        assert "retry_same by rule transient.retry_same" in static_text(screen, "#decision-body")
        await pilot.press("down")
        assert screen.attempt_n == 2
        assert "success by rule success.2xx" in static_text(screen, "#decision-body")
        highlighted = {id(m): m.n for m in messages
                       if isinstance(m, AttemptTable.AttemptHighlighted)}  # fmt: skip
        assert 2 in highlighted.values()
        await pilot.press("enter")  # into the detail tabs
        await pilot.press("right")
        assert screen.query_one("#detail-tabs", TabbedContent).active == "tab-request"


async def test_llm_tab_shows_the_full_prompt_and_raw_response(real_store: RealStore) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, real_store.corrected)
        await pilot.press("4")
        assert screen.query_one("#detail-tabs", TabbedContent).active == "tab-llm"
        assert not screen.detail.step("step-1").attempts[0].llm_calls[0].texts_loaded

        def first_call():
            return screen.shown_step("step-1").attempts[0].llm_calls[0]

        # the tab's first showing reads the step's texts in a worker; wait for them
        await settle_until(pilot, lambda: first_call().texts_loaded, "the LLM texts")
        await settle_until(pilot, lambda: "── raw response ──" in
                           screen.query_one("#llm-text", TextArea).text, "the LLM tab's text")
        shown = screen.query_one("#llm-text", TextArea).text
        call = first_call()
        for message in call.messages:
            assert message["content"] in shown  # every prompt message, complete
        assert real_store.analyzer_prompt.split("\n")[0] in shown
        assert f"── raw response ──\n{ANALYZER_ANSWER}\n" in shown
        assert "error_analysis · model scripted-model · HTTP 200" in shown
        assert f"= {call.total_tokens} tokens" in shown
        label = screen.query_one("#detail-tabs", TabbedContent).get_tab("tab-llm").label
        assert str(label) == "LLM (1)"
        await pilot.press("enter", "down")  # attempt 2 made no LLM call
        assert screen.query_one("#llm-text", TextArea).text == "No LLM call at this attempt.\n"


async def test_request_and_response_tabs_show_headers_and_pretty_json(
    real_store: RealStore,
) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, real_store.corrected)
        await pilot.press("2")
        request_head = static_text(screen, "#request-head", width=200)
        assert "sent        POST http://127.0.0.1:" in request_head
        assert "/capabilities/geocode" in request_head
        assert "Content-Type: application/json" in request_head
        body = screen.query_one("#request-body", TextArea)
        assert body.language == "json"
        assert json.loads(body.text) == {"city": "Tokio"} and "\n" in body.text
        await pilot.press("3")
        assert "received      HTTP 400" in static_text(screen, "#response-head", width=200)
        response = json.loads(screen.query_one("#response-body", TextArea).text)
        assert response["error"]["message"] == "unknown city Tokio"


async def test_a_non_utf8_body_is_shown_as_base64_with_a_note(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-3")
        await pilot.press("3")
        head = static_text(screen, "#response-head", width=200)
        assert f"{len(NON_UTF8_BODY)} bytes, not valid UTF-8: shown as base64" in head
        area = screen.query_one("#response-body", TextArea)
        assert area.text == base64.b64encode(NON_UTF8_BODY).decode("ascii")
        assert area.language is None


async def test_backoff_and_events_tab(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        screen.select_step("step-1")
        screen.select_attempt(1)
        await pilot.press("5")
        events = static_text(screen, "#events-body", width=200)
        assert "planned  1000.0 ms (set by retry_after_header)" in events
        assert "actual   1000.4 ms (finished)" in events
        assert "coercion  parameters_coerced" in events
        assert "circuit  closed->open  5 failures in a row" in events  # outside any step
        screen.select_step("step-5")
        events = static_text(screen, "#events-body", width=200)
        assert "no wait after this attempt" in events
        assert "notice  guard.rejected  required key 'city' is missing" in events
        await pilot.press("2")
        assert "nothing: the request was not dispatched" in static_text(screen, "#request-head")


async def test_escape_and_backspace_go_back(real_store: RealStore) -> None:
    app = tui_app(real_store.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        for key in ("escape", "backspace"):
            await open_execution(app, pilot, real_store.corrected)
            await pilot.press(key)
            assert isinstance(app.screen, ExecutionsScreen)


async def test_palette_commands_of_the_execution_screen(synthetic_db: Path) -> None:
    app = tui_app(synthetic_db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, TRIP)
        commands = {command.title: command for command in screen.palette_commands()}
        assert {"view: Back to executions", "view: Refresh", "tab: LLM",
                "step: Show step-4"} <= set(commands)  # fmt: skip
        commands["step: Show step-2"].run()
        commands["tab: Decision"].run()
        assert screen.step_id == "step-2"
        assert screen.query_one(StepTable).highlighted_key() == "step-2"
        assert screen.query_one(AttemptDetail).query_one(TabbedContent).active == "tab-decision"


async def test_a_running_execution_is_refreshed_until_it_finishes(tmp_path: Path) -> None:
    db = tmp_path / "debug.duckdb"
    events = realistic_execution("exec-live", start_at=START_AT)
    recorder = StoreRecorder(db)
    try:
        for event in events[:8]:  # started, step-1 started, coercion, first attempt (3 events)...
            recorder.record(event)
        recorder.flush()
        app = tui_app(db)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_execution(app, pilot, "exec-live")
            assert screen.refresh_interval_s == 1.0
            assert screen.detail.execution.status == "running"
            assert "● running" in static_text(screen, "#execution-summary")
            steps = screen.query_one(StepTable)
            assert cell(steps, "step-1", "status") == "● running"
            assert cell(steps, "step-1", "dispatches") == "1"  # counted from its attempt so far
            for event in events[8:]:
                recorder.record(event)
            recorder.flush()
            screen.poll_store()  # what the one-second timer calls
            # The poll's answer can start further reads; wait for the state, not one round.
            await settle_until(pilot, lambda: screen.detail.execution.status == "partial",
                               "the finished execution shown")
            assert screen.detail.execution.status == "partial"
            assert row_keys(screen.query_one(StepTable))[-1] == "step-5"
    finally:
        recorder.close()


async def test_corrections_column_counts_a_layer_4_correction_once(tmp_path: Path) -> None:
    from console.samples import prepare_sample_store
    from store.queries import ExecutionFilter, open_store

    db = prepare_sample_store(tmp_path / "samples")
    page = open_store(db).list_executions(ExecutionFilter(rule_id="re_resolution.accept"))
    (tesla,) = [row.execution_id for row in page.executions]
    app = tui_app(db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, tesla)
        steps = screen.query_one(StepTable)
        assert cell(steps, "step-2", "corrections") == "1"
