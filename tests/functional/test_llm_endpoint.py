"""The LLM layers seen from a run: the intent they are given, endpoint failures, llm_debug off.

Real tool servers and a scripted OpenAI-compatible server on 127.0.0.1, reached through the real
`openai` client; waits go through the executor's injected sleep so no test waits for real.
"""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pyarrow.ipc as ipc
import pytest

from executor.backoff import BackoffConfig
from executor.events import ListRecorder
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from store.ingest import encode_events
from store.queries import open_store
from store.spool import WriterIdentity
from tests.support.llm_server import LLMReply, ScriptedLLMServer
from tests.support.plans import capability, plan, run_cli, run_plan_json, step
from tests.support.tool_server import ScriptedToolServer, ToolReply
from tests.support.tui import llm_tab_shown, screen_loaded, settle_until, tui_app

QUERY = "Find hotels in Paris for April 1-3"
INSTRUCTION = "Search hotels with the IATA city code of the destination"
CITY = {"type": "object", "properties": {"city_code": {"type": "string"}},
        "required": ["city_code"]}
NO_JITTER = {"initial_delay_ms": 100, "max_delay_ms": 10_000, "backoff_factor": 2.0,
             "jitter": False}


def analysis(should_retry: bool, changes: dict | None = None, reason: str = "scripted") -> str:
    return json.dumps({"should_retry": should_retry, "reason": reason,
                       "suggested_changes": changes or {}, "is_transient_error": False})


def hotel_plan(tool: ScriptedToolServer, llm: ScriptedLLMServer, *, instruction: str | None,
               config: dict | None = None, depends: bool = False) -> dict[str, Any]:
    steps = []
    if depends:
        steps.append(step("step-0", "lookup", {"name": "Paris"}))
    hotel = step("step-1", "search_hotels", {"city_code": "PARIS"},
                 depends_on=["step-0"] if depends else None)
    if instruction is not None:
        hotel["instruction"] = instruction
    steps.append(hotel)
    return plan(tool.base_url, {"search_hotels": capability("search_hotels", schema=CITY),
                                "lookup": capability("lookup")},
                steps, query=QUERY, config=config, llm_base_url=llm.base_url)


def bad_city(tool: ScriptedToolServer, *then: ToolReply) -> None:
    tool.script("/capabilities/search_hotels",
                ToolReply.error(400, "INVALID_CITY", "INVALID CITY CODE: PARIS", "INPUT_ERROR"),
                *then)


