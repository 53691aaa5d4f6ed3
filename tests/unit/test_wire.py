"""Wire protocol: envelopes, retry policy on the wire (seed 000 §12), Retry-After, statuses."""

from __future__ import annotations

import calendar
import json

import pytest

from executor.wire import (
    LONGEST_WAIT_MS,
    ErrorCategory,
    RetryPolicy,
    ToolError,
    ToolResponse,
    http_status_for_category,
    is_success_status,
    is_terminal_status,
    is_transient_status,
    parse_envelope,
    parse_retry_after_detail,
    parse_retry_after_header,
    parse_retry_policy,
)

# ---------------------------------------------------------------------------------------------
# Categories and ToolError / ToolResponse shapes (reference notes §1.1–§1.3)
# ---------------------------------------------------------------------------------------------


def test_error_category_wire_strings() -> None:
    assert [category.value for category in ErrorCategory] == [
        "INPUT_ERROR",
        "NOT_FOUND",
        "RATE_LIMIT",
        "AUTH_ERROR",
        "SERVICE_ERROR",
    ]


@pytest.mark.parametrize(
    ("category", "status"),
    [
        (ErrorCategory.INPUT_ERROR, 400),
        (ErrorCategory.NOT_FOUND, 404),
        (ErrorCategory.AUTH_ERROR, 401),
        (ErrorCategory.RATE_LIMIT, 429),
        (ErrorCategory.SERVICE_ERROR, 503),
        ("SERVICE_ERROR", 503),
        ("", 500),
        ("service_error", 500),
        ("UNKNOWN", 500),
    ],
    ids=[
        "input_error",
        "not_found",
        "auth_error",
        "rate_limit",
        "service_error",
        "plain_string",
        "empty",
        "lower_case_is_unknown",
        "unknown",
    ],
)
def test_http_status_for_category(category: str, status: int) -> None:
    assert http_status_for_category(category) == status


@pytest.mark.parametrize(
    ("tool_error", "text"),
    [
        (ToolError(code="", message="Something went wrong"), "[] Something went wrong"),
        (ToolError(code="ERROR", message=""), "[ERROR] "),
        (ToolError(code="LOCATION_NOT_FOUND", message="City 'XYZ' not found"), None),
    ],
    ids=["empty_code", "empty_message", "both_set"],
)
def test_tool_error_text(tool_error: ToolError, text: str | None) -> None:
    expected = text if text is not None else "[LOCATION_NOT_FOUND] City 'XYZ' not found"
    assert tool_error.error_text() == expected


def test_tool_error_to_dict_uses_go_field_order_and_omits_empty_details() -> None:
    without_details = ToolError("E", "m", ErrorCategory.NOT_FOUND, True)
    assert list(without_details.to_dict()) == ["code", "message", "category", "retryable"]
    assert ToolError("E", "m", details={}).to_dict().get("details") is None
    with_details = ToolError("E", "m", "RATE_LIMIT", True, {"retry_after": "60s"}).to_dict()
    assert with_details == {
        "code": "E",
        "message": "m",
        "category": "RATE_LIMIT",
        "retryable": True,
        "details": {"retry_after": "60s"},
    }
    assert type(without_details.to_dict()["category"]) is str


def test_tool_response_success_omits_error() -> None:
    response = ToolResponse(success=True, data={"temperature": 22.5})
    assert json.loads(response.to_json()) == {"success": True, "data": {"temperature": 22.5}}


def test_tool_response_error_omits_data() -> None:
    response = ToolResponse(success=False, error=ToolError("E", "bad", "INPUT_ERROR"))
    assert response.to_json() == (
        b'{"success":false,"error":{"code":"E","message":"bad","category":"INPUT_ERROR",'
        b'"retryable":false}}'
    )


def test_tool_response_round_trips_through_from_json() -> None:
    response = ToolResponse(
        success=False,
        error=ToolError("RATE", "slow down", "RATE_LIMIT", True, {"retry_after": "60s"}),
    )
    assert ToolResponse.from_json(response.to_json()) == response


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"success":true,"data":[1,2]}', ToolResponse(True, [1, 2])),
        (b'{"success":false,"error":"boom"}', ToolResponse(False, None, ToolError("", "boom"))),
        (
            b'{"success":false,"error":{"code":7,"message":"m","retryable":"true",'
            b'"details":{"n":3}}}',
            ToolResponse(False, None, ToolError("", "m", "", False, {"n": "3"})),
        ),
        (b'{"data":1}', None),
        (b'{"success":"false"}', None),
        (b"[1]", None),
        (b"not json", None),
        (b"", None),
    ],
    ids=[
        "success_with_data",
        "string_error",
        "ill_typed_fields",
        "no_success",
        "string_success",
        "array",
        "not_json",
        "empty",
    ],
)
def test_tool_response_from_json(body: bytes, expected: ToolResponse | None) -> None:
    assert ToolResponse.from_json(body) == expected


