"""`whatif` on decisions the LLM layers corrected predicts what a real run under the new config
does: a store recorded by the real executor against loopback tools and a scripted
OpenAI-compatible model, and for each config key a real `run` under it, compared decision by
decision (action, rule id and reason of the step's first attempt)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.whatif import what_if
from store.queries import open_store
from tests.support.llm_server import ScriptedLLMServer
from tests.support.plans import capability, plan, run_plan_json, step
from tests.support.tool_server import ScriptedToolServer, ToolReply

ANALYZER_PROMPT = "error analysis assistant"
RESOLVER_PROMPT = "parameter re-resolution assistant"
LEGACY_PROMPT = "failed with a type error"
# Enough scripted answers for every run of the module (each is used once).
ANSWERS_PER_LAYER = 40


def _plans(tool_url: str, llm_url: str) -> dict[str, dict[str, Any]]:
    """Three steps corrected by a layer: layer 3 (a 422 the analyzer fixes), layer 4 on an
    independent step and on a step with a dependency (a 400 the analyzer cannot fix)."""
    fix = capability("fix")
    fixcur = capability("fixcur")
    return {
        # 422, retryable:true: with the analyzer off the legacy callback is eligible.
        "analyzer": plan(tool_url, {"fix": fix}, [step("step-1", "fix", {"city": "PARIS"})],
                         llm_base_url=llm_url),
        "resolver_independent": plan(
            tool_url, {"fixcur": fixcur}, [step("step-1", "fixcur", {"currency": "Francex"})],
            llm_base_url=llm_url,
        ),
        "resolver_dependent": plan(
            tool_url, {"ok": capability("ok"), "fixcur": fixcur},
            [step("step-1", "ok", {"c": "Paris"}),
             step("step-2", "fixcur", {"currency": "Francex"}, depends_on=["step-1"])],
            llm_base_url=llm_url,
        ),
    }


# The step each plan's layer corrected, in the recorded run.
CORRECTED_STEP = {"analyzer": "step-1", "resolver_independent": "step-1",
                  "resolver_dependent": "step-2"}


def _script_tools(tool: ScriptedToolServer) -> None:
    """Each run meets the error first, then success: scripts restarted before every run."""
    tool.replace_script("/capabilities/fix", ToolReply.error(
        422, "BAD_CITY", "INVALID CITY CODE: PARIS", "INPUT_ERROR", retryable=True,
    ), ToolReply.ok({"hotels": 3}))
    tool.replace_script("/capabilities/fixcur", ToolReply.error(
        400, "BAD_CUR", "unknown currency 'Francex'", "INPUT_ERROR",
    ), ToolReply.ok({"price": 120}))
    tool.replace_script("/capabilities/ok", ToolReply.ok({"country": "France"}))


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ScriptedToolServer, ScriptedLLMServer]]:
    with ScriptedToolServer() as tool, ScriptedLLMServer() as llm:
        fixes_city = json.dumps({"should_retry": True, "reason": "PARIS is not IATA; use PAR",
                                 "suggested_changes": {"city": "PAR"},
                                 "is_transient_error": False})
        cannot_fix = json.dumps({"should_retry": False, "reason": "needs the country's data",
                                 "suggested_changes": {}, "is_transient_error": False})
        resolved = json.dumps({"should_retry": True, "analysis": "France uses EUR",
                               "corrected_parameters": {"currency": "EUR"}})
        # The legacy prompt names PARIS too: its matcher goes first.
        llm.script_for(LEGACY_PROMPT, *[json.dumps({"city": "PAR"})] * ANSWERS_PER_LAYER)
        llm.script_for("PARIS", *[fixes_city] * ANSWERS_PER_LAYER)
        llm.script_for(RESOLVER_PROMPT, *[resolved] * ANSWERS_PER_LAYER)
        llm.script_for(ANALYZER_PROMPT, *[cannot_fix] * ANSWERS_PER_LAYER)
        yield tool, llm


@pytest.fixture(scope="module")
def recorded(servers, tmp_path_factory) -> tuple[Path, dict[str, tuple[str, dict[str, Any]]]]:
    """The three plans run under their default config into one store: (db, plan → its
    execution id and the corrected step's first attempt as `run --json` reported it)."""
    tool, llm = servers
    work = Path(tmp_path_factory.mktemp("whatif-layers"))
    db = work / "recorded.duckdb"
    executions = {}
    for name, document in _plans(tool.base_url, llm.base_url).items():
        _script_tools(tool)
        result = run_plan_json(work, document, "--db", str(db))
        first = _step(result, CORRECTED_STEP[name])["attempts"][0]
        assert first["action"] == "retry_corrected", (name, first)
        executions[name] = (result["execution_id"], first)
    return db, executions


def _step(result: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next(s for s in result["steps"] if s["id"] == step_id)


# name, plan, config override, the rule a real run reaches on the corrected step's first
# attempt (whatif must predict it exactly: action, rule id and reason).
CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("validation_feedback_off_stops_the_analyzer_correction", "analyzer",
     {"validation_feedback_enabled": False}, "no_correction.stop"),
    ("validation_feedback_off_stops_the_resolver_correction", "resolver_independent",
     {"validation_feedback_enabled": False}, "no_correction.stop"),
    ("analyzer_off_on_a_400_without_a_legacy_trigger_stops", "resolver_dependent",
     {"error_analyzer_enabled": False}, "no_correction.stop"),
    ("semantic_retry_off_stops_after_layer_3_cannot_fix", "resolver_dependent",
     {"semantic_retry_enabled": False}, "no_correction.stop"),
    ("independent_steps_off_stops_layer_4_on_an_independent_step", "resolver_independent",
     {"semantic_retry_independent_steps": False}, "no_correction.stop"),
    ("independent_steps_off_keeps_layer_4_on_a_dependent_step", "resolver_dependent",
     {"semantic_retry_independent_steps": False}, "re_resolution.accept"),
    ("no_llm_calls_stops_before_the_analyzer", "analyzer",
     {"max_llm_calls": 0}, "budget.llm_calls"),
    ("one_llm_call_stops_before_the_resolver", "resolver_independent",
     {"max_llm_calls": 1}, "budget.llm_calls"),
    ("two_llm_calls_let_both_layers_answer", "resolver_dependent",
     {"max_llm_calls": 2}, "re_resolution.accept"),
    ("a_small_token_budget_stops_before_the_resolver", "resolver_independent",
     {"max_total_tokens": 50}, "budget.total_tokens"),
    ("a_small_token_budget_still_lets_the_first_call_answer", "analyzer",
     {"max_total_tokens": 50}, "analyzer.accept"),
]  # fmt: skip


def _real_run(servers, tmp_path: Path, name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    tool, llm = servers
    document = _plans(tool.base_url, llm.base_url)[name]
    document["config"].update(overrides)
    _script_tools(tool)
    result = run_plan_json(tmp_path, document, "--db", str(tmp_path / "real.duckdb"))
    return _step(result, CORRECTED_STEP[name])["attempts"][0]


def _predicted(recorded, name: str, overrides: dict[str, Any]) -> tuple[str, str, str]:
    """whatif's decision for the corrected step's first attempt: its change, or as recorded."""
    db, executions = recorded
    report = what_if(open_store(db), None, overrides)
    assert report.incomplete == report.unreadable == 0
    execution_id, first = executions[name]
    for change in report.changes:
        if (change.execution_id, change.step_id, change.n) == (
            execution_id, CORRECTED_STEP[name], 1,
        ):
            return change.after.action, change.after.rule_id, change.reason
    return first["action"], first["rule"], first["reason"]


@pytest.mark.parametrize(("name", "overrides", "rule_id"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_whatif_predicts_the_real_run(servers, recorded, tmp_path, name, overrides, rule_id):
    real = _real_run(servers, tmp_path, name, overrides)
    assert real["rule"] == rule_id, real
    assert _predicted(recorded, name, overrides) == (real["action"], real["rule"],
                                                     real["reason"])


def test_a_layer_the_record_never_asked_is_predicted_as_its_ask(servers, recorded, tmp_path):
    """With the analyzer off the 422 goes to the legacy callback, which the recorded run never
    asked: whatif says it would ask it (its answer is not recorded); the real run asks it."""
    real = _real_run(servers, tmp_path, "analyzer", {"error_analyzer_enabled": False})
    assert real["rule"] == "legacy.accept", real
    action, rule_id, reason = _predicted(recorded, "analyzer", {"error_analyzer_enabled": False})
    assert (action, rule_id) == ("ask_legacy", "legacy.ask")
    assert "retryable is explicitly true; consult the legacy correction callback" in reason