class RecordingSleep:
    """An injected sleep that records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


async def run_executor(document: dict[str, Any], sleep: Any = None, **kwargs: Any):
    recorder = ListRecorder()
    executor = PlanExecutor(parse_plan(document), recorder=recorder, env={},
                            sleep=sleep or RecordingSleep(), **kwargs)
    outcome = await executor.run()
    return outcome, recorder


def block(prompt: str, tag: str) -> str:
    """The text between `<tag>` and `</tag>` in a prompt."""
    start = prompt.index(f"<{tag}>\n") + len(tag) + 3
    return prompt[start:prompt.index(f"\n</{tag}>", start)]


def final(outcome, step_id: str = "step-1"):
    return next(s for s in outcome.steps if s.id == step_id).attempts[-1]


# ---------------------------------------------------------------- 10: the user's intent


async def test_layer_3_prompt_has_the_user_query_and_the_step_instruction(
    tool_server, llm_server
):
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(analysis(True, {"city_code": "PAR"}))
    outcome, _ = await run_executor(hotel_plan(tool_server, llm_server, instruction=INSTRUCTION))
    assert outcome.status == "succeeded"
    assert block(llm_server.prompts[0], "user_query") == (
        f"User query: {QUERY}\nStep instruction: {INSTRUCTION}"
    )


async def test_layer_4_prompt_has_the_user_query_and_the_step_instruction(
    tool_server, llm_server
):
    tool_server.script("/capabilities/lookup", ToolReply.ok({"iata": "PAR"}))
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(
        analysis(False, reason="cannot know the code"),
        json.dumps({"should_retry": True, "analysis": "lookup says PAR",
                    "corrected_parameters": {"city_code": "PAR"}}),
    )
    outcome, _ = await run_executor(
        hotel_plan(tool_server, llm_server, instruction=INSTRUCTION, depends=True))
    assert final(outcome).rule == "success.2xx"
    assert outcome.steps[1].attempts[0].rule == "re_resolution.accept"
    assert block(llm_server.prompts[1], "user_request") == (
        f"User query: {QUERY}\nStep instruction: {INSTRUCTION}"
    )
    assert block(llm_server.prompts[0], "user_query") == (
        f"User query: {QUERY}\nStep instruction: {INSTRUCTION}"
    )


async def test_a_step_without_instruction_sends_the_query_as_is(tool_server, llm_server):
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(analysis(True, {"city_code": "PAR"}))
    await run_executor(hotel_plan(tool_server, llm_server, instruction=None))
    assert block(llm_server.prompts[0], "user_query") == QUERY


# ---------------------------------------------------------------- 11: endpoint failures


def test_llm_503_twice_then_answer_applies_the_correction_with_three_rows(
    tmp_path, tool_server, llm_server
):
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(LLMReply(status=503, content="overloaded"),
                      LLMReply(status=503, content="overloaded"),
                      analysis(True, {"city_code": "PAR"}))
    doc = run_plan_json(tmp_path, hotel_plan(tool_server, llm_server, instruction=None))
    one = doc["steps"][0]
    assert [(a["status"], a["rule"]) for a in one["attempts"]] == [
        (400, "analyzer.accept"), (200, "success.2xx")]
    assert doc["llm_calls"] == 3 and len(llm_server.requests) == 3
    detail = open_store(tmp_path / "store" / "debug.duckdb").get_execution(doc["execution_id"])
    attempt = detail.step("step-1").attempts[0]
    assert [c.response_status for c in attempt.llm_calls] == [503, 503, 200]
    assert [e.name for e in attempt.events if e.kind == "notice"] == [
        "llm.retry_wait", "llm.retry_wait"]
    assert [r.json["city_code"] for r in tool_server.received("/capabilities/search_hotels")] == [
        "PARIS", "PAR"]


async def test_llm_retry_waits_are_the_executor_backoff_through_the_injected_sleep(
    tool_server, llm_server
):
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(LLMReply(status=500), LLMReply(status=502),
                      analysis(True, {"city_code": "PAR"}))
    sleep = RecordingSleep()
    outcome, recorder = await run_executor(
        hotel_plan(tool_server, llm_server, instruction=None, config=NO_JITTER), sleep=sleep)
    backoff = BackoffConfig.from_ms(100, 10_000, 2.0, False)
    assert sleep.waits == [backoff.delay_ms(1) / 1000, backoff.delay_ms(2) / 1000] == [0.1, 0.2]
    notices = [n.message for n in recorder.of_kind("notice")
               if n.name == "llm.retry_wait"]
    assert notices == [
        "layer 3 analyzer: LLM try 1 of 3 failed (HTTP 500); trying again after 100.0 ms "
        "(backoff)",
        "layer 3 analyzer: LLM try 2 of 3 failed (HTTP 502); trying again after 200.0 ms "
        "(backoff)",
    ]
    assert outcome.steps[0].status == "succeeded"


def test_llm_503_three_times_stops_as_unavailable_not_cannot_fix(
    tmp_path, tool_server, llm_server
):
    bad_city(tool_server)
    llm_server.script(*[LLMReply(status=503, content="overloaded")] * 3)
    doc = run_plan_json(tmp_path, hotel_plan(tool_server, llm_server, instruction=None))
    (attempt,) = doc["steps"][0]["attempts"]
    assert (attempt["action"], attempt["rule"]) == ("stop_no_correction", "analyzer.unavailable")
    assert attempt["reason"] == (
        "HTTP 400: the layer 3 analyzer was unavailable (HTTP 503 ×3); no correction, and a "
        "non-transient 4xx is never resent unchanged"
    )
    assert "cannot fix" not in attempt["reason"]
    assert len(llm_server.requests) == 3 and doc["llm_calls"] == 3
    assert len(tool_server.received("/capabilities/search_hotels")) == 1


async def test_an_llm_error_that_echoes_the_api_key_is_redacted_in_the_decision(
    tool_server, llm_server
):
    """OpenAI's 401 quotes the key it got; the decision, its inputs and the reason must not."""
    key = "sk-test-SECRETKEY1234567890abcdefABCDEF"
    bad_city(tool_server)
    llm_server.script(LLMReply(status=401, content=f"Incorrect API key provided: {key}."))
    document = hotel_plan(tool_server, llm_server, instruction=None)
    document["llm"]["api_key"] = key
    outcome, recorder = await run_executor(document)
    attempt = final(outcome)
    assert attempt.rule == "analyzer.unavailable"
    decided = [e for e in recorder.events if type(e).__name__ == "AttemptDecided"]
    texts = [json.dumps(outcome.to_dict()), *(repr(e) for e in decided),
             *(e.error for e in recorder.of_kind("llm_call"))]  # its body stays as received
    assert decided and not [text for text in texts if key in text]
    (call,) = recorder.of_kind("llm_call")
    assert "Incorrect API key provided: [REDACTED]" in call.error


