"""The tool-contract checks (executor.tool_contract) on named responses from the seeds' cases."""

from __future__ import annotations

import json

import pytest

from executor.tool_contract import CHECK_IDS, Grade, grade_response


def _error(status_code: str, message: str, *, category: str | None = "INPUT_ERROR",
           retryable: object = False, hint: str | None = "Try 'City, Country'") -> bytes:
    error: dict[str, object] = {"code": status_code, "message": message}
    if category is not None:
        error["category"] = category
    if retryable is not None:
        error["retryable"] = retryable
    if hint is not None:
        error["details"] = {"hint": hint}
    return json.dumps({"success": False, "error": error}).encode()


GOOD_400 = _error("INVALID_CITY", "city not found: Tokio")
CASES = [
    # (name, status, headers, body, check, expected grade, words in the message)
    ("seed-001-good-input-error", 400, {}, GOOD_400, "envelope", Grade.PASS, "code, message"),
    ("good-input-error-hint", 400, {}, GOOD_400, "hint", Grade.PASS, "hint present"),
    ("scenario-d-503-for-input", 503, {},
     _error("NOT_FOUND", "location not found: Flower Mound", category="SERVICE_ERROR"),
     "input_error_status", Grade.FAIL, "answer 400 or 422"),
    ("writeheader-after-encode", 200, {}, _error("INVALID", "bad date"), "error_status",
     Grade.FAIL, "takes it as a success"),
    ("success-true-on-500", 500, {}, b'{"success": true, "data": {}}', "status_agrees",
     Grade.FAIL, "success:true"),
    ("no-envelope-on-error", 400, {}, b'{"detail": "bad"}', "envelope", Grade.FAIL,
     "without the error envelope"),
    ("error-without-code", 400, {}, b'{"success": false, "error": {"message": "bad"}}',
     "envelope", Grade.FAIL, "without code"),
    ("error-without-category", 400, {}, _error("BAD", "bad", category=None), "envelope",
     Grade.WARN, "without a category"),
    ("category-input-as-503", 503, {}, _error("X", "upstream", category="INPUT_ERROR"),
     "category_status", Grade.FAIL, "belongs with HTTP 400"),
    # found by an outside check: what the seeds themselves send was warned about
    ("category-service-as-502", 502, {}, _error("X", "upstream", category="SERVICE_ERROR"),
     "category_status", Grade.PASS, "ClassifyUpstreamError"),
    ("category-input-as-422", 422, {}, _error("X", "bad", category="INPUT_ERROR"),
     "category_status", Grade.PASS, "400 or 422"),
    ("category-service-as-504", 504, {}, _error("X", "slow", category="SERVICE_ERROR"),
     "category_status", Grade.WARN, "usually HTTP 503"),
    ("unknown-category", 504, {}, _error("X", "slow", category="TIMEOUT"), "category_status",
     Grade.WARN, "none of"),
    ("retryable-missing-on-400", 400, {}, _error("X", "bad", retryable=None), "retryable",
     Grade.WARN, "without error.retryable"),
    ("retryable-as-string", 400, {}, _error("X", "bad", retryable="false"), "retryable",
     Grade.FAIL, 'is "false"'),
    ("auth-as-502", 502, {}, _error("UPSTREAM", "Amadeus: invalid API key", category=None),
     "auth_status", Grade.FAIL, "answer 401 or 403"),
    ("a-json-array-on-200", 200, {}, b'[{"id": 1}]', "body_json", Grade.FAIL,
     "with a JSON array, not an object: the executor fails the step (result.not_json_object"),
    ("auth-as-401", 401, {}, _error("AUTH", "invalid API key", category="AUTH_ERROR"),
     "auth_status", Grade.PASS, "401/403"),
    # found by an outside check: naming an api_key parameter, or a key that does not exist, is
    # no authentication error; a seed-style outage passes; a password is never quoted
    ("input-error-naming-an-api-key-parameter", 400, {},
     _error("MISSING_PARAM", "api_key parameter is required for this capability"),
     "auth_status", Grade.PASS, "401/403"),
    ("a-key-that-does-not-exist", 404, {},
     _error("NOT_FOUND", "API key k-12 does not exist", category="NOT_FOUND"),
     "auth_status", Grade.PASS, "401/403"),
    ("upstream-outage-as-classify-upstream-error-words-it", 502, {},
     _error("UPSTREAM", "upstream status 500: unknown error", category="SERVICE_ERROR",
            retryable=True), "input_error_status", Grade.PASS, "no input error"),
    ("no-such-host-outage", 503, {},
     _error("DOWN", "dial tcp: lookup db: no such host", category="SERVICE_ERROR",
            retryable=True), "input_error_status", Grade.PASS, "no input error"),
    ("input-error-as-503-quoted-without-its-password", 503, {},
     _error("INVALID", "invalid parameter: password=hunter2 for bob", category="SERVICE_ERROR"),
     "input_error_status", Grade.FAIL, "password=[REDACTED]"),
    ("hint-missing-on-422", 422, {}, _error("X", "bad", hint=None), "hint", Grade.WARN,
     "without error.details.hint"),
    ("secret-in-message", 400, {},
     _error("X", "upstream rejected api_key=sk-live-4f9a8b7c6d5e4f3a2b1c"), "redacted",
     Grade.FAIL, "credential"),
    ("429-without-retry-after", 429, {}, _error("RATE", "slow down", category="RATE_LIMIT"),
     "retry_after", Grade.WARN, "without a Retry-After"),
    ("429-with-retry-after", 429, {"Retry-After": "2"},
     _error("RATE", "slow down", category="RATE_LIMIT"), "retry_after", Grade.PASS, "given"),
    ("html-error-page", 502, {}, b"<html>Bad Gateway</html>", "body_json", Grade.FAIL,
     "not JSON"),
]


@pytest.mark.parametrize(("status", "headers", "body", "check", "grade", "words"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_each_check_grades_the_named_response(status, headers, body, check, grade, words):
    findings = {finding.check: finding for finding in grade_response(status, headers, body)}
    assert check in findings, sorted(findings)
    assert findings[check].grade is grade, findings[check]
    assert words in findings[check].message


def test_a_good_success_response_passes_every_check_that_applies():
    findings = grade_response(200, {}, b'{"success": true, "data": {"temp": 21}}')
    assert findings and all(finding.grade is Grade.PASS for finding in findings)


def test_nothing_received_is_not_graded():
    assert grade_response(0, {}, b"") == []


def test_every_check_is_exercised_by_a_named_case():
    assert {case[4] for case in CASES} == set(CHECK_IDS)
