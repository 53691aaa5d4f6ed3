"""Every decision recorded in the demo store decides the same again from its recorded inputs."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from console.demo import DEMO_PLAN_NAMES
from executor.policy import DecisionInputs, decide, redecide
from tests.support.demo_store import record_demo_store


@pytest.fixture(scope="module")
def decision_rows(tmp_path_factory) -> list[tuple[str, str, int, str, str, str]]:
    """The demo plans recorded into a DuckDB store: (execution, step, n, action, rule, decision)."""
    db = record_demo_store(Path(tmp_path_factory.mktemp("redecide")) / "demo.duckdb")
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(
            "SELECT execution_id, step_id, n, action, rule_id, decision FROM attempts "
            "WHERE decision IS NOT NULL ORDER BY execution_id, step_id, n"
        ).fetchall()


def test_the_demo_store_records_a_decision_for_every_plan(decision_rows):
    assert len({row[0] for row in decision_rows}) == len(DEMO_PLAN_NAMES)


def test_every_recorded_decision_decides_the_same_from_its_stored_inputs(decision_rows):
    differing = []
    for execution_id, step_id, n, action, rule_id, decision_json in decision_rows:
        inputs = json.loads(decision_json)["inputs"]
        again = decide(DecisionInputs.from_dict(inputs))
        if (str(again.action), again.rule_id) != (action, rule_id):
            differing.append((execution_id, step_id, n, action, rule_id, again.rule_id))
    assert differing == []


def test_unchanged_config_redecides_every_stored_decision_the_same(decision_rows):
    for *_, action, rule_id, decision_json in decision_rows:
        inputs = json.loads(decision_json)["inputs"]
        again = redecide(inputs, {"max_attempts": inputs["max_attempts"]})
        assert (str(again.action), again.rule_id) == (action, rule_id)