async def test_llm_429_retry_after_is_waited_in_full(tool_server, llm_server):
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(LLMReply(status=429, content="slow down", headers={"Retry-After": "7"}),
                      analysis(True, {"city_code": "PAR"}))
    sleep = RecordingSleep()
    outcome, recorder = await run_executor(
        hotel_plan(tool_server, llm_server, instruction=None), sleep=sleep)
    assert sleep.waits == [7.0]
    (notice,) = [n for n in recorder.of_kind("notice") if n.name == "llm.retry_wait"]
    assert notice.message.endswith("failed (HTTP 429); trying again after 7000.0 ms "
                                   "(retry_after_header)")
    assert notice.attrs == {"site": "error_analysis", "try": 1, "max_tries": 3,
                            "failure": "HTTP 429", "delay_ms": 7000.0,
                            "delay_source": "retry_after_header"}
    assert outcome.steps[0].status == "succeeded"


@pytest.mark.parametrize(("retry_after", "asks_for"), [
    ("120", "120000.0 ms"),
    # 400 nines of seconds is the longest wait a float holds; the reason says it in 4 digits,
    # as the tool path's reasons do, not in the 309 of a fixed-point rendering.
    ("9" * 400, "1.798e+308 ms"),
], ids=["two_minutes", "too_long_for_a_float"])
async def test_llm_retry_after_beyond_the_cap_is_not_waited(
    tool_server, llm_server, retry_after, asks_for
):
    bad_city(tool_server)
    llm_server.script(LLMReply(status=429, headers={"Retry-After": retry_after}))
    sleep = RecordingSleep()
    outcome, _ = await run_executor(
        hotel_plan(tool_server, llm_server, instruction=None), sleep=sleep)
    assert sleep.waits == []
    attempt = final(outcome)
    assert attempt.rule == "analyzer.unavailable"
    assert (f"unavailable (HTTP 429 ×1; not retried: Retry-After asks for {asks_for}, more "
            "than retry_after_max_ms 60000)") in attempt.reason
    assert len(attempt.reason) < 400
    assert len(llm_server.requests) == 1


async def test_llm_retry_after_too_long_for_the_wall_clock_is_said_in_short(
    tool_server, llm_server
):
    bad_city(tool_server)
    llm_server.script(LLMReply(status=429, headers={"Retry-After": "9" * 400}))
    sleep = RecordingSleep()
    outcome, _ = await run_executor(
        hotel_plan(tool_server, llm_server, instruction=None,
                   config={"retry_after_max_ms": None, "max_wall_clock_s": 10}),
        sleep=sleep)
    assert sleep.waits == []
    assert ("not retried: the wait of 1.798e+308 ms would outlast the wall-clock budget"
            in final(outcome).reason)


async def test_llm_retries_stop_at_the_llm_call_budget(tool_server, llm_server):
    bad_city(tool_server)
    llm_server.script(*[LLMReply(status=503)] * 3)
    outcome, _ = await run_executor(
        hotel_plan(tool_server, llm_server, instruction=None, config={"max_llm_calls": 2}))
    assert final(outcome).rule == "analyzer.unavailable"
    assert ("(HTTP 503 ×2; not retried: LLM-call budget used up (2 of 2 calls))"
            in final(outcome).reason)
    assert len(llm_server.requests) == 2


async def test_llm_retry_wait_beyond_the_wall_clock_budget_is_not_waited(
    tool_server, llm_server
):
    bad_city(tool_server)
    llm_server.script(LLMReply(status=429, headers={"Retry-After": "30"}))
    sleep = RecordingSleep()
    outcome, _ = await run_executor(
        hotel_plan(tool_server, llm_server, instruction=None, config={"max_wall_clock_s": 10}),
        sleep=sleep)
    assert sleep.waits == []
    assert "not retried: the wait of 30000.0 ms would outlast the wall-clock budget" in (
        final(outcome).reason)


