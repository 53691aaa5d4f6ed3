"""Layer 2 schema coercion: the reference §10.3 coercion tables and Go strconv edge cases."""

from __future__ import annotations

import copy
import json

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
    ("number_go_inf_kept_not_json", "number", "+Inf", "+Inf", False),
    ("number_go_infinity_kept_not_json", "number", "-infinity", "-infinity", False),
    ("number_go_nan_kept_not_json", "number", "NaN", "NaN", False),
    ("number_go_nan_lower_kept_not_json", "number", "nan", "nan", False),
    ("number_go_inf_mixed_case_kept_not_json", "number", "iNF", "iNF", False),
    ("number_overflow_kept", "number", "1e400", "1e400", False),
    ("number_huge_exponent_kept", "number", "1e100000", "1e100000", False),
    ("number_tiny_exponent_is_zero", "number", "1e-100000", 0.0, True),
    ("number_negative_zero", "number", "-0", -0.0, True),
    # Go ParseFloat takes underscores between digits (underscoreOK), with or without a prefix.
    ("number_underscores_between_digits", "number", "1_000", 1000.0, True),
    ("number_underscores_in_fraction_and_exponent", "number", "1_23.50_0e+1_2", 1.235e14, True),
    ("number_leading_underscore_kept", "number", "_1000", "_1000", False),
    ("number_signed_leading_underscore_kept", "number", "-_1000", "-_1000", False),
    ("number_trailing_underscore_kept", "number", "1000_", "1000_", False),
    ("number_double_underscore_kept", "number", "1__000", "1__000", False),
    ("number_underscore_before_point_kept", "number", "1_.5", "1_.5", False),
    ("number_underscore_after_point_kept", "number", "1._5", "1._5", False),
    ("number_underscore_before_exponent_kept", "number", "1.5_e3", "1.5_e3", False),
    ("number_underscore_after_exponent_sign_kept", "number", "1.5e+_3", "1.5e+_3", False),
    ("number_leading_zero_underscore", "number", "0_1", 1.0, True),
    # Go ParseFloat takes hexadecimal floats; the p exponent is required.
    ("number_hex_float", "number", "0x1p-2", 0.25, True),
    ("number_hex_float_fraction", "number", "0x1.8p1", 3.0, True),
    ("number_hex_float_upper_case", "number", "0X1.8P+1", 3.0, True),
    ("number_hex_float_signed", "number", "-0x1p4", -16.0, True),
    ("number_hex_float_leading_point", "number", "0x.8p1", 1.0, True),
    ("number_hex_float_e_is_a_digit", "number", "0x1e3p0", 483.0, True),
    ("number_hex_float_underscore_after_prefix", "number", "0x_1p0", 1.0, True),
    ("number_hex_float_underscore_before_p_kept", "number", "0x1_p0", "0x1_p0", False),
    ("number_hex_without_exponent_kept", "number", "0x1A", "0x1A", False),
    ("number_hex_prefix_only_kept", "number", "0x", "0x", False),
    ("number_hex_no_digits_kept", "number", "0xp1", "0xp1", False),
    ("number_hex_overflow_kept", "number", "0x1p1024", "0x1p1024", False),
    ("number_hex_rounds_up_to_overflow_kept", "number", "0x1.fffffffffffff8p1023",
     "0x1.fffffffffffff8p1023", False),
    ("number_hex_subnormal_rounds_half_even", "number", "0x1.8p-1074", 1e-323, True),
    ("number_hex_below_subnormal_is_zero", "number", "0x1p-1075", 0.0, True),
    ("number_binary_prefix_kept", "number", "0b101", "0b101", False),
    ("number_octal_prefix_kept", "number", "0o17", "0o17", False),
    ("number_two_points_kept", "number", "1.2.3", "1.2.3", False),
    ("number_lone_point_kept", "number", ".", ".", False),
    ("number_signed_exponent_without_digits_kept", "number", "1e+", "1e+", False),
    ("number_infinity_suffix_kept", "number", "infinityx", "infinityx", False),
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
    ("integer_hex_prefix_kept", "integer", "0x10", "0x10", False),
    ("integer_octal_prefix_kept", "integer", "0o17", "0o17", False),
    ("integer_exponent_kept", "integer", "1e3", "1e3", False),
    ("integer_int64_min", "integer", "-9223372036854775808", -9223372036854775808, True),
    ("integer_int64_underflow_kept", "integer", "-9223372036854775809",
     "-9223372036854775809", False),
    ("integer_leading_zeros", "integer", "+0000000000000000000000042", 42, True),
    ("integer_5000_digits_kept", "integer", "9" * 5000, "9" * 5000, False),
    ("integer_empty_kept", "integer", "", "", False),
    ("integer_sign_only_kept", "integer", "-", "-", False),
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
    ("boolean_false_title", "boolean", "False", False, True),
    ("boolean_false_lower_f", "boolean", "f", False, True),
    ("boolean_true_upper_t", "boolean", "T", True, True),
    ("boolean_false_upper", "boolean", "FALSE", False, True),
    ("boolean_two_kept", "boolean", "2", "2", False),
    ("boolean_space_kept", "boolean", " true", " true", False),
    ("boolean_on_kept", "boolean", "on", "on", False),
    ("boolean_empty_kept", "boolean", "", "", False),
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


# (case name, declared types, input): Go parses these to NaN or ±Inf, which are not JSON.
NON_FINITE_CASES = [
    ("nan", "number", "NaN"),
    ("inf", "float64", "inf"),
    ("minus_infinity", "double", "-Infinity"),
    ("overflow", "number", "1e309"),
    ("number_or_null_union", ["number", "null"], "+inf"),
]


@pytest.mark.parametrize(
    ("declared_type", "value"),
    [case[1:] for case in NON_FINITE_CASES],
    ids=[case[0] for case in NON_FINITE_CASES],
)
def test_non_finite_parse_keeps_the_original_and_records_no_coercion(declared_type, value):
    coerced, coercions = coerce_parameters(
        {"value": value}, {"type": "object", "properties": {"value": {"type": declared_type}}}
    )
    assert coerced == {"value": value}
    assert coercions == ()
    json.dumps(coerced, allow_nan=False)  # what would be sent stays valid JSON


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
