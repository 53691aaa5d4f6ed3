"""Template bindings: reference §10.3 Templates, Interpolation and extractFieldValue tables."""

from __future__ import annotations

import copy

import pytest

from executor.params import (
    TEMPLATE_RE,
    binding_references,
    exact_bound_keys,
    go_format_value,
    resolve_bindings,
)

STEP_1_BODY = {
    "status": "success",
    "data": {
        "country": "France",
        "location": {"country": "France", "capital": "Paris"},
        "population": 123,
        "cities": ["Paris", "Lyon"],
        "nothing": None,
    },
}
RESULTS = {"step-1": STEP_1_BODY}

# (case name, template string, expected resolved value)
TEMPLATE_CASES = [
    ("status_success", "{{step-1.response.status}}", "success"),
    ("nested_value", "{{step-1.response.data.location.country}}", "France"),
    ("numeric_keeps_type", "{{step-1.response.data.population}}", 123),
    ("array_as_json_string", "{{step-1.response.data.cities}}", '["Paris","Lyon"]'),
    (
        "map_as_sorted_json",
        "{{step-1.response.data.location}}",
        '{"capital":"Paris","country":"France"}',
    ),
    ("embedded_in_text", "Country is {{step-1.response.data.country}}", "Country is France"),
    ("path_normalized", "{{step-1.data.country}}", "France"),
    # Go quirk: the prefix check ignores case but the map lookup of "RESPONSE" does not.
    (
        "response_prefix_other_case_unresolved",
        "{{step-1.RESPONSE.status}}",
        "{{step-1.RESPONSE.status}}",
    ),
    ("response_prefix_present", "{{step-1.response.data.country}}", "France"),
    ("step_id_case_insensitive", "{{STEP-1.data.country}}", "France"),
    (
        "nonexistent_field_unchanged",
        "{{step-1.response.data.missing}}",
        "{{step-1.response.data.missing}}",
    ),
    (
        "nonexistent_step_unchanged",
        "{{step-9.response.data.country}}",
        "{{step-9.response.data.country}}",
    ),
    ("explicit_null_is_none", "{{step-1.data.nothing}}", None),
    ("embedded_null_as_null", "x={{step-1.data.nothing}}", "x=null"),
    ("several_templates", "{{step-1.data.country}}/{{step-1.data.population}}", "France/123"),
    ("embedded_array_as_json", "in {{step-1.data.cities}}", 'in ["Paris","Lyon"]'),
    (
        "embedded_unresolved_stays",
        "{{step-1.data.country}} {{step-1.data.zip}}",
        "France {{step-1.data.zip}}",
    ),
    ("not_a_template", "plain text", "plain text"),
    ("tool_template_untouched", "{{now-7d}}", "{{now-7d}}"),
    ("spaces_not_a_binding", "{{ step-1.data.country }}", "{{ step-1.data.country }}"),
]


@pytest.mark.parametrize(
    ("template", "expected"),
    [case[1:] for case in TEMPLATE_CASES],
    ids=[case[0] for case in TEMPLATE_CASES],
)
def test_resolve_template(template, expected):
    resolved = resolve_bindings(template, RESULTS)
    assert resolved == expected
    assert type(resolved) is type(expected)


def test_tesla_amount_keeps_float():
    results = {"step-1": {"success": True, "data": {"symbol": "TSLA", "price": 468.285}}}
    params = {"symbol": "TSLA", "price": "{{step-1.data.price}}", "quantity": 100}
    resolved = resolve_bindings(params, results)
    assert resolved == {"symbol": "TSLA", "price": 468.285, "quantity": 100}
    assert isinstance(resolved["price"], float)


def test_interpolation_weather():
    results = {"geocode": {"lat": 35.6897, "lon": 139.6917, "city": "Tokyo"}}
    params = {
        "lat": "{{geocode.response.lat}}",
        "lon": "{{geocode.response.lon}}",
        "title": "Weather for {{geocode.response.city}}",
        "units": "metric",
        "days": 3,
        "alerts": True,
        "extra": None,
    }
    resolved = resolve_bindings(params, results)
    assert resolved == {
        "lat": 35.6897,
        "lon": 139.6917,
        "title": "Weather for Tokyo",
        "units": "metric",
        "days": 3,
        "alerts": True,
        "extra": None,
    }
    assert isinstance(resolved["lat"], float)
    assert isinstance(resolved["lon"], float)


def test_resolve_recurses_into_lists_and_dicts():
    params = {"filters": [{"country": "{{step-1.data.country}}"}, "{{step-1.data.population}}", 7]}
    assert resolve_bindings(params, RESULTS) == {"filters": [{"country": "France"}, 123, 7]}


def test_resolve_does_not_mutate_input():
    params = {
        "a": "{{step-1.data.country}}",
        "b": ["{{step-1.status}}"],
        "c": {"d": "{{step-1.status}}"},
    }
    original = copy.deepcopy(params)
    resolved = resolve_bindings(params, RESULTS)
    assert params == original
    assert resolved == {"a": "France", "b": ["success"], "c": {"d": "success"}}