async def test_llm_401_is_not_retried(tool_server, llm_server):
    bad_city(tool_server)
    llm_server.script(LLMReply(status=401, content="bad key"))
    outcome, _ = await run_executor(hotel_plan(tool_server, llm_server, instruction=None))
    assert final(outcome).rule == "analyzer.unavailable"
    assert "(HTTP 401 ×1; not retried: HTTP 401 is not transient)" in final(outcome).reason
    assert "the LLM endpoint refused the call (HTTP 401)" in final(outcome).impact
    assert "fix the LLM credential, llm.api_key or OPENAI_API_KEY" in final(outcome).impact
    assert len(llm_server.requests) == 1


async def test_llm_connection_drops_are_retried_and_counted(tool_server, llm_server):
    bad_city(tool_server)
    llm_server.script(*[LLMReply(drop=True)] * 3)
    outcome, recorder = await run_executor(hotel_plan(tool_server, llm_server, instruction=None))
    assert final(outcome).rule == "analyzer.unavailable"
    assert "was unavailable (connection error ×3)" in final(outcome).reason
    assert len(recorder.of_kind("llm_call")) == 3


async def test_llm_timeout_is_retried(tool_server, llm_server):
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(LLMReply(content=analysis(True, {"city_code": "X"}), delay_s=30.0),
                      analysis(True, {"city_code": "PAR"}))
    document = hotel_plan(tool_server, llm_server, instruction=None)
    document["llm"]["timeout_s"] = 1.0
    outcome, recorder = await run_executor(document)
    errors = [c.error for c in recorder.of_kind("llm_call")]
    assert errors == ["LLM request timed out after 1 s", None]
    assert outcome.steps[0].attempts[0].rule == "analyzer.accept"


async def test_re_resolver_unavailable_has_its_own_rule(tool_server, llm_server):
    bad_city(tool_server)
    llm_server.script(analysis(False, reason="cannot know"),
                      *[LLMReply(status=503)] * 3)
    outcome, _ = await run_executor(hotel_plan(tool_server, llm_server, instruction=None))
    attempt = final(outcome)
    assert (attempt.action, attempt.rule) == ("stop_no_correction", "re_resolution.unavailable")
    assert "the layer 4 re-resolver was unavailable (HTTP 503 ×3)" in attempt.reason
    assert len(llm_server.requests) == 4


async def test_legacy_correction_unavailable_has_its_own_rule(tool_server, llm_server):
    tool_server.script("/capabilities/search_hotels",
                       ToolReply.error(400, "BAD", "json: cannot unmarshal string into Go "
                                       "struct field .count of type int", "INPUT_ERROR"))
    llm_server.script(*[LLMReply(status=502)] * 3)
    outcome, _ = await run_executor(hotel_plan(
        tool_server, llm_server, instruction=None, config={"error_analyzer_enabled": False}))
    attempt = final(outcome)
    assert (attempt.action, attempt.rule) == ("stop_no_correction", "legacy.unavailable")
    assert "the legacy correction callback was unavailable (HTTP 502 ×3)" in attempt.reason
    assert len(llm_server.requests) == 3


async def test_cancel_during_an_llm_retry_wait_stops_at_once(tool_server, llm_server):
    bad_city(tool_server)
    llm_server.script(*[LLMReply(status=503)] * 3)
    executor: PlanExecutor | None = None
    waits: list[float] = []

    async def cancel_and_hang(seconds: float) -> None:
        waits.append(seconds)
        assert executor is not None
        executor.cancel()
        await asyncio.Event().wait()  # only cancellation ends this wait

    executor = PlanExecutor(parse_plan(hotel_plan(tool_server, llm_server, instruction=None)),
                            env={}, sleep=cancel_and_hang)
    outcome = await executor.run()
    assert len(waits) == 1 and len(llm_server.requests) == 1
    assert final(outcome).rule == "cancel.in_flight"
    assert outcome.status == "cancelled"


# ---------------------------------------------------------------- 12: llm_debug_enabled false

RAW_MARKER = "Sure thing, here is my analysis"
PROMPT_MARKER = "error analysis assistant"


