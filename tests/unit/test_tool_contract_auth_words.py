"""An authentication error on a 5xx is graded by auth_status alone.

"invalid API key" holds the input-error word "invalid", so a 502 saying it also failed
input_error_status with "answer 400 or 422", beside auth_status's "answer 401 or 403": two
contradicting fixes for one response.
"""

from __future__ import annotations

import json

import pytest

from executor.tool_contract import Grade, grade_response


def _body(code: str, message: str, category: str | None) -> bytes:
    error = {"code": code, "message": message, "retryable": True}
    if category:
        error["category"] = category
    return json.dumps({"success": False, "error": error}).encode()


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (502, _body("UPSTREAM", "upstream said: invalid API key", "SERVICE_ERROR")),
        (503, _body("AUTH", "invalid token for this account", "AUTH_ERROR")),
        (500, _body("INVALID_CREDENTIALS", "invalid credentials", None)),
    ],
    ids=["502-invalid-api-key", "503-auth-category", "500-invalid-credentials"],
)
def test_an_auth_error_on_5xx_gets_only_the_401_403_advice(status, body):
    findings = {f.check: f for f in grade_response(status, {}, body)}
    assert findings["auth_status"].grade is Grade.FAIL
    assert "answer 401 or 403" in findings["auth_status"].message
    assert "input_error_status" not in findings
    assert not any("answer 400 or 422" in f.message for f in findings.values())


def test_an_input_error_on_5xx_still_fails_input_error_status():
    body = _body("UNAVAILABLE", "missing required field item", "SERVICE_ERROR")
    findings = {f.check: f for f in grade_response(503, {}, body)}
    assert findings["input_error_status"].grade is Grade.FAIL
    assert findings["auth_status"].grade is Grade.PASS