def test_resolve_empty_results_leaves_templates():
    params = {"a": "{{step-1.data.country}}"}
    assert resolve_bindings(params, {}) == params


FIELD_VALUE_BODY = {
    "samples": [{"value": 1.21}, {"value": 3.5}],
    "tags": ["go", "python"],
    "name": "probe",
}

# (case name, field path, expected value or the literal template when unresolved)
FIELD_VALUE_CASES = [
    ("array_index_then_key", "samples.0.value", 1.21),
    ("array_index_in_range", "tags.1", "python"),
    ("index_out_of_range", "tags.5", None),
    ("negative_index", "tags.-1", None),
    ("non_numeric_index", "tags.abc", None),
    ("past_a_scalar", "name.length", None),
    ("past_a_scalar_in_array", "tags.0.x", None),
]


@pytest.mark.parametrize(
    ("field_path", "expected"),
    [case[1:] for case in FIELD_VALUE_CASES],
    ids=[case[0] for case in FIELD_VALUE_CASES],
)
def test_extract_field_value(field_path, expected):
    template = "{{probe." + field_path + "}}"
    resolved = resolve_bindings(template, {"probe": FIELD_VALUE_BODY})
    assert resolved == (template if expected is None else expected)


# (case name, value, Go %v text)
GO_FORMAT_CASES = [
    ("float_plain", 46828.5, "46828.5"),
    ("float_million", 1000000.0, "1e+06"),
    ("int_million_as_float64", 1000000, "1e+06"),
    ("float_large", 123456789.0, "1.23456789e+08"),
    ("float_small_plain", 0.0001, "0.0001"),
    ("float_small_exponent", 0.00001, "1e-05"),
    ("integer", 42, "42"),
    ("float_integral", 42.0, "42"),
    ("negative", -3.5, "-3.5"),
    ("just_below_exponent", 999999.0, "999999"),
    ("zero", 0, "0"),
    ("true", True, "true"),
    ("false", False, "false"),
    ("string", "Tokyo", "Tokyo"),
    ("null", None, "null"),
    ("map_compact_json", {"b": 1, "a": [1.5, "x"]}, '{"a":[1.5,"x"],"b":1}'),
    ("map_html_escaped", {"q": "a<b&c"}, '{"q":"a\\u003cb\\u0026c"}'),
    ("json_large_float", [1e21, 1e20, 1e-7], "[1e+21,100000000000000000000,1e-7]"),
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [case[1:] for case in GO_FORMAT_CASES],
    ids=[case[0] for case in GO_FORMAT_CASES],
)
def test_go_format_value(value, expected):
    assert go_format_value(value) == expected


def test_embedded_float_uses_go_format():
    results = {"step-1": {"data": {"amount": 46828.5, "big": 1000000.0}}}
    text = "Sell {{step-1.data.amount}} of {{step-1.data.big}}"
    assert resolve_bindings(text, results) == "Sell 46828.5 of 1e+06"


# (case name, parameters, exact-bound keys)
EXACT_BOUND_CASES = [
    ("single_binding", {"price": "{{step-1.data.price}}", "qty": 100}, {"price"}),
    ("embedded_not_exact", {"title": "Weather for {{geo.city}}"}, set()),
    ("two_bindings_not_exact", {"pair": "{{a.x}}{{b.y}}"}, set()),
    ("tool_template_not_binding", {"since": "{{now}}"}, set()),
    ("nested_not_top_level", {"opts": {"price": "{{step-1.data.price}}"}}, set()),
    ("several_keys", {"lat": "{{geo.lat}}", "lon": "{{geo.lon}}", "u": "m"}, {"lat", "lon"}),
    ("none_params", None, set()),
]


@pytest.mark.parametrize(
    ("params", "expected"),
    [case[1:] for case in EXACT_BOUND_CASES],
    ids=[case[0] for case in EXACT_BOUND_CASES],
)
def test_exact_bound_keys(params, expected):
    assert exact_bound_keys(params) == frozenset(expected)


# (case name, value, referenced step ids)
REFERENCE_CASES = [
    ("top_level", {"a": "{{step-1.data.x}}"}, {"step-1"}),
    ("list_and_nested_map", {"a": ["{{geo.lat}}", {"b": "x {{step-2.y}}"}]}, {"geo", "step-2"}),
    ("several_in_one_string", "{{a.x}} and {{b.y}} and {{a.z}}", {"a", "b"}),
    ("tool_templates_ignored", {"a": "{{now}}", "b": "{{ .Values.x }}"}, set()),
    ("non_strings_ignored", {"a": 1, "b": None, "c": True}, set()),
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [case[1:] for case in REFERENCE_CASES],
    ids=[case[0] for case in REFERENCE_CASES],
)
def test_binding_references(value, expected):
    assert binding_references(value) == expected


def test_template_regex_is_ascii():
    assert TEMPLATE_RE.fullmatch("{{étape.x}}") is None
    assert TEMPLATE_RE.fullmatch("{{step_1.a-b.c}}") is not None
