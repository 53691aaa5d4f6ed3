"""The re-decision key: the fields it carries by type only are not read where it says so, and
two recorded inputs share a key only when re-deciding them must give the same outcome."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import duckdb
import pytest

from executor.policy import ALL_RULES, DecisionInputs, decide
from executor.policy.redecide_key import GATED_BY, NEVER_READ, redecide_key
from store.decision_keys import key_expression
from tests.unit.test_rule_reads import _corpus, _Tracer


def _fields_read(inputs: DecisionInputs) -> set[str]:
    read: set[str] = set()
    for rule in ALL_RULES:
        tracer = _Tracer(inputs)
        rule.check(tracer)  # type: ignore[arg-type]
        read |= tracer.read
    return read


def test_no_rule_reads_the_fields_keyed_by_type_only() -> None:
    assert NEVER_READ == ("error_text",)
    assert not any(_fields_read(inputs) & set(NEVER_READ) for inputs in _corpus())


@pytest.mark.parametrize(("budget", "gated"), list(GATED_BY.items()), ids=list(GATED_BY))
def test_gated_fields_are_read_only_when_their_budget_is_set(budget, gated) -> None:
    unset = [replace(inputs, **{budget: None}) for inputs in _corpus()]
    assert not any(_fields_read(inputs) & set(gated) for inputs in unset)
    # The gate is real: with the budget set, some rule reads every gated field.
    read_when_set = set().union(*(_fields_read(inputs) for inputs in _corpus()
                                  if getattr(inputs, budget) is not None))
    assert set(gated) <= read_when_set


def test_decide_without_explaining_gives_the_same_verdict_reason_and_delay() -> None:
    for inputs in _corpus():
        full, brief = decide(inputs), decide(inputs, explain=False)
        assert (brief.action, brief.rule_id, brief.reason, brief.delay_ms, brief.layer) == \
            (full.action, full.rule_id, full.reason, full.delay_ms, full.layer)
        assert brief.inputs == {} and brief.impact is None


@pytest.mark.parametrize(
    ("overrides", "by_type", "by_value", "gates"),
    [
        ({}, {"error_text"}, {"max_attempts", "backoff"}, set(GATED_BY)),
        ({"max_attempts": 5}, {"error_text", "max_attempts"}, {"backoff"}, set(GATED_BY)),
        ({"max_wall_clock_s": 5}, {"max_wall_clock_s"}, {"elapsed_s", "ended_by_deadline"},
         set(GATED_BY) - {"max_wall_clock_s"}),
        ({"max_wall_clock_s": None}, {"elapsed_s", "ended_by_deadline"}, set(),
         set(GATED_BY) - {"max_wall_clock_s"}),
        ({"initial_delay_ms": 5000}, {"error_text"}, {"backoff"}, set(GATED_BY)),
    ],
    ids=["no-overrides", "replaced-key", "budget-set", "budget-unset", "backoff-part"],
)
def test_key_plan_per_overrides(overrides, by_type, by_value, gates) -> None:
    key = redecide_key(overrides)
    assert by_type <= set(key.by_type) and by_value <= set(key.by_value)
    assert {budget for budget, _ in key.gated} == gates
    assert set(key.by_type).isdisjoint(key.by_value)


_BASE = replace(_corpus()[0], status=503, tool="weather", elapsed_s=1.5, error_text="HTTP 503")


def _inputs(**changes: Any) -> Any:
    data = _BASE.to_dict()
    data.update(changes)
    return data


def _key(inputs: Any, overrides: dict[str, Any]) -> str:
    expression = key_expression(redecide_key(overrides))
    decision = json.dumps({"action": "retry_same", "inputs": inputs})
    with duckdb.connect() as conn:
        return conn.execute(
            f"SELECT {expression} FROM (SELECT ?::JSON AS decision)", [decision]
        ).fetchone()[0]


def _without(name: str) -> dict[str, Any]:
    data = _inputs()
    del data[name]
    return data


@pytest.mark.parametrize(
    ("first", "second", "overrides", "same"),
    [
        (_inputs(), _inputs(error_text="HTTP 503 request 7"), {}, True),
        (_inputs(), _inputs(error_text=None), {}, False),
        (_inputs(), _inputs(elapsed_s=9.25), {}, True),
        (_inputs(max_wall_clock_s=60.0), _inputs(max_wall_clock_s=60.0, elapsed_s=9.25), {},
         False),
        (_inputs(), _inputs(elapsed_s=9.25), {"max_wall_clock_s": 60}, False),
        (_inputs(max_wall_clock_s=60.0), _inputs(max_wall_clock_s=60.0, elapsed_s=9.25),
         {"max_wall_clock_s": None}, True),
        (_inputs(), _inputs(elapsed_s=True), {}, False),
        (_inputs(), _inputs(llm_tokens_used=900), {}, True),
        (_inputs(), _inputs(tool="travel"), {}, True),
        (_inputs(max_retries_per_tool=2), _inputs(max_retries_per_tool=2, tool="travel"), {},
         False),
        (_inputs(), _inputs(max_attempts=4), {"max_attempts": 5}, True),
        (_inputs(), _inputs(max_attempts=4), {}, False),
        (_inputs(), _inputs(max_attempts=4.0), {"max_attempts": 5}, False),
        (_inputs(), _inputs(status=502), {}, False),
        (_inputs(), _inputs(parameter_keys=["city", "days"]), {}, False),
        (_inputs(), _without("error_text"), {}, False),
        (_inputs(), {**_inputs(), "future_field": 1}, {}, False),
        ({}, None, {}, False),
    ],
    ids=["error-text", "error-text-type", "elapsed-without-budget", "elapsed-with-budget",
         "elapsed-budget-set-by-override", "elapsed-budget-unset-by-override",
         "elapsed-type", "tokens-without-budget", "tool-without-budget", "tool-with-budget",
         "replaced-value", "kept-value", "replaced-value-type", "status", "parameter-keys",
         "missing-field", "unknown-field", "empty-object-vs-null"],
)
def test_inputs_share_a_key_exactly_when_the_redecision_must_agree(
    first, second, overrides, same
) -> None:
    assert (_key(first, overrides) == _key(second, overrides)) is same
