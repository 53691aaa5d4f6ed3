"""The request body's bytes: Go's encoding/json text of the parameters (docs/run.md).

Expected texts are what Go 1.22's `json.Marshal` writes for the same decoded values
(`map[string]interface{}`), except integers, which are sent exactly as written.
"""

from __future__ import annotations

import json

import pytest

from executor.runtime import encode_json_body

GO_BODIES = [
    ("integral_float", {"lat": 35.0}, '{"lat":35}'),
    ("fraction", {"amount": 46828.5}, '{"amount":46828.5}'),
    ("float_from_1e16", {"n": 1e16}, '{"n":10000000000000000}'),
    ("float_below_1e21", {"n": 1e20}, '{"n":100000000000000000000}'),
    ("float_from_1e21", {"n": 1e21}, '{"n":1e+21}'),
    ("small_float", {"n": 1e-7}, '{"n":1e-7}'),
    ("just_above_1e-6", {"n": 0.000001}, '{"n":0.000001}'),
    ("negative_zero", {"n": -0.0}, '{"n":-0}'),
    ("float_in_a_list", {"xs": [1.5, 2.0, {"y": 3.0}]}, '{"xs":[1.5,2,{"y":3}]}'),
    ("large_integer_exact", {"id": 2**64, "f": 1.0}, '{"f":1,"id":18446744073709551616}'),
    ("no_float", {"b": True, "a": None, "s": "<&>"},
     '{"a":null,"b":true,"s":"\\u003c\\u0026\\u003e"}'),
    ("html_escapes_with_a_float", {"s": "a<b", "f": 0.5}, '{"f":0.5,"s":"a\\u003cb"}'),
    ("unicode_kept", {"city": "Zürich", "x": 2.5}, '{"city":"Zürich","x":2.5}'),
]


@pytest.mark.parametrize(("name", "parameters", "expected"), GO_BODIES,
                         ids=[case[0] for case in GO_BODIES])  # fmt: skip
def test_the_body_is_go_encoding_json_text(name: str, parameters: dict, expected: str) -> None:
    body = encode_json_body(parameters)
    assert body == expected.encode("utf-8")
    assert json.loads(body) == parameters  # the same values, whatever the text
