"""The legacy layer 3 trigger: reference §2.6 patterns and the §10.3 isTypeRelatedError table."""

from __future__ import annotations

import pytest

from executor.params import (
    TYPE_ERROR_PATTERNS,
    VALIDATION_ERROR_PATTERNS,
    match_type_related_error,
)

# (case name, error text, response body, first matching pattern or None)
TYPE_RELATED_CASES = [
    (
        "unmarshal_string",
        "component returned status 400: json: cannot unmarshal string into Go struct field .lat",
        "",
        "cannot unmarshal string into",
    ),
    (
        "unmarshal_number",
        "json: cannot unmarshal number into Go value of type string",
        "",
        "cannot unmarshal number into",
    ),
    (
        "unmarshal_bool",
        "cannot unmarshal bool into Go struct field",
        "",
        "cannot unmarshal bool into",
    ),
    (
        "unmarshal_generic",
        "json: cannot unmarshal array into Go value",
        "",
        "json: cannot unmarshal",
    ),
    (
        "type_mismatch",
        "component returned status 400",
        '{"error": "Type Mismatch for lat"}',
        "type mismatch",
    ),
    ("invalid_type", "Invalid type for field count", "", "invalid type"),
    (
        "expected_number_in_body",
        "component returned status 400",
        '{"message": "expected number for lat"}',
        "expected number",
    ),
    ("expected_string_in_body", "status 422", "field city: expected string", "expected string"),
    ("expected_boolean_in_body", "status 422", "EXPECTED BOOLEAN", "expected boolean"),
    ("expected_integer", "expected integer, got 12.5", "", "expected integer"),
    ("expected_float", "", "expected float", "expected float"),
    (
        "invalid_value",
        "component returned status 400: invalid value for units",
        "",
        "invalid value",
    ),
    ("must_be_greater_than", "status 400", "Amount must be greater than 0", "must be greater than"),
    ("must_be_less_than", "status 400", "days must be less than 15", "must be less than"),
    ("must_be_positive", "status 400", "quantity must be positive", "must be positive"),
    ("must_be_non_negative", "status 400", "offset must be non-negative", "must be non-negative"),
    ("must_be_at_least", "status 400", "length must be at least 3", "must be at least"),
    ("must_be_at_most", "status 400", "limit must be at most 100", "must be at most"),
    ("is_required", "status 400", "city_code is required", "is required"),
    ("missing_required", "status 400", "Missing required field: lat", "missing required"),
    ("cannot_be_empty", "status 400", "query cannot be empty", "cannot be empty"),
    ("cannot_be_zero", "status 400", "divisor cannot be zero", "cannot be zero"),
    ("cannot_be_null", "status 400", "date cannot be null", "cannot be null"),
    ("cannot_be_negative", "status 400", "amount cannot be negative", "cannot be negative"),
    ("invalid_format", "status 400", "Invalid format for date", "invalid format"),
    ("out_of_range", "status 400", "lat out of range", "out of range"),
    ("invalid_request", "status 400", '{"code": "INVALID_REQUEST"}', "invalid_request"),
    ("bad_request", "component returned status 400: Bad Request", "", "bad request"),
    ("validation_failed", "status 422", "Validation failed", "validation failed"),
    ("constraint_violation", "status 409", "unique constraint violation", "constraint violation"),
    ("type_pattern_before_validation", "status 400", "is required; type mismatch", "type mismatch"),
    (
        "connection_refused",
        "request failed: dial tcp 127.0.0.1:8101: connect: connection refused",
        "",
        None,
    ),
    ("request_timeout", "request failed: context deadline exceeded (request timeout)", "", None),
    ("capability_not_found", "agent returned status 404", "capability not found", None),
    (
        "unauthorized",
        "component returned status 401: Unauthorized",
        '{"error": "unauthorized"}',
        None,
    ),
    ("internal_server_error", "component returned status 500: Internal Server Error", "", None),
    ("empty", "", "", None),
]


@pytest.mark.parametrize(
    ("error_text", "response_body", "expected"),
    [case[1:] for case in TYPE_RELATED_CASES],
    ids=[case[0] for case in TYPE_RELATED_CASES],
)
def test_match_type_related_error(error_text, response_body, expected):
    assert match_type_related_error(error_text, response_body) == expected


def test_pattern_split_across_error_and_body():
    assert match_type_related_error("city_code is", "required") == "is required"


def test_pattern_tables_match_reference():
    assert len(TYPE_ERROR_PATTERNS) == 12
    assert len(VALIDATION_ERROR_PATTERNS) == 18
    assert TYPE_ERROR_PATTERNS[0] == "cannot unmarshal string into"
    assert VALIDATION_ERROR_PATTERNS[-1] == "constraint violation"
    assert all(p == p.lower() for p in (*TYPE_ERROR_PATTERNS, *VALIDATION_ERROR_PATTERNS))
