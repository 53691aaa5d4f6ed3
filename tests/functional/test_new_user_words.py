"""What a new user reads in `run`, `explain` and the TUI: sent parameters, counts, plural nouns,
what came back when nothing did, and one line per item whatever an LLM endpoint answers.

The store is recorded through the real CLI against loopback tools and the scripted
OpenAI-compatible server; one tool URL and one LLM URL point at a port nobody listens on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.llm_server import ScriptedLLMServer
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ScriptedToolServer, ToolReply, refused_port
from tests.support.tui import llm_tab_shown, open_execution, static_text, tui_app

SIZE = (160, 40)
CITY = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}  # fmt: skip
MULTILINE_REASON = "Tokio is a typo.\nThe city is Tokyo.\r\n(Japan)"
ANALYZER_FIX = json.dumps({"should_retry": True, "reason": "Tokio is a typo of Tokyo",
                           "suggested_changes": {"city": "Tokyo"}, "is_transient_error": False})
MULTILINE_FIX = json.dumps({"should_retry": True, "reason": MULTILINE_REASON,
                            "suggested_changes": {"city": "Tokyo"}, "is_transient_error": False})


@dataclass(frozen=True, slots=True)
class Run:
    """One `truva-console run` (text output) recorded into the store."""

    execution_id: str
    stdout: str


@dataclass(frozen=True, slots=True)
class Recorded:
    db: Path
    corrected: Run
    llm_multiline: Run
    llm_unreachable: Run
    tool_unreachable: Run
    resent: Run


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    directory = tmp_path_factory.mktemp("words")
    db = directory / "debug.duckdb"
    runs = []
    with ScriptedToolServer() as tools, ScriptedLLMServer() as llm, refused_port() as port:
        closed = f"http://127.0.0.1:{port}"
        invalid = ToolReply.error(400, "INVALID_CITY", "unknown city Tokio", "INPUT_ERROR")
        found = ToolReply.ok({"lat": 35.6897})
        tools.script("/capabilities/geocode", invalid, found, invalid, found, invalid)
        tools.script("/capabilities/busy", ToolReply(status=503, body="busy"),
                     ToolReply(status=503, body="busy"), ToolReply.ok({"done": True}))
        llm.script(ANALYZER_FIX, MULTILINE_FIX)
        caps = {"geocode": capability("geocode", schema=CITY), "busy": capability("busy")}
        one_step = [step("step-1", "geocode", {"city": "Tokio", "days": "3"})]
        documents = [
            plan(tools.base_url, caps, one_step, llm_base_url=llm.base_url),
            plan(tools.base_url, caps, one_step, llm_base_url=llm.base_url),
            plan(tools.base_url, caps, one_step, llm_base_url=f"{closed}/v1"),
            plan(closed, caps, one_step),
            plan(tools.base_url, caps, [step("step-1", "busy", {"job": 7})]),
        ]  # fmt: skip
        for index, document in enumerate(documents):
            result = run_cli("--db", str(db), "run",
                             str(write_plan(directory, document, f"plan-{index}.json")))
            assert result.code == 0, result.stderr
            execution_id = result.stdout.split()[1].rstrip(":")
            runs.append(Run(execution_id, result.stdout))
    return Recorded(db, *runs)


# ------------------------------------------------------------------------------------ run


def test_run_summary_shows_what_each_attempt_sent_after_a_correction(recorded: Recorded):
    lines = [line for line in recorded.corrected.stdout.splitlines()
             if not line.startswith("       recovery: ")]  # fmt: skip
    assert lines[1:] == [
        "  step-1: succeeded — 2 dispatches, 1 correction",
        "    #1 HTTP 400 → retry_corrected [analyzer.accept]",
        '       sent {"city": "Tokio", "days": 3}',
        "       layer 3 analyzer corrected city: Tokio is a typo of Tokyo",
        "    #2 HTTP 200 → success [success.2xx]",
        '       sent {"city": "Tokyo", "days": 3}',
        "       HTTP 200 is success",
    ]


def test_run_summary_keeps_a_multiline_llm_answer_on_one_line(recorded: Recorded):
    lines = recorded.llm_multiline.stdout.splitlines()
    assert lines[2] == "    #1 HTTP 400 → retry_corrected [analyzer.accept]"
    assert lines[4] == ("       layer 3 analyzer corrected city: "
                        "Tokio is a typo.\\nThe city is Tokyo.\\r\\n(Japan)")  # fmt: skip
    assert lines[5].startswith("       recovery: ")
    assert lines[6] == "    #2 HTTP 200 → success [success.2xx]"


def test_run_summary_says_what_a_transport_failure_was(recorded: Recorded):
    out = recorded.tool_unreachable.stdout
    assert "HTTP None" not in out and "HTTP 0" not in out
    # a refused connection put nothing on the wire: no dispatch, and the attempt says so
    assert "  step-1: rejected — 0 dispatches, 0 corrections" in out  # SPEC §3.2
    assert "    #1 not sent (the connection failed) → retry_same [transient.retry_same]" in out
    assert "    #3 not sent (the connection failed) → stop_budget [budget.attempts]" in out
    assert '       parameters {"city": "Tokio", "days": 3}' in out and "sent {" not in out


# -------------------------------------------------------------------------------- explain


def _explain(recorded: Recorded, run: Run) -> str:
    result = run_cli("--db", str(recorded.db), "explain", run.execution_id)
    assert result.code == 0, result.stderr
    return result.stdout


def test_explain_step_line_shows_the_planned_and_each_sent_parameters(recorded: Recorded):
    lines = _explain(recorded, recorded.corrected).splitlines()
    head = lines.index("== step step-1  demo.geocode  succeeded  "
                       "(2 dispatches, 2 attempts, 1 correction, 0 re-resolutions)")  # fmt: skip
    assert lines[head + 2: head + 5] == [
        '    planned     {"city": "Tokio", "days": "3"}',
        '    sent #1     {"city": "Tokio", "days": 3}',
        '    sent #2     {"city": "Tokyo", "days": 3} (corrected by the analyzer layer)',
    ]


def test_explain_counts_use_singular_nouns_for_one(recorded: Recorded):
    out = _explain(recorded, recorded.llm_unreachable)
    assert "(1 dispatch, 1 attempt, 0 corrections, 0 re-resolutions)" in out
    assert "    sent #1     " in out
    assert "1 dispatches" not in out and "1 attempts" not in out


def test_explain_llm_call_that_got_no_response_says_so(recorded: Recorded):
    out = _explain(recorded, recorded.llm_unreachable)
    assert "HTTP None" not in out
    assert ("llm call    error_analysis  model scripted-model  no HTTP response  "
            "tokens unknown") in out


def test_explain_merges_identical_resends_into_one_sent_line(recorded: Recorded):
    out = _explain(recorded, recorded.resent)
    assert "(3 dispatches, 3 attempts, 0 corrections, 0 re-resolutions)" in out
    assert '    sent #1-#3  {"job": 7}' in out


def test_explain_a_refused_connection_says_nothing_reached_the_wire(recorded: Recorded):
    out = _explain(recorded, recorded.tool_unreachable)
    assert "(0 dispatches, 3 attempts, 0 corrections, 0 re-resolutions)" in out
    assert '    not sent #1-#3 {"city": "Tokio", "days": 3}' in out
    assert "sent        nothing reached the wire: the connection for POST http://127.0.0.1:" in out
    assert "received    transport error connect" in out


# ------------------------------------------------------------------------------------ TUI


async def test_tui_step_line_shows_what_each_attempt_sent(recorded: Recorded):
    app = tui_app(recorded.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_execution(app, pilot, recorded.corrected.execution_id)
        line = static_text(screen, "#step-summary", width=400)
        assert 'planned {"city": "Tokio", "days": "3"}' in line
        assert 'sent #1 {"city": "Tokio", "days": 3}' in line
        assert 'sent #2 {"city": "Tokyo", "days": 3} (corrected by the analyzer layer)' in line
        summary = static_text(screen, "#execution-summary", width=400)
        assert "1 step: 1 ok" in summary and "2 attempts, 2 dispatched" in summary
        assert "1 LLM call, " in summary


async def test_tui_llm_tab_of_a_call_without_response(recorded: Recorded):
    app = tui_app(recorded.db, live_refresh=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_execution(app, pilot, recorded.llm_unreachable.execution_id)
        shown = await llm_tab_shown(pilot)
        assert "· no HTTP response ══" in shown and "HTTP None" not in shown
        assert "usage       tokens unknown" in shown and "tokens tokens" not in shown

