"""Layer 2 schema coercion: the reference §10.3 coercion tables and Go strconv edge cases."""

from __future__ import annotations

import copy
import math

import pytest

from executor.params import Coercion, coerce_parameters


def _coerce_one(value, declared_type):
    """Coerce `{"value": value}` against a one-property schema; return (new value, coercions)."""
    schema = {"type": "object", "properties": {"value": {"type": declared_type}}}
    coerced, coercions = coerce_parameters({"value": value}, schema)
    return coerced["value"], coercions


# (case name, declared type, input, expected output, coerced?)
COERCE_VALUE_CASES = [
    ("float64_from_string", "float64", "35.6897", 35.6897, True),
    ("number_from_string", "number", "35.6897", 35.6897, True),
    ("float_from_string", "float", "35.6897", 35.6897, True),
    ("double_from_string", "double", "35.6897", 35.6897, True),
    ("number_type_is_case_insensitive", "Number", "35.6897", 35.6897, True),
    ("number_with_exponent", "number", "1.5e3", 1500.0, True),
    ("number_leading_point", "number", ".5", 0.5, True),
    ("number_trailing_point", "number", "5.", 5.0, True),
    ("number_signed", "number", "-0.25", -0.25, True),
    ("number_underflow_is_zero", "number", "1e-400", 0.0, True),
    ("number_go_inf", "number", "+Inf", math.inf, True),
    ("number_go_infinity", "number", "-infinity", -math.inf, True),
    ("number_overflow_kept", "number", "1e400", "1e400", False),
    ("number_underscores_kept", "number", "1_000", "1_000", False),
    ("number_surrounding_space_kept", "number", " 1", " 1", False),
    ("number_trailing_newline_kept", "number", "1\n", "1\n", False),
    ("number_unicode_digits_kept", "number", "١٢", "١٢", False),
    ("number_bare_exponent_kept", "number", "1e", "1e", False),
    ("number_infin_kept", "number", "infin", "infin", False),
    ("number_signed_nan_kept", "number", "+nan", "+nan", False),
    ("number_not_a_number_kept", "number", "not-a-number", "not-a-number", False),
    ("int64_from_string", "int64", "42", 42, True),
    ("integer_from_string", "integer", "42", 42, True),
    ("int_from_string", "int", "-7", -7, True),
    ("int32_uses_int64_range", "int32", "9999999999", 9999999999, True),
    ("integer_beyond_int32", "integer", "9999999999", 9999999999, True),
    ("integer_int64_max", "integer", "9223372036854775807", 9223372036854775807, True),
    ("integer_int64_overflow_kept", "integer", "9223372036854775808", "9223372036854775808", False),
    ("integer_decimal_kept", "integer", "12.5", "12.5", False),
    ("integer_underscores_kept", "integer", "1_000", "1_000", False),
    ("integer_space_kept", "integer", " 42", " 42", False),
    ("integer_not_a_number_kept", "integer", "not-a-number", "not-a-number", False),
    ("bool_true_word", "bool", "true", True, True),
    ("boolean_true_one", "boolean", "1", True, True),
    ("boolean_true_t", "boolean", "t", True, True),
    ("boolean_true_upper", "boolean", "TRUE", True, True),
    ("boolean_true_title", "boolean", "True", True, True),
    ("boolean_false_word", "boolean", "false", False, True),
    ("boolean_false_zero", "boolean", "0", False, True),
    ("boolean_false_upper_f", "boolean", "F", False, True),
    ("boolean_yes_kept", "boolean", "yes", "yes", False),
    ("boolean_mixed_case_kept", "boolean", "tRUE", "tRUE", False),
    ("already_float_not_coerced", "number", 35.6897, 35.6897, False),
    ("already_int_for_number_not_coerced", "number", 5, 5, False),
    ("already_int_not_coerced", "integer", 42, 42, False),
    ("float_for_integer_not_coerced", "integer", 12.5, 12.5, False),
    ("already_bool_not_coerced", "boolean", True, True, False),
    ("plain_string_not_coerced", "string", "PAR", "PAR", False),
    ("number_for_string_not_coerced", "string", 42, 42, False),
    ("list_not_coerced", "number", ["1"], ["1"], False),
    ("null_not_coerced", "number", None, None, False),
    ("unknown_type_not_coerced", "date", "2024-01-01", "2024-01-01", False),
]


