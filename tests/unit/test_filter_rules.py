"""A rule id in a filter (`ls --rule`, the TUI's `rule:`) is one of the policy's rules: a
misspelt one matched nothing and said nothing (found by an outside check)."""

from __future__ import annotations

import pytest

from console.render.formats import RULE_IDS, unknown_rule
from console.tui.widgets.filter_bar import FilterSyntaxError, parse_filter
from executor.policy import ALL_RULES


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.rule_id)
def test_every_rule_of_the_table_is_a_filter_value(rule):
    assert unknown_rule(rule.rule_id) is None
    assert parse_filter(f"rule:{rule.rule_id}").filters.rule_id == rule.rule_id


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("budget.attempt", "no rule is named 'budget.attempt' (did you mean budget.attempts"),
        ("transient.retry", "(did you mean transient.retry_same"),
        ("Budget.Attempts", "no rule is named 'Budget.Attempts' (did you mean"),
        ("retry", "no rule is named 'retry' (docs/rules.md lists them)"),
    ],
    ids=["missing_letter", "truncated", "case", "far"],
)
def test_an_unknown_rule_is_refused_with_the_nearest(typed, message):
    assert message in unknown_rule(typed)
    with pytest.raises(FilterSyntaxError, match=rf"^filter rule:{typed}: ") as raised:
        parse_filter(f"status:failed rule:{typed}")
    assert message in str(raised.value)


def test_the_suggestions_are_rules():
    problem = unknown_rule("circuit.opened")
    suggested = problem.split("did you mean ", 1)[1].rstrip("?)").split(" or ")
    assert suggested and set(suggested) <= set(RULE_IDS)


def test_several_statuses_joined_by_commas_are_the_ls_twin():
    parsed = parse_filter("status:failed,partial")
    assert parsed.filters.status == "failed,partial"
    assert parsed.ls_args == ("--status", "failed,partial")


def test_a_bad_status_among_several_is_named():
    with pytest.raises(FilterSyntaxError, match="status:failed,nope"):
        parse_filter("status:failed,nope")
