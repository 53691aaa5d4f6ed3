"""Key changes between two parameter maps: nested keys spread out, types matter."""

from __future__ import annotations

from typing import Any

import pytest

from console.render.request_diff import key_changes

CASES: dict[str, tuple[Any, Any, list[tuple[str, str, str]]]] = {
    "a_corrected_city": ({"city": "Tokio", "n": 2}, {"city": "Tokyo", "n": 2},
                         [("city", '"Tokio"', '"Tokyo"')]),
    "a_coerced_number": ({"age": "thirty"}, {"age": 30}, [("age", '"thirty"', "30")]),
    "one_is_not_true": ({"flag": 1}, {"flag": True}, [("flag", "1", "true")]),
    "a_nested_key": ({"filter": {"city": "PARIS", "max": 3}}, {"filter": {"city": "PAR", "max": 3}},
                     [("filter.city", '"PARIS"', '"PAR"')]),
    "an_added_and_a_removed_key": ({"a": 1}, {"b": 2},
                                   [("a", "1", "(absent)"), ("b", "(absent)", "2")]),
    "identical": ({"a": [1, 2]}, {"a": [1, 2]}, []),
}  # fmt: skip


@pytest.mark.parametrize(("old", "new", "expected"), CASES.values(), ids=CASES.keys())
def test_key_changes(old: Any, new: Any, expected: list[tuple[str, str, str]]) -> None:
    assert [(c.key, c.old, c.new) for c in key_changes(old, new)] == expected