# ---------------------------------------------------------------------------------------------
# Retry policy on the wire (SPEC §2.1, seed 000 §12)
# ---------------------------------------------------------------------------------------------

TRUE = RetryPolicy.EXPLICIT_TRUE
FALSE = RetryPolicy.EXPLICIT_FALSE
UNSPECIFIED = RetryPolicy.UNSPECIFIED

RETRY_POLICY_CASES = [
    ("explicit_true", b'{"success":false,"error":{"code":"X","retryable":true}}', TRUE),
    ("explicit_false", b'{"success":false,"error":{"code":"X","retryable":false}}', FALSE),
    ("omitted", b'{"success":false,"error":{"code":"X","message":"m"}}', UNSPECIFIED),
    ("null", b'{"success":false,"error":{"retryable":null}}', UNSPECIFIED),
    ("string_false", b'{"success":false,"error":{"retryable":"false"}}', UNSPECIFIED),
    ("string_true", b'{"success":false,"error":{"retryable":"true"}}', UNSPECIFIED),
    ("number_0", b'{"success":false,"error":{"retryable":0}}', UNSPECIFIED),
    ("number_1", b'{"success":false,"error":{"retryable":1}}', UNSPECIFIED),
    ("top_level_retryable", b'{"success":false,"retryable":false,"error":{}}', UNSPECIFIED),
    ("error_as_string", b'{"success":false,"error":"retryable: false"}', UNSPECIFIED),
    ("error_null", b'{"success":false,"error":null}', UNSPECIFIED),
    ("error_array", b'{"success":false,"error":[{"retryable":false}]}', UNSPECIFIED),
    ("error_missing", b'{"success":false}', UNSPECIFIED),
    ("success_missing", b'{"error":{"retryable":false}}', UNSPECIFIED),
    ("success_true", b'{"success":true,"error":{"retryable":false}}', UNSPECIFIED),
    ("success_string_false", b'{"success":"false","error":{"retryable":false}}', UNSPECIFIED),
    ("success_number_0", b'{"success":0,"error":{"retryable":false}}', UNSPECIFIED),
    ("success_null", b'{"success":null,"error":{"retryable":false}}', UNSPECIFIED),
    ("not_json", b"retryable: false", UNSPECIFIED),
    ("truncated_json", b'{"success":false,"error":{"retryable":false}', UNSPECIFIED),
    # Go's json.Unmarshal reads a bad byte in a string as U+FFFD: still the envelope's refusal
    ("non_utf8_in_a_string", b'{"success":false,"error":{"retryable":false,"m":"\xff"}}',
     FALSE),
    ("non_utf8_outside_strings", b'{"success":false,"error":{"retryable":false}}\xff',
     UNSPECIFIED),
    ("empty", b"", UNSPECIFIED),
    ("none", None, UNSPECIFIED),
    ("json_array", b'[{"success":false,"error":{"retryable":false}}]', UNSPECIFIED),
    ("json_string", b'"retryable false"', UNSPECIFIED),
    (
        "nested_in_details",
        b'{"success":false,"error":{"details":{"retryable":false}}}',
        UNSPECIFIED,
    ),
    ("nested_in_data", b'{"success":false,"data":{"error":{"retryable":false}}}', UNSPECIFIED),
    # Keys match exactly: the seeds name `error.retryable`; Go matched case-insensitively.
    ("retryable_capitalised", b'{"success":false,"error":{"Retryable":false}}', UNSPECIFIED),
    ("success_capitalised", b'{"Success":false,"error":{"retryable":false}}', UNSPECIFIED),
    ("error_capitalised", b'{"success":false,"Error":{"retryable":false}}', UNSPECIFIED),
    ("nan_is_not_json", b'{"success":false,"error":{"retryable":false,"n":NaN}}', UNSPECIFIED),
    ("str_body", '{"success":false,"error":{"retryable":false}}', FALSE),
    ("whitespace_around", b' \n{"success" : false, "error" : {"retryable" : true}}\n', TRUE),
    (
        "duplicate_key_last_wins",
        b'{"success":false,"error":{"retryable":true,"retryable":false}}',
        FALSE,
    ),
]


