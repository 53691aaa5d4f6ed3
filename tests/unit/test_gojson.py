"""JSON read as Go's encoding/json reads it (executor.gojson): bad UTF-8 and lone surrogates in
strings become U+FFFD, one per rejected byte or escape, as `json.Unmarshal` documents."""

from __future__ import annotations

import json

import pytest

from executor import gojson
from executor.wire import parse_envelope

R = "\ufffd"

# (name, the JSON document's bytes, the decoded value Go's json.Unmarshal gives)
CASES = [
    ("ascii_unchanged", b'{"a":"plain"}', {"a": "plain"}),
    ("valid_pair_escape_kept", b'{"a":"\\ud83d\\ude00"}', {"a": "\U0001f600"}),
    ("valid_utf8_kept", '{"a":"Zürich €"}'.encode(), {"a": "Zürich €"}),
    ("lone_high_escape", b'{"a":"x\\ud800y"}', {"a": f"x{R}y"}),
    ("lone_low_escape", b'{"a":"\\udc00"}', {"a": R}),
    ("high_then_non_low_escape", b'{"a":"\\ud800\\u0041"}', {"a": f"{R}A"}),
    ("low_then_high_escapes", b'{"a":"\\udc00\\ud800"}', {"a": R + R}),
    ("invalid_byte", b'{"a":"\xff"}', {"a": R}),
    ("truncated_sequence_one_per_byte", b'{"a":"\xe2\x82!"}', {"a": f"{R}{R}!"}),
    ("overlong_encoding_one_per_byte", b'{"a":"\xc0\x80"}', {"a": R + R}),
    ("encoded_surrogate_one_per_byte", b'{"a":"\xed\xa0\x80"}', {"a": R * 3}),
    ("in_a_key_and_a_list", b'{"k\\ud800":["\\udfff",1]}', {f"k{R}": [R, 1]}),
    ("nested_deep_inside", b'{"a":{"b":[{"c":"\\uDBFF"}]}}', {"a": {"b": [{"c": R}]}}),
]  # fmt: skip


@pytest.mark.parametrize(("document", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_decodes_as_go_does(document, expected):
    value = gojson.loads(document)
    assert value == expected
    json.dumps(value, ensure_ascii=False).encode("utf-8")  # sendable: no lone surrogate left


def test_a_str_holding_a_surrogate_character_is_replaced_too():
    """An LLM answer reaches the parser as text that may hold a lone surrogate character."""
    assert gojson.loads('{"a":"\ud800"}') == {"a": R}


def test_a_bad_byte_outside_a_string_is_still_not_json():
    with pytest.raises(ValueError):
        gojson.loads(b'{"a":1}\xff')


def test_a_tool_body_with_a_latin1_byte_is_a_json_object_as_in_go():
    """A 2xx body of JSON with one ISO-8859-1 byte in a string: Go reads it as an object (the
    step succeeds), where strict UTF-8 made it `result.not_json_object`."""
    envelope = parse_envelope(b'{"success":true,"data":{"city":"Z\xfcrich"}}')
    assert envelope.json_value == {"success": True, "data": {"city": f"Z{R}rich"}}


def test_keys_that_become_equal_keep_the_last_value_as_a_go_map_does():
    assert gojson.loads(b'{"\\ud800":1,"\\ud801":2}') == {R: 2}


def test_a_deep_document_with_an_escape_pair_stays_json():
    """Found by review: the walk recursed (two frames a level), so a valid document 500 levels
    deep holding an escaped emoji became "not JSON"."""
    depth = 900
    document = ('{"a":' * depth + '"\\ud83d\\ude00 \\ud800"' + "}" * depth).encode()
    value = gojson.loads(document)
    for _ in range(depth):
        value = value["a"]
    assert value == f"\U0001f600 {R}"


def test_a_binary_body_is_not_json_at_its_first_byte():
    with pytest.raises(ValueError):
        gojson.loads(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 1000)