def prose_answer() -> str:
    return f"{RAW_MARKER}:\n{analysis(True, {'city_code': 'PAR'}, reason='PAR is the code')}"


def store_bytes(store_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store_dir.rglob("*")) if p.is_file())


def spool_segment_bytes(events: list[Any]) -> bytes:
    """The bytes a spool segment holding `events` would have."""
    table = encode_events(events, 1, WriterIdentity.for_this_process())
    sink = io.BytesIO()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


@pytest.mark.parametrize(("debug", "recorded"), [("true", True), ("false", False)],
                         ids=["on_records_text", "off_records_none"])
def test_llm_debug_env_decides_whether_text_reaches_the_store(
    tmp_path, tool_server, llm_server, monkeypatch, debug, recorded
):
    monkeypatch.setenv("TRUVAG3_LLM_DEBUG_ENABLED", debug)
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(prose_answer())
    doc = run_plan_json(tmp_path, hotel_plan(tool_server, llm_server, instruction=None))
    data = store_bytes(tmp_path / "store")
    assert (PROMPT_MARKER.encode() in data, RAW_MARKER.encode() in data) == (recorded, recorded)
    detail = open_store(tmp_path / "store" / "debug.duckdb").get_execution(doc["execution_id"])
    (call,) = detail.step("step-1").attempts[0].llm_calls
    # Metadata and the parsed verdict are kept either way.
    assert (call.site, call.model, call.response_status) == (
        "error_analysis", "scripted-model", 200)
    assert call.total_tokens and call.latency_ms is not None
    assert call.parsed["suggested_changes"] == {"city_code": "PAR"}
    if recorded:
        assert call.text_recorded and call.raw_text.startswith(RAW_MARKER)
    else:
        assert not call.text_recorded
        assert (call.messages, call.request_body, call.response_body, call.raw_text) == (
            None, None, None, None)
    explained = run_cli("explain", doc["execution_id"])
    note = "text not recorded: llm_debug_enabled is false (TRUVAG3_LLM_DEBUG_ENABLED)"
    assert (note in explained.stdout) == (not recorded)
    assert (PROMPT_MARKER in explained.stdout) == recorded


@pytest.mark.parametrize("debug", [True, False], ids=["on_records_text", "off_records_none"])
async def test_llm_debug_config_decides_whether_spool_segments_hold_text(
    tool_server, llm_server, debug
):
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(LLMReply(status=503), prose_answer())
    document = hotel_plan(tool_server, llm_server, instruction=None,
                          config={"llm_debug_enabled": debug})
    outcome, recorder = await run_executor(document)
    assert outcome.status == "succeeded"
    segment = spool_segment_bytes(recorder.events)
    assert (PROMPT_MARKER.encode() in segment, RAW_MARKER.encode() in segment) == (debug, debug)
    calls = recorder.of_kind("llm_call")
    assert [c.text_recorded for c in calls] == [debug, debug]
    assert [c.response_status for c in calls] == [503, 200]
    assert calls[1].parsed["reason"] == "PAR is the code"
    assert calls[1].total_tokens and calls[1].model == "scripted-model"


def test_explain_names_the_plan_config_key_when_the_plan_turned_text_off(
    tmp_path, tool_server, llm_server
):
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(prose_answer())
    doc = run_plan_json(tmp_path, hotel_plan(tool_server, llm_server, instruction=None,
                                             config={"llm_debug_enabled": False}))
    explained = run_cli("explain", doc["execution_id"])
    assert explained.code == 0
    lines = [line.strip() for line in explained.stdout.splitlines()]
    note = "text not recorded: llm_debug_enabled is false (plan config llm_debug_enabled)"
    assert any(line.startswith("prompt") and line.endswith(note) for line in lines)
    assert RAW_MARKER not in explained.stdout
    document = run_cli("explain", doc["execution_id"], "--json").json()
    (call,) = document["steps"][0]["attempts"][0]["llm_calls"]
    assert (call["text_note"], call["messages"], call["raw_text"]) == (note, None, None)


