"""Tool-contract warnings of one response, a named case per behaviour."""

from __future__ import annotations

import json

import pytest

from executor.contract import WARNING_CODES, response_warnings


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


def _error(code: str, message: str, **extra: object) -> bytes:
    return _json({"success": False, "error": {"code": code, "message": message, **extra}})


CASES: dict[str, tuple[int | None, bytes | None, list[str]]] = {
    "a_clean_success": (200, _json({"success": True, "data": {"id": 1}}), []),
    "a_success_without_envelope": (200, _json({"price": 1.5}), []),
    "2xx_with_success_false": (200, _error("E", "boom"), ["success_false_on_2xx"]),
    "success_true_on_a_503": (503, _json({"success": True}), ["success_true_on_error"]),
    "a_plain_text_200": (200, b"OK", ["body_not_json"]),
    "an_html_502": (502, b"<html>Bad Gateway</html>", ["body_not_json"]),
    "an_empty_204": (204, b"", []),
    # seed 000 Scenario D: a 503 whose message describes invalid input.
    "scenario_d_503_location_not_found": (
        503, b"location not found: Flower Mound", ["body_not_json", "transient_input_error"]),
    "a_503_with_an_invalid_input_code": (
        503, _error("INVALID_CITY", "try again", retryable=True), ["transient_input_error"]),
    "a_503_that_is_really_down": (503, _error("UNAVAILABLE", "upstream timeout"), []),
    "a_429_mentioning_invalid_is_rate_limiting": (429, _error("RATE", "invalid rate"), []),
    "a_400_without_retryable": (400, _error("INVALID_CITY", "unknown city Tokio"),
                                ["retryable_missing_on_4xx"]),
    "a_400_with_retryable_false": (400, _error("INVALID", "bad", retryable=False), []),
    "a_422_with_retryable_true": (422, _error("INVALID", "bad", retryable=True), []),
    "a_400_with_a_string_retryable": (400, _error("INVALID", "bad", retryable="false"),
                                      ["retryable_missing_on_4xx"]),
    "a_404_with_top_level_retryable_only": (404, _json({"success": False, "retryable": True}),
                                            ["retryable_missing_on_4xx"]),
    "a_401_is_terminal_whatever_it_declares": (401, _error("AUTH", "invalid API key"), []),
    "a_transport_failure_has_none": (0, None, []),
    "not_sent_has_none": (None, None, []),
}  # fmt: skip


@pytest.mark.parametrize(("status", "body", "codes"), CASES.values(), ids=CASES.keys())
def test_response_warnings(status: int | None, body: bytes | None, codes: list[str]) -> None:
    warnings = response_warnings(status, body)
    assert [w.code for w in warnings] == codes
    for warning in warnings:
        assert warning.code in WARNING_CODES
        assert f"HTTP {status}" in warning.message
        assert "seed" not in warning.message and "§" not in warning.message


def test_scenario_d_quotes_the_message_and_says_what_to_send() -> None:
    (_, warning) = response_warnings(503, b"location not found: Flower Mound")
    assert warning.message == (
        'HTTP 503 is transient, so the same request is resent, but the body describes an input '
        'error ("location not found: Flower Mound"): resending cannot fix it; the tool should '
        "answer 400 or 422 with error.retryable and a hint"
    )


def test_a_request_not_dispatched_has_no_warning() -> None:
    assert response_warnings(200, b"OK", dispatched=False) == ()
