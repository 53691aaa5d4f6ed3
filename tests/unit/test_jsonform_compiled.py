"""The compiled per-field decoders of `executor.jsonform` give what the generic `_decode` gives:
the same value, or the same error naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from executor.jsonform import _decode, _field_decoders, field_types
from executor.policy import DecisionInputs, LayerVerdict

_CASES = [
    (DecisionInputs, "retry_policy", "explicit_false"),
    (DecisionInputs, "retry_policy", "sometimes"),
    (DecisionInputs, "retry_policy", None),
    (DecisionInputs, "retry_policy", True),
    (DecisionInputs, "retry_policy", ["explicit_true"]),
    (DecisionInputs, "guard_violations", ["missing city"]),
    (DecisionInputs, "guard_violations", []),
    (DecisionInputs, "guard_violations", ["ok", 3]),
    (DecisionInputs, "guard_violations", "missing city"),
    (DecisionInputs, "guard_violations", None),
    (DecisionInputs, "parameter_keys", ("city",)),
    (DecisionInputs, "backoff", {"initial_delay_ns": 10, "max_delay_ns": 40,
                                 "backoff_factor": 2.0, "jitter_enabled": False}),
    (DecisionInputs, "backoff", None),
    (DecisionInputs, "backoff", "fast"),
    (DecisionInputs, "backoff", {"initial_delay_ns": "10"}),
    (DecisionInputs, "analyzer", {"layer": "analyzer", "answered": True}),
    (DecisionInputs, "analyzer", {"layer": "oracle", "answered": True}),
    (DecisionInputs, "analyzer", []),
    (LayerVerdict, "layer", "legacy"),
    (LayerVerdict, "changed_keys", ["city", True]),
    (LayerVerdict, "changed_keys", [["city"]]),
]


def _outcome(decode: Any, value: Any, where: str) -> tuple[str, Any]:
    try:
        return "value", decode(value, where)
    except ValueError as error:
        return "error", str(error)


@pytest.mark.parametrize(
    ("record", "name", "value"), _CASES,
    ids=[f"{record.__name__}.{name}={value!r}" for record, name, value in _CASES],
)
def test_compiled_decoder_agrees_with_the_generic_one(record, name, value) -> None:
    exact, compiled = _field_decoders(record)[name]
    where = f"{record.__name__}.{name}"
    generic = _outcome(lambda v, w: _decode(v, field_types(record)[name], w), value, where)
    fast = ("value", value) if type(value) in exact else _outcome(compiled, value, where)
    assert fast == generic
