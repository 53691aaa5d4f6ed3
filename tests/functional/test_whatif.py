"""`truva-console whatif` on a store recorded from the real demo runs (loopback tools and model)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

import console.whatif
from console.entry import main
from console.whatif import unaffected_rule_ids, what_if
from store.queries import ExecutionFilter, open_store
from tests.support.demo_store import record_demo_store
from tests.support.plans import capability, plan, run_plan_json, step
from tests.support.tool_server import ToolReply


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    """Every demo plan's run (recorded once per test process; this module's copy)."""
    return record_demo_store(Path(tmp_path_factory.mktemp("whatif")) / "demo.duckdb")


def _execution_of(db: Path, plan: str) -> str:
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(
            "SELECT execution_id FROM executions WHERE plan_path = ?", [f"demo:{plan}"]
        ).fetchone()[0]


def _whatif_json(db: Path, capsys, *args: str) -> dict:
    assert main(["whatif", "--db", str(db), "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_no_override_is_a_regression_check_that_finds_no_change(demo_db, capsys):
    report = _whatif_json(demo_db, capsys)
    assert report["decisions"] > 30
    assert report["changed"] == 0
    assert report["changes"] == [] and report["by_transition"] == []
    assert report["not_redecided"] == {"incomplete_inputs": 0, "missing_inputs": [],
                                       "unreadable": 0}


def test_more_attempts_turn_scenario_d_budget_stop_into_a_resend(demo_db, capsys):
    scenario_d = _execution_of(demo_db, "scenario-d-misclassified-503")
    report = _whatif_json(demo_db, capsys, "--config", "max_attempts=5")
    change = next(c for c in report["changes"] if c["execution_id"] == scenario_d)
    assert change["before"] == {"action": "stop_budget", "rule_id": "budget.attempts"}
    assert change["after"] == {"action": "retry_same", "rule_id": "transient.retry_same",
                               "delay_ms": 40.0}
    assert change["n"] == 3
    assert "attempt 4 of 5" in change["reason"]
    assert "tool's answer to attempt #4 is not recorded" in change["consequence"]
    assert {"before": change["before"], "after": change["after"], "count": 1} in \
        report["by_transition"]


def test_a_lower_limit_stops_a_recorded_resend_and_counts_what_follows(demo_db, capsys):
    report = _whatif_json(demo_db, capsys, "--config", "max_attempts=2")
    stopped = [c for c in report["changes"]
               if c["before"]["rule_id"] == "transient.retry_same"]
    assert stopped, report
    assert all(c["after"] == {"action": "stop_budget", "rule_id": "budget.attempts"}
               for c in stopped)
    assert all(c["n"] == 2 for c in stopped)
    # One change listed per step; the decisions after it in the same step are counted apart.
    assert report["changed"] == report["changed_steps"] + report["after_earlier_change"]
    assert len({(c["execution_id"], c["step_id"]) for c in report["changes"]}) == \
        report["changed_steps"]


def test_no_correction_budget_turns_accepted_corrections_into_budget_stops(demo_db):
    report = what_if(open_store(demo_db), None, {"max_validation_retries": 0})
    accepted = [c for c in report.changes if c.before.rule_id == "analyzer.accept"]
    assert accepted
    assert {str(c.after) for c in accepted} == {"stop_budget [budget.corrections]"}


def test_filters_select_executions_as_ls_does(demo_db, capsys):
    scenario_d = _execution_of(demo_db, "scenario-d-misclassified-503")
    report = _whatif_json(demo_db, capsys, "--rule", "budget.attempts", "--config",
                          "max_attempts=5")
    everything = what_if(open_store(demo_db), ExecutionFilter(), {"max_attempts": 5})
    assert 0 < report["executions"] < everything.executions
    assert scenario_d in {c["execution_id"] for c in report["changes"]}


@pytest.mark.parametrize(
    ("option", "sentence"),
    [("max_attempts=5", False), ("max_retries_per_tool=1", True)],
    ids=["per-step-key", "task-wide-budget"],
)
def test_a_task_wide_budget_says_its_counters_were_recorded_under_the_old_config(
    demo_db, capsys, option, sentence
):
    key = option.partition("=")[0]
    cross_step = (f"{key} is a budget counted across the steps of an execution: each decision "
                  "is re-decided from the counters recorded under the old config")  # fmt: skip
    assert main(["whatif", "--db", str(demo_db), "--config", option]) == 0
    text = capsys.readouterr().out
    document = _whatif_json(demo_db, capsys, "--config", option)
    assert (cross_step in " ".join(text.split())) is sentence
    assert (cross_step in document["cannot_know"]) is sentence
    assert document["cannot_know"].startswith("What this cannot know: ")


def test_text_output_names_the_change_and_what_it_cannot_know(demo_db, capsys):
    assert main(["whatif", "--db", str(demo_db), "--config", "max_attempts=5"]) == 0
    out = capsys.readouterr().out
    assert "what-if under config max_attempts=5" in out
    assert "stop_budget [budget.attempts] → retry_same [transient.retry_same]" in out
    assert "What this cannot know" in out and f"truva-console --db {demo_db} replay" in out


def test_decisions_recorded_without_every_input_are_counted_not_redecided(tmp_path, demo_db):
    db = tmp_path / "old.duckdb"
    db.write_bytes(demo_db.read_bytes())
    with duckdb.connect(str(db)) as conn:
        conn.execute(
            "UPDATE attempts SET decision = json_merge_patch(decision, "
            "'{\"inputs\": {\"backoff\": null}}') WHERE rule_id = 'transient.retry_same'"
        )
        count = conn.execute(
            "SELECT count(*) FROM attempts WHERE rule_id = 'transient.retry_same'"
        ).fetchone()[0]
    report = what_if(open_store(db), None, {"max_attempts": 2})
    assert report.incomplete == count > 0
    assert report.missing_inputs == {"backoff"}
    assert all(c.before.rule_id != "transient.retry_same" for c in report.changes)


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("timeout_s=3", "--config timeout_s=3: config key 'timeout_s' does not change a decision"),
        ("max_attempts=-1", "--config max_attempts=-1: expected an integer >= 1, got -1"),
        ("no_such_key=1", "--config no_such_key=1: unknown config key 'no_such_key' (whatif "
         "accepts: max_attempts, "),
        ("max_attempts", "--config max_attempts: expected KEY=VALUE"),
    ],
    ids=["unused-key", "bad-value", "unknown-key", "no-equals"],
)
def test_bad_overrides_are_one_line_and_exit_2(demo_db, capsys, option, expected):
    assert main(["whatif", "--db", str(demo_db), "--config", option]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_a_repeated_override_key_is_refused(demo_db, capsys):
    argv = ["whatif", "--db", str(demo_db), "--config", "max_attempts=3", "--config",
            "max_attempts=5"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "truva-console: --config max_attempts=5: max_attempts is already given by --config "
        "max_attempts=3\n"
    )


@pytest.mark.parametrize(
    "overrides",
    [{"max_attempts": 5}, {"max_attempts": 2}, {"max_validation_retries": 0},
     {"retry_after_max_ms": 0}, {"initial_delay_ms": 5000, "max_wall_clock_s": 1},
     {"semantic_retry_enabled": False}, {"error_analyzer_enabled": False}],
    ids=["attempts-5", "attempts-2", "no-corrections", "no-retry-after", "slow-backoff",
         "no-layer-4", "no-layer-3"],
)
def test_decisions_left_out_as_unaffected_would_not_have_changed(demo_db, monkeypatch,
                                                                  overrides):
    pruned = what_if(open_store(demo_db), None, overrides)
    monkeypatch.setattr(console.whatif, "unaffected_rule_ids", lambda _: frozenset())
    full = what_if(open_store(demo_db), None, overrides)
    assert full.not_rerun == 0
    assert pruned.decisions == full.decisions
    assert (pruned.changed, pruned.changes, pruned.by_transition) == \
        (full.changed, full.changes, full.by_transition)


def test_only_rules_that_read_a_changed_key_are_rerun():
    unaffected = unaffected_rule_ids({"max_attempts": 5})
    assert "success.2xx" in unaffected and "terminal.auth_or_method" in unaffected
    assert "transient.retry_same" not in unaffected and "budget.attempts" not in unaffected
    assert unaffected_rule_ids({}) == frozenset()


# Backoff keys: a resend whose wait differs is a changed decision (same action and rule).
BACKOFF_WORDS = ["initial_delay_ms=3", "jitter=false", "backoff_factor=3", "max_delay_ms=2"]


@pytest.mark.parametrize("word", BACKOFF_WORDS)
def test_a_backoff_key_changes_the_wait_a_real_run_waits(tool_server, tmp_path, capsys, word):
    """A 503 twice, then success, recorded under a 1 ms backoff (jitter on, factor 2, 5 ms
    cap); whatif's waits under the key are the ones a real run under it plans."""
    tool_server.script("/capabilities/flaky", ToolReply.error(503, "DOWN", "busy"),
                       ToolReply.error(503, "DOWN", "busy"), ToolReply.ok({"v": 1}))
    document = plan(tool_server.base_url, {"flaky": capability("flaky")},
                    [step("step-1", "flaky", {"x": 1})])
    db = tmp_path / "recorded.duckdb"
    recorded = run_plan_json(tmp_path, document, "--db", str(db))["steps"][0]["attempts"]
    report = _whatif_json(db, capsys, "--config", word)
    key, value = word.split("=")
    document["config"][key] = json.loads(value)
    tool_server.replace_script("/capabilities/flaky", ToolReply.error(503, "DOWN", "busy"),
                               ToolReply.error(503, "DOWN", "busy"), ToolReply.ok({"v": 1}))
    real = run_plan_json(tmp_path, document, "--db", str(tmp_path / "real.duckdb"))
    real_attempts = real["steps"][0]["attempts"]
    changed = [a for a, r in zip(real_attempts, recorded, strict=True)
               if a["delay_ms"] != r["delay_ms"]]
    assert changed, "the key changes no wait of this plan: pick another value"
    first = changed[0]
    assert report["changed_steps"] == 1 and report["changed"] == len(changed)
    (change,) = report["changes"]
    before = recorded[first["n"] - 1]
    assert change["n"] == first["n"]
    assert change["before"] == {"action": "retry_same", "rule_id": "transient.retry_same",
                                "delay_ms": before["delay_ms"]}
    assert change["after"] == {"action": first["action"], "rule_id": first["rule"],
                               "delay_ms": first["delay_ms"]}
    assert change["reason"] == first["reason"]
    assert change["consequence"].startswith(
        f"would have waited {first['delay_ms']:.1f} ms instead of {before['delay_ms']:.1f} ms"
    )
    assert main(["whatif", "--db", str(db), "--config", word]) == 0
    assert (f"retry_same [transient.retry_same] after {before['delay_ms']:.1f} ms → "
            f"retry_same [transient.retry_same] after {first['delay_ms']:.1f} ms"
            in capsys.readouterr().out)


def test_a_backoff_key_that_changes_no_wait_changes_nothing(demo_db, capsys):
    report = _whatif_json(demo_db, capsys, "--config", "backoff_factor=2")
    assert report["changed"] == 0
