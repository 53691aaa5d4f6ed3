"""Properties of layer 2 coercion, binding resolution and the guard over generated values."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.params import (
    coerce_parameters,
    go_format_value,
    guard_parameters,
    resolve_bindings,
)
from executor.params.gofmt import _go_json_scalar, _go_json_string, go_json
from tests.property.strategies import examples, json_values, short_texts

TYPE_NAMES = st.sampled_from(["number", "integer", "int64", "boolean", "string", "object",
                              "array", "null", "strng", "float", ["integer", "null"],
                              ["string", "number"], 5, None])
NUMERIC_TEXTS = st.one_of(
    st.sampled_from(["1", "-0", "+7", "1.5", ".5", "5.", "1e3", "1E+3", "inf", "-Infinity",
                     "nan", "0x10", "1_000", " 1", "9" * 20, "9" * 5000, "0" * 5000 + "1",
                     "1" * 5000 + "x", "true", "T", "{\"code\": \"X\"}", "{", "{}"]),
    st.builds(lambda sign, whole, point, fraction, exp: f"{sign}{whole}{point}{fraction}{exp}",
              st.sampled_from(["", "-", "+"]), st.integers(0, 10**30).map(str),
              st.sampled_from(["", "."]), st.sampled_from(["", "5", "25"]),
              st.sampled_from(["", "e3", "E-400", "e+999"])),
    short_texts,
)
PARAM_VALUES = st.one_of(NUMERIC_TEXTS, json_values)
TEMPLATES = st.builds(
    lambda step, path: "{{" + step + "." + path + "}}",
    st.sampled_from(["step-1", "STEP-1", "step-2", "x"]),
    st.sampled_from(["a", "data.items.0", "data.items.-1", "data.items." + "9" * 5000,
                     "data.items.+0", "response.data", "a.b.c.d"]),
)


_SCHEMA_KEYS = st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3)
_ENUMS = st.none() | st.lists(json_values, max_size=3)
_ITEMS = st.none() | TYPE_NAMES
_REQUIRED = st.none() | st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=2)


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A capability schema in the subset the guard reads, with unknown and odd type names."""
    properties = {}
    for key in draw(_SCHEMA_KEYS):
        prop: dict[str, Any] = {"type": draw(TYPE_NAMES)}
        enum = draw(_ENUMS)
        if enum is not None:
            prop["enum"] = enum
        items = draw(_ITEMS)
        if items is not None:
            prop["items"] = {"type": items}
        properties[key] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = draw(_REQUIRED)
    if required is not None:
        schema["required"] = required
    return schema


@settings(max_examples=examples(600))
@given(params=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]),
                              st.one_of(PARAM_VALUES, TEMPLATES), max_size=4),
       schema=schemas(),
       results=st.dictionaries(st.sampled_from(["step-1", "step-2"]), json_values, max_size=2))
def test_bindings_coercion_and_guard_never_raise(
    params: dict[str, Any], schema: dict[str, Any], results: dict[str, Any]
) -> None:
    resolved = resolve_bindings(params, results)
    assert set(resolved) == set(params)
    coerced, coercions = coerce_parameters(resolved, schema)
    assert coerced is not None and set(coerced) == set(resolved)
    for coercion in coercions:
        assert resolved[coercion.key] is coercion.from_value
        assert coerced[coercion.key] is coercion.to_value
        assert coercion.log_line().startswith(f"{coercion.key}: ")
    for key, value in resolved.items():
        if key not in {c.key for c in coercions}:
            assert coerced[key] is value  # a value that fails to parse is kept as it was
    for violation in guard_parameters(coerced, schema, ("step-1", "step-2")):
        assert violation.kind in {"unresolved_binding", "missing_required", "enum", "shape"}
        assert "\n" not in violation.path
    for value in coerced.values():
        assert isinstance(go_format_value(value), str)


# --- named regressions found by the fuzzer -------------------------------------------------------

INTEGER_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}
NUMBER_SCHEMA = {"type": "object", "properties": {"n": {"type": "number"}}}


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("9" * 5000, "9" * 5000, id="5000_digits_beyond_int64_kept"),
    pytest.param("0" * 5000 + "42", 42, id="leading_zeros_are_go_parseint_digits"),
    pytest.param("-" + "0" * 30 + "9223372036854775808", -(2**63), id="int64_min"),
    pytest.param("9223372036854775808", "9223372036854775808", id="int64_max_plus_one_kept"),
])
def test_integer_coercion_of_long_digit_strings(text: str, expected: Any) -> None:
    coerced, _ = coerce_parameters({"n": text}, INTEGER_SCHEMA)
    assert coerced == {"n": expected}


@pytest.mark.serial  # a bound on wall-clock seconds
def test_number_coercion_of_a_long_digit_run_is_linear() -> None:
    # The old float regex backtracked quadratically: 8000 digits and a letter took 1.1 s.
    text = "1" * 50_000 + "x"
    started = time.perf_counter()
    coerced, coercions = coerce_parameters({"n": text}, NUMBER_SCHEMA)
    assert time.perf_counter() - started < 2.0
    assert coerced == {"n": text} and coercions == ()


@pytest.mark.parametrize(("path", "expected"), [
    pytest.param("items." + "9" * 5000, "{{step-1.items." + "9" * 5000 + "}}",
                 id="index_of_5000_digits_stays_literal"),
    pytest.param("items.0" + "0" * 5000 + "1", "b", id="index_with_leading_zeros"),
    pytest.param("items.-1", "{{step-1.items.-1}}", id="negative_index_stays_literal"),
])
def test_binding_array_index_is_read_like_go_atoi(path: str, expected: Any) -> None:
    resolved = resolve_bindings({"x": "{{step-1." + path + "}}"}, {"step-1": {"items": ["a", "b"]}})
    assert resolved == {"x": expected}


def _recursive_go_json(value: Any) -> str:
    """The recursive encoder `go_json` replaced, kept as the reference for shallow values."""
    if isinstance(value, dict):
        members = sorted((str(key), item) for key, item in value.items())
        inner = ",".join(f"{_go_json_string(k)}:{_recursive_go_json(v)}" for k, v in members)
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(_recursive_go_json(item) for item in value) + "]"
    return _go_json_scalar(value)


@settings(max_examples=examples(400))
@given(value=json_values)
def test_go_json_text_is_the_recursive_encoding(value: Any) -> None:
    assert go_json(value) == _recursive_go_json(value)


DEEP = 900  # as deep as the wire decoder returns (about 990 levels)


def test_an_exact_binding_of_a_deeply_nested_result_resolves_to_its_json_text() -> None:
    data = json.loads("[" * DEEP + "]" * DEEP)
    resolved = resolve_bindings({"x": "{{step-1.data}}"}, {"step-1": {"data": data}})
    assert resolved == {"x": "[" * DEEP + "]" * DEEP}


def test_the_guard_reads_a_deeply_nested_parameter() -> None:
    deep = json.loads('{"a":' * DEEP + '"{{step-9.x}}"' + "}" * DEEP)
    (violation,) = guard_parameters({"p": deep}, None, ("step-1",))
    assert violation.kind == "unresolved_binding"
    assert violation.path == "p" + ".a" * DEEP


def test_string_coercion_of_json_nested_beyond_the_decoder_limit_keeps_the_value() -> None:
    text = '{"code":' * 5000 + '"x"' + "}" * 5000
    coerced, coercions = coerce_parameters({"a": text}, {"properties": {"a": {"type": "string"}}})
    assert coerced == {"a": text} and coercions == ()