async def test_tui_llm_tab_says_the_text_was_not_recorded_and_why(
    tmp_path, tool_server, llm_server, monkeypatch
):
    monkeypatch.setenv("TRUVAG3_LLM_DEBUG_ENABLED", "false")
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(prose_answer())
    doc = await asyncio.to_thread(
        run_plan_json, tmp_path, hotel_plan(tool_server, llm_server, instruction=None))
    app = tui_app(tmp_path / "store" / "debug.duckdb", live_refresh=False)
    async with app.run_test(size=(120, 36)) as pilot:
        from console.tui.screens.execution import ExecutionScreen

        await screen_loaded(pilot)
        app.open_execution(doc["execution_id"])
        await settle_until(pilot, lambda: isinstance(app.screen, ExecutionScreen),
                           "the execution")
        await screen_loaded(pilot)
        shown = await llm_tab_shown(pilot)
    assert "error_analysis · model scripted-model · HTTP 200" in shown
    assert ("── prompt and raw response ──\n"
            "text not recorded: llm_debug_enabled is false (TRUVAG3_LLM_DEBUG_ENABLED)") in shown
    assert RAW_MARKER not in shown and PROMPT_MARKER not in shown
    assert '"city_code": "PAR"' in shown  # the parsed answer is still shown



def test_replay_of_a_run_without_llm_text_says_why_it_cannot_serve_the_answers(
    tmp_path, tool_server, llm_server, monkeypatch
):
    monkeypatch.setenv("TRUVAG3_LLM_DEBUG_ENABLED", "false")
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(prose_answer())
    doc = run_plan_json(tmp_path, hotel_plan(tool_server, llm_server, instruction=None))
    db = tmp_path / "store" / "debug.duckdb"
    result = run_cli("replay", doc["execution_id"], "step-1", "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    replay = result.json()
    assert ("1 LLM call(s) of the original run kept no answer text (text not recorded: "
            "llm_debug_enabled is false (TRUVAG3_LLM_DEBUG_ENABLED)), so they cannot be served; "
            "use --llm live") in replay["notes"]
    assert len(llm_server.requests) == 1  # the replay never asked the real endpoint


def test_a_bundle_keeps_the_llm_text_left_out_and_the_note(tmp_path, tool_server, llm_server,
                                                           monkeypatch):
    monkeypatch.setenv("TRUVAG3_LLM_DEBUG_ENABLED", "false")
    bad_city(tool_server, ToolReply.ok({"hotels": ["H1"]}))
    llm_server.script(prose_answer())
    doc = run_plan_json(tmp_path, hotel_plan(tool_server, llm_server, instruction=None))
    bundle = tmp_path / "run.zip"
    assert run_cli("export", doc["execution_id"], "-o", str(bundle)).code == 0
    other = tmp_path / "other" / "debug.duckdb"
    imported = run_cli("import", str(bundle), "--db", str(other))
    assert imported.code == 0, imported.stderr
    detail = open_store(other).get_execution(doc["execution_id"])
    (call,) = detail.step("step-1").attempts[0].llm_calls
    assert call.messages is None and call.raw_text is None
    assert call.text_note == (
        "text not recorded: llm_debug_enabled is false (TRUVAG3_LLM_DEBUG_ENABLED)")
    with zipfile.ZipFile(bundle) as archive:
        contents = b"".join(archive.read(name) for name in archive.namelist())
    assert PROMPT_MARKER.encode() not in contents and RAW_MARKER.encode() not in contents
    assert b"PAR is the code" in contents  # the parsed answer travels with the bundle


async def test_the_wall_clock_budget_starts_after_the_llm_client_is_made(
    tool_server, llm_server, monkeypatch
):
    """Making the LLM client imports openai (seconds on a loaded machine); the task's wall-clock
    budget (seed 003) counts from after it, so the first request is still sent."""
    import executor.runtime.plan_executor as plan_executor

    now = [1000.0]
    slow_to_make = plan_executor.LLMClient

    class SlowClient(slow_to_make):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            now[0] += 5.0  # the import and set-up took 5 s of the monotonic clock
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(plan_executor, "LLMClient", SlowClient)
    tool_server.script("/capabilities/search_hotels", ToolReply.ok({"hotels": ["H1"]}))
    outcome, _ = await run_executor(
        hotel_plan(tool_server, llm_server, instruction=None, config={"max_wall_clock_s": 1}),
        monotonic=lambda: now[0])
    assert outcome.steps[0].status == "succeeded", outcome.steps[0].attempts
    assert len(tool_server.received("/capabilities/search_hotels")) == 1
