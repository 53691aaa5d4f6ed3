"""The pre-dispatch guard (seed 000 §12, SPEC §2.2 row 0): named cases, one behaviour each."""

from __future__ import annotations

import pytest

from executor.params import GuardViolation, guard_parameters

PLAN_STEP_IDS = ("step-1", "geocode", "Weather")

SCHEMA = {
    "type": "object",
    "properties": {
        "lat": {"type": "number"},
        "city": {"type": "string", "enum": ["PAR", "LON"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object"},
        "note": {},
        "limit": {"type": ["number", "null"]},
        "level": {"enum": [1, 2, True]},
        "rows": {"type": "array", "items": {"type": "object"}},
        "when": {"type": "date"},
        "filter": {
            "type": "object",
            "properties": {"mode": {"type": "string", "enum": ["fast", "exact"]}},
            "required": ["mode"],
        },
    },
    "required": ["lat"],
}

# (case name, parameters, schema, expected (kind, path) pairs in report order)
GUARD_CASES = [
    ("clean_params_pass", {"lat": 1.5, "city": "PAR", "tags": ["a"]}, SCHEMA, []),
    (
        "unresolved_step_prefix_binding",
        {"lat": 1.0, "note": "{{step-1.data.x}}"},
        SCHEMA,
        [("unresolved_binding", "note")],
    ),
    (
        "unresolved_step_prefix_not_in_plan",
        {"lat": 1.0, "note": "{{step-9.data.x}}"},
        SCHEMA,
        [("unresolved_binding", "note")],
    ),
    (
        "unresolved_plan_step_binding",
        {"lat": 1.0, "note": "{{geocode.city}}"},
        SCHEMA,
        [("unresolved_binding", "note")],
    ),
    (
        "plan_step_match_is_case_insensitive",
        {"lat": 1.0, "note": "{{weather.temp}}"},
        SCHEMA,
        [("unresolved_binding", "note")],
    ),
    (
        "step_prefix_without_path",
        {"lat": 1.0, "note": "{{step-1}}"},
        SCHEMA,
        [("unresolved_binding", "note")],
    ),
    ("now_passes", {"lat": 1.0, "note": "{{now}}"}, SCHEMA, []),
    ("now_minus_7d_passes", {"lat": 1.0, "note": "since {{now-7d}}"}, SCHEMA, []),
    ("helm_template_passes", {"lat": 1.0, "note": "{{ .Values.image.tag }}"}, SCHEMA, []),
    ("unknown_id_with_path_passes", {"lat": 1.0, "note": "{{env.HOME}}"}, SCHEMA, []),
    (
        "binding_in_list_has_index_path",
        {"lat": 1.0, "tags": ["a", "b", "x {{step-1.data.tag}}"]},
        SCHEMA,
        [("unresolved_binding", "tags[2]")],
    ),
    (
        "binding_in_dict_has_dotted_path",
        {"lat": 1.0, "opts": {"inner": "{{geocode.response.lat}}"}},
        SCHEMA,
        [("unresolved_binding", "opts.inner")],
    ),
    (
        "binding_in_undeclared_key",
        {"lat": 1.0, "extra": [{"deep": "{{step-1.a}}"}]},
        SCHEMA,
        [("unresolved_binding", "extra[0].deep")],
    ),
    (
        "two_bindings_in_one_string",
        {"lat": 1.0, "note": "{{step-1.a}} and {{geocode.b}}"},
        SCHEMA,
        [("unresolved_binding", "note"), ("unresolved_binding", "note")],
    ),
    (
        "unresolved_value_not_enum_checked",
        {"lat": 1.0, "city": "{{geocode.city}}"},
        SCHEMA,
        [("unresolved_binding", "city")],
    ),
    ("missing_required", {"city": "PAR"}, SCHEMA, [("missing_required", "lat")]),
    ("none_params_missing_required", None, SCHEMA, [("missing_required", "lat")]),
    ("explicit_null_untyped_passes", {"lat": 1.0, "note": None}, SCHEMA, []),
    # seed 000 §12: the guard "preserves ... explicit null", whatever the declared type.
    ("explicit_null_number_passes", {"lat": None}, SCHEMA, []),
    ("explicit_null_object_and_enum_pass", {"lat": 1.0, "opts": None, "city": None}, SCHEMA, []),
    ("null_allowed_by_type_list", {"lat": 1.0, "limit": None}, SCHEMA, []),
    ("null_not_enum_checked_when_untyped", {"lat": 1.0, "level": None}, SCHEMA, []),
    ("enum_mismatch", {"lat": 1.0, "city": "PARIS"}, SCHEMA, [("enum", "city")]),
    ("enum_match", {"lat": 1.0, "city": "LON"}, SCHEMA, []),
    ("enum_int_equals_float", {"lat": 1.0, "level": 2.0}, SCHEMA, []),
    ("enum_true_is_not_one", {"lat": 1.0, "level": True}, SCHEMA, []),
    ("enum_one_is_not_true", {"lat": 1.0, "level": 3}, SCHEMA, [("enum", "level")]),
    ("enum_string_one_is_not_number", {"lat": 1.0, "level": "1"}, SCHEMA, [("enum", "level")]),
    ("object_where_array_declared", {"lat": 1.0, "tags": {"a": 1}}, SCHEMA, [("shape", "tags")]),
    ("array_where_object_declared", {"lat": 1.0, "opts": [1, 2]}, SCHEMA, [("shape", "opts")]),
    ("scalar_where_object_declared", {"lat": 1.0, "opts": "fast"}, SCHEMA, [("shape", "opts")]),
    ("object_where_scalar_declared", {"lat": {"v": 1}}, SCHEMA, [("shape", "lat")]),
    ("string_where_number_declared_passes", {"lat": "35.6"}, SCHEMA, []),
    ("boolean_where_string_declared_passes", {"lat": 1.0, "city": "PAR", "note": True}, SCHEMA, []),
    ("unknown_type_name_not_checked", {"lat": 1.0, "when": {"y": 2024}}, SCHEMA, []),
    (
        "array_item_object_expected",
        {"lat": 1.0, "rows": [{"a": 1}, "row", [1]]},
        SCHEMA,
        [("shape", "rows[1]"), ("shape", "rows[2]")],
    ),
    (
        "array_item_container_where_scalar_expected",
        {"lat": 1.0, "tags": ["a", {"b": 1}]},
        SCHEMA,
        [("shape", "tags[1]")],
    ),
    (
        "nested_enum_and_required",
        {"lat": 1.0, "filter": {"mode": "slow"}},
        SCHEMA,
        [("enum", "filter.mode")],
    ),
    (
        "nested_required_missing",
        {"lat": 1.0, "filter": {}},
        SCHEMA,
        [("missing_required", "filter.mode")],
    ),
    (
        "no_schema_bindings_only",
        {"opts": "x", "n": "{{step-1.v}}"},
        None,
        [("unresolved_binding", "n")],
    ),
    ("empty_schema_bindings_only", {"opts": "x"}, {}, []),
    (
        "several_violations_in_order",
        {
            "city": "PARIS",
            "tags": {"a": 1},
            "note": "{{step-1.data.x}}",
            "opts": ["x", "{{geocode.lat}}"],
        },
        SCHEMA,
        [
            ("unresolved_binding", "note"),
            ("unresolved_binding", "opts[1]"),
            ("missing_required", "lat"),
            ("enum", "city"),
            ("shape", "tags"),
            ("shape", "opts"),
        ],
    ),
]


@pytest.mark.parametrize(
    ("params", "schema", "expected"),
    [case[1:] for case in GUARD_CASES],
    ids=[case[0] for case in GUARD_CASES],
)
def test_guard(params, schema, expected):
    violations = guard_parameters(params, schema, PLAN_STEP_IDS)
    assert [(v.kind, v.path) for v in violations] == expected


# (case name, parameters, the single expected violation)
MESSAGE_CASES = [
    (
        "enum_message",
        {"lat": 1.0, "city": "PARIS"},
        GuardViolation(
            kind="enum",
            path="city",
            expected='["PAR", "LON"]',
            received='"PARIS"',
            message=(
                'parameter "city": value "PARIS" is not one of the declared enum ["PAR", "LON"]'
            ),
        ),
    ),
    (
        "shape_message",
        {"lat": 1.0, "tags": {"a": 1}},
        GuardViolation(
            kind="shape",
            path="tags",
            expected="array",
            received="object",
            message='parameter "tags": expected array, got object',
        ),
    ),
    (
        "missing_required_message",
        {},
        GuardViolation(
            kind="missing_required",
            path="lat",
            expected="present",
            received="absent",
            message='parameter "lat" is required by the schema but absent',
        ),
    ),
    (
        "unresolved_plan_step_message",
        {"lat": 1.0, "note": "{{geocode.city}}"},
        GuardViolation(
            kind="unresolved_binding",
            path="note",
            expected="a resolved value",
            received="{{geocode.city}}",
            message=(
                'parameter "note" still contains the binding "{{geocode.city}}"; it references '
                'plan step "geocode", which produced no value at that path'
            ),
        ),
    ),
    (
        "unresolved_foreign_step_message",
        {"lat": 1.0, "note": "{{step-9.x}}"},
        GuardViolation(
            kind="unresolved_binding",
            path="note",
            expected="a resolved value",
            received="{{step-9.x}}",
            message=(
                'parameter "note" still contains the binding "{{step-9.x}}"; it references '
                '"step-9", which is not a step of this plan'
            ),
        ),
    ),
]


@pytest.mark.parametrize(
    ("params", "expected"),
    [case[1:] for case in MESSAGE_CASES],
    ids=[case[0] for case in MESSAGE_CASES],
)
def test_guard_violation_record(params, expected):
    assert guard_parameters(params, SCHEMA, PLAN_STEP_IDS) == (expected,)


def test_guard_does_not_mutate_params():
    params = {"lat": None, "tags": ["{{step-1.x}}"]}
    guard_parameters(params, SCHEMA, PLAN_STEP_IDS)
    assert params == {"lat": None, "tags": ["{{step-1.x}}"]}