@pytest.mark.parametrize(
    ("body", "expected"),
    [case[1:] for case in RETRY_POLICY_CASES],
    ids=[case[0] for case in RETRY_POLICY_CASES],
)
def test_parse_retry_policy(body: bytes | str | None, expected: RetryPolicy) -> None:
    assert parse_retry_policy(body) is expected


def test_unspecified_is_not_false() -> None:
    assert RetryPolicy.UNSPECIFIED != RetryPolicy.EXPLICIT_FALSE
    assert parse_retry_policy(b'{"success":false,"error":{}}') is not RetryPolicy.EXPLICIT_FALSE


# ---------------------------------------------------------------------------------------------
# parse_envelope
# ---------------------------------------------------------------------------------------------


def test_envelope_of_a_structured_error() -> None:
    body = (
        b'{"success":false,"error":{"code":"RATE_LIMIT_EXCEEDED","message":"slow down",'
        b'"category":"RATE_LIMIT","retryable":true,"details":{"retry_after":"60s"}}}'
    )
    envelope = parse_envelope(body)
    assert envelope.is_json and envelope.is_object
    assert envelope.success is False
    assert (
        envelope.error_object is not None and envelope.error_object["code"] == "RATE_LIMIT_EXCEEDED"
    )
    assert (envelope.error_code, envelope.error_message, envelope.error_category) == (
        "RATE_LIMIT_EXCEEDED",
        "slow down",
        "RATE_LIMIT",
    )
    assert envelope.retry_policy is RetryPolicy.EXPLICIT_TRUE
    assert envelope.retry_after_detail_ms == 60_000.0
    assert envelope.error_text == "slow down"


def test_envelope_of_a_success() -> None:
    envelope = parse_envelope(b'{"success":true,"data":{"city":"Paris"}}')
    assert envelope.success is True
    assert envelope.json_value == {"success": True, "data": {"city": "Paris"}}
    assert envelope.error_object is None and envelope.error_code is None
    assert envelope.retry_policy is RetryPolicy.UNSPECIFIED


@pytest.mark.parametrize(
    ("body", "is_json", "is_object", "success", "error_text"),
    [
        (
            b"upstream exploded\nstack line 2\r\n",
            False,
            False,
            None,
            "upstream exploded stack line 2",
        ),
        (b"\xffbad bytes", False, False, None, "\ufffdbad bytes"),
        (b"", False, False, None, ""),
        (None, False, False, None, ""),
        (b"null", True, False, None, "null"),
        (b"[1,2]", True, False, None, "[1,2]"),
        (b'{"success":"no","error":"quota gone"}', True, True, None, "quota gone"),
        (b'{"success":false,"error":{"code":"C","message":""}}', True, True, False, None),
    ],
    ids=[
        "plain_text_one_line",
        "non_utf8_replaced",
        "empty",
        "none",
        "json_null",
        "json_array",
        "string_error_and_string_success",
        "empty_message_falls_back_to_body",
    ],
)
def test_envelope_shapes(
    body: bytes | None, is_json: bool, is_object: bool, success: bool | None, error_text: str | None
) -> None:
    envelope = parse_envelope(body)
    assert (envelope.is_json, envelope.is_object, envelope.success) == (is_json, is_object, success)
    expected_text = error_text if error_text is not None else (body or b"").decode()
    assert envelope.error_text == expected_text


def test_envelope_ignores_ill_typed_error_fields() -> None:
    envelope = parse_envelope(
        b'{"success":false,"error":{"code":404,"message":["x"],"category":null}}'
    )
    assert envelope.error_object == {"code": 404, "message": ["x"], "category": None}
    assert (envelope.error_code, envelope.error_message, envelope.error_category) == (
        None,
        None,
        None,
    )


