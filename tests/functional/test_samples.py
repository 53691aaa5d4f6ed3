"""The bundled sample traces: present, readable, current, and replayed into a store quickly."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from console import samples
from console.demo.runner import (
    DEMO_PLAN_NAMES,
    DemoEndpoints,
    bundled_plan,
    fill_placeholders,
    parse_demo_plan,
    with_fast_timing,
)
from console.samples import (
    SampleStoreError,
    prepare_sample_store,
    sample_execution_ids,
    sample_trace_files,
    sample_traces_dir,
)
from console.tui.screens.whatif import ChangeTable, WhatIfScreen
from console.tui.widgets.cells import SAMPLES_DB_ARG
from executor.eventlog import read_event_log
from store.queries import ExecutionFilter, open_store
from tests.support.demo_outcomes import EVERY_FINAL_ACTION, EXPECTED
from tests.support.plans import run_subprocess
from tests.support.tui import screen_loaded, settle_until, shown_text, table_cell, tui_app

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sample_store() -> Path:
    return prepare_sample_store()


def test_samples_come_from_the_checkout_and_cover_every_demo_plan():
    assert sample_traces_dir() == REPO / "sample_traces"
    names = [path.name.removesuffix(".events.jsonl") for path in sample_trace_files()]
    assert names == sorted(DEMO_PLAN_NAMES)


@pytest.mark.parametrize("name", list(EXPECTED), ids=list(EXPECTED))
def test_each_sample_is_one_whole_execution_of_its_plan(name):
    events = read_event_log(REPO / "sample_traces" / f"{name}.events.jsonl")
    started, finished = events[0], events[-1]
    assert (started.kind, finished.kind) == ("execution_started", "execution_finished")
    assert {event.execution_id for event in events} == {started.execution_id}
    assert started.plan_path == f"demo:{name}"
    assert finished.status == EXPECTED[name][0]


@pytest.mark.parametrize("name", list(EXPECTED), ids=list(EXPECTED))
def test_each_sample_was_recorded_from_the_current_bundled_plan(name):
    started = read_event_log(REPO / "sample_traces" / f"{name}.events.jsonl")[0]
    recorded = started.plan
    base_urls = {tool: spec["base_url"] for tool, spec in recorded["tools"].items()}
    endpoints = DemoEndpoints(base_urls, recorded["llm"]["base_url"])
    filled = fill_placeholders(bundled_plan(name), endpoints)
    current = parse_demo_plan(name, with_fast_timing(filled))
    assert current.to_dict() == recorded, (
        f"sample_traces/{name}.events.jsonl is stale: run `python -m console.demo.rerecord`"
    )


@pytest.mark.parametrize("name", list(EXPECTED), ids=list(EXPECTED))
def test_sample_store_shows_every_sample_with_its_status_and_rules(sample_store, name):
    store = open_store(sample_store)
    rows = [r for r in store.list_executions(limit=100).executions if r.plan_path == f"demo:{name}"]
    assert len(rows) == 1
    status, steps = EXPECTED[name]
    assert rows[0].status == status
    detail = store.get_execution(rows[0].execution_id)
    got = {
        step.step_id: (step.status, [attempt.rule_id for attempt in step.attempts])
        for step in detail.steps
    }
    assert got == steps


RULE_FILTERS = [
    ("analyzer.accept", ["flower-mound", "parallel-partial", "scenario-a-invalid-city"]),
    ("terminal.auth_or_method", ["scenario-c-expired-key"]),
    ("re_resolution.accept", ["tesla-layer4"]),
    ("budget.attempts", ["circuit-open", "scenario-d-misclassified-503"]),
    ("side_effects.unsafe_resend", ["unsafe-charge"]),
    ("guard.reject_predispatch", ["guard-rejection"]),
    ("refused.explicit_false", ["parallel-partial"]),
    ("transient.retry_same", ["circuit-open", "parallel-partial", "scenario-b-rate-limit",
                              "scenario-d-misclassified-503", "tesla-layer4"]),
    ("analyzer.protected", ["hitl-protected"]),
    ("orchestrator.single_dispatch", ["orchestrator-timeout"]),
    ("no_correction.stop", ["no-correction"]),
    ("circuit.open", ["circuit-open"]),
    ("cancel.in_flight", ["cancelled-report"]),
]  # fmt: skip


@pytest.mark.parametrize(("rule_id", "names"), RULE_FILTERS, ids=[r for r, _ in RULE_FILTERS])
def test_sample_store_filters_by_rule(sample_store, rule_id, names):
    page = open_store(sample_store).list_executions(ExecutionFilter(rule_id=rule_id))
    assert sorted(row.plan_path for row in page.executions) == [f"demo:{n}" for n in names]


def test_sample_store_shows_every_final_action(sample_store):
    counts = open_store(sample_store).summary_counts()
    assert sorted(counts["attempts_by_action"]) == sorted(EVERY_FINAL_ACTION)
    assert counts["executions"] >= 12


def test_sample_ids_have_the_current_format():
    ids = samples.sample_execution_ids()
    assert sorted(ids) == sorted(DEMO_PLAN_NAMES)
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{10}", value) for value in ids.values()), ids


def test_sample_store_keeps_llm_calls_and_statuses(sample_store):
    store = open_store(sample_store)
    counts = store.summary_counts()
    assert counts["executions_by_status"] == {
        "failed": 7, "succeeded": 4, "partial": 2, "cancelled": 1}  # fmt: skip
    rows = {r.plan_path: r for r in store.list_executions(limit=100).executions}
    assert rows["demo:tesla-layer4"].llm_calls == 2
    assert rows["demo:scenario-c-expired-key"].llm_calls == 0
    tesla = store.get_execution(rows["demo:tesla-layer4"].execution_id).step("step-2")
    sites = [call.site for attempt in tesla.attempts for call in attempt.llm_calls]
    assert sites == ["error_analysis", "semantic_retry"]


@pytest.mark.serial  # a bound on CPU seconds
def test_prepare_sample_store_is_fast_and_fresh_each_time(tmp_path):
    started = time.process_time()  # CPU seconds of this process: the machine's load does not count
    first = prepare_sample_store()
    elapsed_s = time.process_time() - started
    second = prepare_sample_store(tmp_path / "mine.duckdb")
    assert elapsed_s < 2.0
    assert first != second and second == tmp_path / "mine.duckdb"
    assert open_store(second).list_executions().total == len(DEMO_PLAN_NAMES)


def test_prepare_sample_store_refuses_an_existing_file(tmp_path):
    existing = tmp_path / "taken.duckdb"
    existing.write_bytes(b"")
    with pytest.raises(SampleStoreError, match=r"taken\.duckdb: already exists"):
        prepare_sample_store(existing)


def test_installed_layout_reads_package_data(tmp_path, monkeypatch):
    installed = tmp_path / "site-packages" / "console"
    (installed / "_sample_traces").mkdir(parents=True)
    source = REPO / "sample_traces" / "flower-mound.events.jsonl"
    (installed / "_sample_traces" / source.name).write_bytes(source.read_bytes())
    (installed / "_sample_traces" / "README.md").write_text("x", encoding="utf-8")
    monkeypatch.setattr(samples, "_PACKAGE_DIR", installed)
    monkeypatch.setattr(samples, "_INSTALLED_SAMPLES", installed / "_sample_traces")
    assert sample_trace_files() == [installed / "_sample_traces" / source.name]
    db = prepare_sample_store(tmp_path / "installed.duckdb")
    assert open_store(db).list_executions().total == 1


def test_no_samples_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(samples, "_PACKAGE_DIR", tmp_path / "console")
    monkeypatch.setattr(samples, "_INSTALLED_SAMPLES", tmp_path / "console" / "_sample_traces")
    assert sample_trace_files() == []
    with pytest.raises(SampleStoreError, match="no sample traces"):
        prepare_sample_store()


# ------------------------------------------------- what the console shows on the samples (issue 13)

DEMO_TOOLS = ["currency", "payments", "stocks", "travel", "weather"]


def _cli_json(*argv: str) -> dict:
    result = run_subprocess("--samples", *argv, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def _recorded_decisions() -> int:
    return sum(1 for path in sample_trace_files() for event in read_event_log(path)
               if event.kind == "attempt_decided")  # fmt: skip


def test_samples_whatif_re_decides_every_recorded_decision():
    """No overrides: the policy code re-decides all of them, none "recorded by an older version"."""
    report = _cli_json("whatif", "--json")
    assert report["decisions"] == _recorded_decisions() == 41
    assert report["executions"] == len(DEMO_PLAN_NAMES)
    assert report["not_redecided"] == {"incomplete_inputs": 0, "missing_inputs": [],
                                       "unreadable": 0}  # fmt: skip
    assert (report["changed"], report["changes"]) == (0, []), (
        "the installed policy code decides a sample differently: run `make samples`"
    )


def test_samples_whatif_max_attempts_5_resends_scenario_d():
    report = _cli_json("whatif", "--config", "max_attempts=5", "--json")
    scenario_d = sample_execution_ids()["scenario-d-misclassified-503"]
    changes = [c for c in report["changes"] if c["execution_id"] == scenario_d]
    assert [(c["step_id"], c["n"], c["before"], c["after"]) for c in changes] == [
        ("step-1", 3, {"action": "stop_budget", "rule_id": "budget.attempts"},
         {"action": "retry_same", "rule_id": "transient.retry_same",
          "delay_ms": 40.0})]  # fmt: skip
    assert "attempt 4 of 5" in changes[0]["reason"]
    assert "attempt #4 is not recorded" in changes[0]["consequence"]
    assert report["not_redecided"]["incomplete_inputs"] == 0


def test_samples_lint_grades_every_demo_tool_and_fails_scenario_d():
    cards = {card["tool"]: card for card in _cli_json("lint", "--json")["tools"]}
    assert sorted(cards) == DEMO_TOOLS
    checks = {check["check"]: check for check in cards["weather"]["checks"]}
    assert cards["weather"]["grade"] == checks["input_error_status"]["grade"] == "fail"
    example = checks["input_error_status"]["example"]
    assert (example["execution_id"], example["http_status"]) == (
        sample_execution_ids()["scenario-d-misclassified-503"], 503)  # fmt: skip


async def test_sample_console_whatif_screen_shows_scenario_d_resent_under_max_attempts_5(tmp_path):
    """`truva-console --samples`, `w`, `max_attempts=5`: every decision re-decided, D resent."""
    db = prepare_sample_store(tmp_path / "samples.duckdb")
    scenario_d = sample_execution_ids()["scenario-d-misclassified-503"]
    app = tui_app(db, db_arg=SAMPLES_DB_ARG, live_refresh=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await screen_loaded(pilot)
        await pilot.press("w")
        await settle_until(pilot, lambda: isinstance(app.screen, WhatIfScreen), "what-if")
        screen = app.screen
        assert app.focused is screen.query_one("#whatif-config", Input)
        await pilot.press(*"max_attempts=5", "enter")
        await settle_until(pilot, lambda: screen.view is not None, "the what-if result")
        shown = shown_text(screen.query_one("#whatif-status", Static).content, 1000)
        assert "41 decisions in 14 executions re-decided" in shown
        assert "6 decisions would change, in 2 steps" in shown
        assert "older version" not in shown and "not re-decided" not in shown
        changes = screen.query_one(ChangeTable)
        rows = {
            tuple(table_cell(changes, str(i), column) for column in ("execution", "n", "after"))
            for i in range(changes.row_count)
        }
        assert (scenario_d, "3", "retry_same transient.retry_same after 40.0 ms") in rows
        assert screen.twin_command == "truva-console --samples whatif --config max_attempts=5"


async def test_sample_whatif_summary_is_shown_whole_at_140_columns(tmp_path):
    """The what-if summary's lines (the 'not re-run' sentence included) are not cut at 140×40."""
    db = prepare_sample_store(tmp_path / "samples.duckdb")
    app = tui_app(db, db_arg=SAMPLES_DB_ARG, live_refresh=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await screen_loaded(pilot)
        await pilot.press("w")
        await settle_until(pilot, lambda: isinstance(app.screen, WhatIfScreen), "what-if")
        screen = app.screen
        await pilot.press(*"max_attempts=5", "enter")
        await settle_until(pilot, lambda: screen.view is not None, "the what-if result")
        await pilot.pause()
        status = screen.query_one("#whatif-status", Static)
        shown = shown_text(status.content, 1000)
        assert "to check the policy code itself)" in shown
        width = status.content_size.width
        needed = status.get_content_height(status.container_size, app.size, width)
        assert needed > 4
        assert status.content_size.height >= needed
