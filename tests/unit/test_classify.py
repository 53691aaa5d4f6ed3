"""classify_upstream_error: reference notes §10.1 (TestClassifyUpstreamError) and Go RE2 edges."""

from __future__ import annotations

import pytest

from executor.wire import ErrorCategory, UpstreamErrorInfo, classify_upstream_error

INPUT = (400, ErrorCategory.INPUT_ERROR, False, "API_ERROR")
RATE = (429, ErrorCategory.RATE_LIMIT, True, "RATE_LIMIT")
SERVICE = (502, ErrorCategory.SERVICE_ERROR, True, "SERVICE_ERROR")
AUTH_401 = (401, ErrorCategory.AUTH_ERROR, False, "AUTH_ERROR")
AUTH_403 = (403, ErrorCategory.AUTH_ERROR, False, "AUTH_ERROR")

# Reference notes §10.1, all 14 rows of the Go test.
GO_CASES = [
    ("amadeus_400", "Amadeus API error 400: Provider Error - INVALID PROPERTY CODE", INPUT),
    ("amadeus_429", "Amadeus API error 429: The network rate limit is exceeded", RATE),
    ("amadeus_401", "Amadeus API error 401: unauthorized", AUTH_401),
    ("amadeus_403", "Amadeus API error 403: access denied", AUTH_403),
    ("status_400", "API returned status 400: bad request", INPUT),
    ("status_502", "API returned status 502: gateway error", SERVICE),
    ("parenthesised_422", "API error (status 422): invalid param", INPUT),
    ("status_404", "API returned status 404: resource not found", INPUT),
    ("status_409", "API returned status 409: conflict", INPUT),
    ("status_500", "API returned status 500: internal server error", SERVICE),
    ("connection_refused", "connection refused", SERVICE),
    ("nil_error", None, SERVICE),
    ("first_match_wins", "error 400: upstream returned status 502", INPUT),
    ("code_colon_429", "upstream returned code: 429", RATE),
]

EDGE_CASES = [
    ("capital_error_no_match", "Error 400: bad request", SERVICE),
    ("capital_status_no_match", "Status 429", SERVICE),
    ("status_code_via_code", "status_code: 400", INPUT),
    ("four_digits_capture_three", "status 4000", INPUT),
    ("prose_error_no_digits", "An error occurred", SERVICE),
    ("two_digits_no_match", "status 99", SERVICE),
    ("upstream_402", "status 402", SERVICE),
    ("upstream_405", "status 405", SERVICE),
    ("upstream_408", "status 408", SERVICE),
    ("upstream_410", "status 410", SERVICE),
    ("upstream_100", "status 100", SERVICE),
    ("upstream_200", "status 200", SERVICE),
    ("upstream_302", "status 302", SERVICE),
    ("upstream_503", "error 503: unavailable", SERVICE),
    ("upstream_599", "code 599", SERVICE),
    ("colon_and_spaces", "code:  :  422", INPUT),
    ("newline_separator", "error\n404", INPUT),
    ("tab_separator_503", "error\t503", SERVICE),
    ("tab_separator_401", "error\t401", AUTH_401),
    ("vertical_tab_not_whitespace", "error\x0b400", SERVICE),
    ("nbsp_not_whitespace", "error\u00a0400", SERVICE),
    ("fullwidth_digits_not_matched", "status ４００", SERVICE),
    ("arabic_indic_digits_not_matched", "status ٤٠٠", SERVICE),
    ("later_alternative_after_failed_one", "statuscode: 429", RATE),
    ("dash_separator_no_match", "status-400", SERVICE),
    ("empty_text", "", SERVICE),
]


@pytest.mark.parametrize(
    ("error_text", "expected"),
    [case[1:] for case in GO_CASES + EDGE_CASES],
    ids=[case[0] for case in GO_CASES + EDGE_CASES],
)
def test_classify_upstream_error(error_text: str | None, expected: tuple) -> None:
    assert classify_upstream_error(error_text) == UpstreamErrorInfo(*expected)


def test_category_is_the_wire_string() -> None:
    info = classify_upstream_error("error 429")
    assert info.category == "RATE_LIMIT"
    assert isinstance(info.category, ErrorCategory)
