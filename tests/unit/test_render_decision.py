"""The decision view: the inputs the deciding rule read first, the rest apart."""

from __future__ import annotations

import pytest

from console.render.views import split_inputs

INPUTS = {
    "dispatched": True, "status": 400, "transport_error": None, "side_effects": "none",
    "attempt_number": 1, "max_attempts": 3, "validation_retries": 0,
    "analyzer": {"layer": "analyzer", "changes": {"city": "Tokyo"}},
}  # fmt: skip

CASES = {
    "analyzer_accept_reads_the_status_and_the_verdict": (
        "analyzer.accept",
        ["status", "transport_error", "analyzer.layer", "analyzer.changes.city"],
    ),
    "retry_same_reads_the_attempt_counters": (
        "transient.retry_same", ["status", "transport_error", "attempt_number", "max_attempts"],
    ),
    "an_unknown_rule_reads_nothing": ("no.such_rule", []),
}


@pytest.mark.parametrize(("rule_id", "read_keys"), CASES.values(), ids=CASES.keys())
def test_split_inputs(rule_id: str, read_keys: list[str]) -> None:
    read, rest = split_inputs(rule_id, INPUTS)
    assert [key for key, _ in read] == read_keys
    assert {key for key, _ in read}.isdisjoint(key for key, _ in rest)
    assert len(read) + len(rest) == 9
