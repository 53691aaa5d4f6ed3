"""`copy_json`: the deep copy of plan parameters (parse and `Plan.to_dict`), without deepcopy."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from executor.plan.model import copy_json

CASES = [
    ("scalars", {"s": "x", "i": 1, "f": 1.5, "b": True, "n": None}),
    ("nested", {"a": [{"b": [1, 2, {"c": "d"}]}], "e": {"f": {}}}),
    ("list_at_top", [1, [2, [3]], {"k": "v"}]),
    ("other_mapping_deep_copied", {"o": OrderedDict(a=[1])}),
]


@pytest.mark.parametrize(("name", "value"), CASES, ids=[name for name, _ in CASES])
def test_copy_json_is_an_equal_independent_copy(name: str, value) -> None:
    copied = copy_json(value)
    assert copied == value
    assert type(copied) is type(value)

    def containers(item):
        if isinstance(item, dict):
            yield item
            for inner in item.values():
                yield from containers(inner)
        elif isinstance(item, list):
            yield item
            for inner in item:
                yield from containers(inner)

    originals = {id(item) for item in containers(value)}
    assert not originals & {id(item) for item in containers(copied)}