@pytest.mark.parametrize(
    ("declared_type", "value", "expected", "coerced"),
    [case[1:] for case in COERCE_VALUE_CASES],
    ids=[case[0] for case in COERCE_VALUE_CASES],
)
def test_coerce_value(declared_type, value, expected, coerced):
    result, coercions = _coerce_one(value, declared_type)
    assert result == expected
    assert type(result) is type(expected)
    assert len(coercions) == (1 if coerced else 0)


def test_coerce_go_nan():
    result, coercions = _coerce_one("NaN", "number")
    assert math.isnan(result)
    assert coercions[0].to_type == "float64"


# (case name, declared type, input, expected output)
PRIMARY_FIELD_CASES = [
    ("single_key_map", "string", {"city": "PAR"}, "PAR"),
    ("single_key_non_string_kept", "string", {"count": 3}, {"count": 3}),
    ("code_before_id", "string", {"id": "7", "code": "PAR", "label": "Paris"}, "PAR"),
    ("id_before_name", "string", {"name": "Paris", "id": "fr-par"}, "fr-par"),
    ("value_before_name", "string", {"name": "Paris", "value": "PAR"}, "PAR"),
    ("key_last", "string", {"key": "k1", "other": "x"}, "k1"),
    ("non_string_code_skipped", "string", {"code": 75, "name": "Paris"}, "Paris"),
    ("case_insensitive_match", "string", {"Code": "PAR", "Label": "Paris"}, "PAR"),
    ("exact_before_case_insensitive", "string", {"Code": "X", "name": "Paris"}, "Paris"),
    ("json_object_string", "string", '{"code": "PAR", "label": "Paris"}', "PAR"),
    ("json_object_string_single_key", "string", '{"symbol": "TSLA"}', "TSLA"),
    ("json_array_string_kept", "string", '["PAR"]', '["PAR"]'),
    ("brace_text_not_json_kept", "string", "{not json}", "{not json}"),
    ("json_nan_literal_kept", "string", '{"code": NaN, "x": 1}', '{"code": NaN, "x": 1}'),
    ("no_match_map_kept", "string", {"label": "Paris", "size": 2}, {"label": "Paris", "size": 2}),
    ("string_or_null_union", ["string", "null"], {"code": "PAR", "x": 1}, "PAR"),
    (
        "object_union_keeps_map",
        ["object", "string"],
        {"code": "PAR", "x": 1},
        {"code": "PAR", "x": 1},
    ),
]


@pytest.mark.parametrize(
    ("declared_type", "value", "expected"),
    [case[1:] for case in PRIMARY_FIELD_CASES],
    ids=[case[0] for case in PRIMARY_FIELD_CASES],
)
def test_extract_primary_field(declared_type, value, expected):
    result, coercions = _coerce_one(value, declared_type)
    assert result == expected
    assert len(coercions) == (0 if result == value else 1)


# (case name, declared types, input, expected output)
TYPE_LIST_CASES = [
    ("integer_or_null", ["integer", "null"], "5", 5),
    ("number_or_string_keeps_string", ["number", "string"], "5", "5"),
    ("string_or_number_keeps_string", ["string", "number"], "5", "5"),
    ("boolean_then_integer_tried_in_order", ["boolean", "integer"], "1", True),
    ("integer_then_boolean_tried_in_order", ["integer", "boolean"], "true", True),
]


@pytest.mark.parametrize(
    ("declared_types", "value", "expected"),
    [case[1:] for case in TYPE_LIST_CASES],
    ids=[case[0] for case in TYPE_LIST_CASES],
)
def test_coerce_type_list(declared_types, value, expected):
    result, _ = _coerce_one(value, declared_types)
    assert result == expected
    assert type(result) is type(expected)


WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "lat": {"type": "number"},
        "lon": {"type": "number"},
        "count": {"type": "integer"},
    },
}


def test_seed_001_weather_example():
    params = {"lat": "35.6897", "lon": "139.6917", "count": "5"}
    coerced, coercions = coerce_parameters(params, WEATHER_SCHEMA)
    assert coerced == {"lat": 35.6897, "lon": 139.6917, "count": 5}
    assert isinstance(coerced["count"], int)
    assert [c.log_line() for c in coercions] == [
        "lat: string(35.6897) -> float64(35.6897)",
        "lon: string(139.6917) -> float64(139.6917)",
        "count: string(5) -> int64(5)",
    ]


# (case name, coercion, expected log line)
LOG_LINE_CASES = [
    (
        "float64",
        Coercion("lat", "string", "35.6897", "float64", 35.6897),
        "lat: string(35.6897) -> float64(35.6897)",
    ),
    (
        "int64_large",
        Coercion("n", "string", "9999999999", "int64", 9999999999),
        "n: string(9999999999) -> int64(9999999999)",
    ),
    (
        "float64_large",
        Coercion("x", "string", "1000000", "float64", 1000000.0),
        "x: string(1000000) -> float64(1e+06)",
    ),
    ("bool", Coercion("flag", "string", "1", "bool", True), "flag: string(1) -> bool(true)"),
    (
        "map_to_string",
        Coercion("city", "map", {"name": "P", "code": "PAR"}, "string", "PAR"),
        'city: map({"code":"PAR","name":"P"}) -> string(PAR)',
    ),
]


@pytest.mark.parametrize(
    ("coercion", "expected"),
    [case[1:] for case in LOG_LINE_CASES],
    ids=[case[0] for case in LOG_LINE_CASES],
)
def test_log_line(coercion, expected):
    assert coercion.log_line() == expected


def test_to_dict():
    coercion = Coercion("count", "string", "5", "int64", 5)
    assert coercion.to_dict() == {
        "key": "count",
        "from_type": "string",
        "from_value": "5",
        "to_type": "int64",
        "to_value": 5,
        "log_line": "count: string(5) -> int64(5)",
    }


def test_keys_not_in_schema_pass_through():
    params = {"lat": "35.6897", "note": "42", "extra": {"code": "X"}}
    coerced, coercions = coerce_parameters(params, WEATHER_SCHEMA)
    assert coerced == {"lat": 35.6897, "note": "42", "extra": {"code": "X"}}
    assert [c.key for c in coercions] == ["lat"]


def test_only_top_level_keys_coerced():
    schema = {"properties": {"lat": {"type": "number"}}}
    params = {"opts": {"lat": "1.5"}}
    coerced, coercions = coerce_parameters(params, schema)
    assert coerced == params
    assert coercions == ()


def test_none_params():
    assert coerce_parameters(None, WEATHER_SCHEMA) == (None, ())


# (case name, schema)
EMPTY_SCHEMA_CASES = [
    ("none", None),
    ("empty_dict", {}),
    ("no_properties", {"type": "object"}),
    ("empty_properties", {"type": "object", "properties": {}}),
    ("property_without_type", {"properties": {"lat": {"description": "latitude"}}}),
]


@pytest.mark.parametrize(
    "schema", [case[1] for case in EMPTY_SCHEMA_CASES], ids=[case[0] for case in EMPTY_SCHEMA_CASES]
)
def test_empty_schema_leaves_params_unchanged(schema):
    params = {"lat": "35.6897"}
    assert coerce_parameters(params, schema) == ({"lat": "35.6897"}, ())


def test_input_not_mutated():
    params = {"lat": "35.6897", "city": {"code": "PAR"}, "count": "5"}
    schema = {
        "properties": {
            "lat": {"type": "number"},
            "city": {"type": "string"},
            "count": {"type": "integer"},
        }
    }
    original = copy.deepcopy(params)
    coerced, _ = coerce_parameters(params, schema)
    assert params == original
    assert coerced is not params
    assert coerced == {"lat": 35.6897, "city": "PAR", "count": 5}