# ---------------------------------------------------------------------------------------------
# Retry-After: error.details.retry_after and the header
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected_ms"),
    [
        ("60s", 60_000.0),
        ("1.5s", 1_500.0),
        ("500ms", 500.0),
        ("1m30s", 90_000.0),
        ("2", 2_000.0),
        ("0.25", 250.0),
        (2, 2_000.0),
        (1.5, 1_500.0),
        (0, 0.0),
        ("0", 0.0),
        (" 3 ", 3_000.0),
        ("abc", None),
        ("-5s", None),
        (-1, None),
        ("", None),
        (True, None),
        (None, None),
        ({"seconds": 2}, None),
        ("1e3", None),
        ("inf", None),
        (float("nan"), None),
        (1e306, LONGEST_WAIT_MS),
        (10**400, LONGEST_WAIT_MS),
        ("1" + "0" * 306, LONGEST_WAIT_MS),
        (-(10**400), None),
    ],
    ids=[
        "go_seconds",
        "go_fraction",
        "go_milliseconds",
        "go_compound",
        "seconds_string",
        "fraction_string",
        "json_integer",
        "json_float",
        "json_zero",
        "string_zero",
        "padded",
        "word",
        "negative_duration",
        "negative_number",
        "empty",
        "boolean",
        "null",
        "object",
        "exponent",
        "inf_string",
        "nan",
        "number_too_long_for_a_float_in_ms",
        "integer_beyond_float_range",
        "seconds_string_too_long_for_a_float_in_ms",
        "negative_integer_beyond_float_range",
    ],
)
def test_parse_retry_after_detail(value: object, expected_ms: float | None) -> None:
    assert parse_retry_after_detail(value) == expected_ms


@pytest.mark.parametrize(
    ("details", "expected_ms"),
    [
        ({"retry_after": "60s"}, 60_000.0),
        ({"retry_after": "2"}, 2_000.0),
        ({"retry_after": 2}, 2_000.0),
        ({"retry_after": "abc"}, None),
        ({}, None),
    ],
    ids=["go_duration", "number_string", "number", "invalid", "absent"],
)
def test_envelope_retry_after_detail(details: dict, expected_ms: float | None) -> None:
    body = json.dumps({"success": False, "error": {"code": "R", "details": details}})
    assert parse_envelope(body.encode()).retry_after_detail_ms == expected_ms


NOW = float(calendar.timegm((2015, 10, 21, 7, 27, 0)))


@pytest.mark.parametrize(
    ("header", "expected_ms"),
    [
        ("120", 120_000.0),
        ("0", 0.0),
        ("1.5", 1_500.0),
        (" 7 ", 7_000.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 60_000.0),
        ("Wednesday, 21-Oct-15 07:27:30 GMT", 30_000.0),
        ("Wed Oct 21 07:27:10 2015", 10_000.0),
        ("Wed, 21 Oct 2015 07:00:00 GMT", 0.0),
        ("-1", None),
        ("soon", None),
        ("", None),
        (None, None),
        ("1e3", None),
        ("1" + "0" * 306, LONGEST_WAIT_MS),
        ("9" * 400, LONGEST_WAIT_MS),
    ],
    ids=[
        "delta_seconds",
        "zero",
        "decimal_seconds",
        "padded",
        "imf_fixdate",
        "rfc850_date",
        "asctime_date",
        "past_date",
        "negative",
        "word",
        "empty",
        "absent",
        "exponent",
        "too_long_for_a_float_in_ms",
        "beyond_float_range",
    ],
)
def test_parse_retry_after_header(header: str | None, expected_ms: float | None) -> None:
    assert parse_retry_after_header(header, now=NOW) == expected_ms


# ---------------------------------------------------------------------------------------------
# Status classes
# ---------------------------------------------------------------------------------------------


STATUS_CASES = [
    (0, True, False, False),
    (200, False, False, True),
    (204, False, False, True),
    (299, False, False, True),
    (300, False, False, False),
    (400, False, False, False),
    (401, False, True, False),
    (403, False, True, False),
    (404, False, False, False),
    (405, False, True, False),
    (408, True, False, False),
    (409, False, False, False),
    (422, False, False, False),
    (429, True, False, False),
    (500, True, False, False),
    (502, True, False, False),
    (503, True, False, False),
    (599, True, False, False),
    (600, False, False, False),
]


@pytest.mark.parametrize(
    ("status", "transient", "terminal", "success"),
    STATUS_CASES,
    ids=[f"status_{case[0]}" for case in STATUS_CASES],
)
def test_status_classes(status: int, transient: bool, terminal: bool, success: bool) -> None:
    assert is_transient_status(status) is transient
    assert is_terminal_status(status) is terminal
    assert is_success_status(status) is success
