"""The seeds' best practices for tool developers as checks on one tool response.

Seed 000 §2 (error classification), §10 (best practices for tool developers), §11
(troubleshooting) and seed 001 Part 2 (the `{"success": false, "error": {...}}` envelope with
`code`, `message`, `category`, `retryable` and `details.hint`) say how a tool should answer so
the executor routes its errors correctly. `grade_response` grades one recorded (or probed)
response against each check that applies to it: `pass`, `warn` (weaker guidance: a hint, a
category, a Retry-After) or `fail` (the executor will misroute: an error sent as 200, an input
error sent as 503, a secret in the message). Pure: no I/O. Used by `truva-console lint` over
the store and by `truva-console probe` over deliberately bad requests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from executor.contract import TRANSIENT_INPUT_ERROR, quoted_message, warning_codes
from executor.params import json_type_name
from executor.redact import redact_secrets, redact_sensitive_text
from executor.wire import ErrorCategory, WireEnvelope, http_status_for_category, parse_envelope


class Grade(StrEnum):
    """How a response fares on one check; ordered pass < warn < fail."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


GRADE_ORDER = {Grade.PASS: 0, Grade.WARN: 1, Grade.FAIL: 2}

# 4xx statuses the executor never sends to a correction layer: terminal, quota, transient.
_UNCORRECTABLE_4XX = frozenset({401, 402, 403, 405, 408, 429})
_CATEGORIES = tuple(category.value for category in ErrorCategory)
# Pairs of category and status other than HTTPStatusForCategory's that the seeds themselves
# prescribe (found by an outside check: a tool that followed them could never pass).
_SEED_PAIRS = {
    ("SERVICE_ERROR", 502): "as TruvaG3's ClassifyUpstreamError sends an upstream failure",
    ("INPUT_ERROR", 422): "seed 001: a fixable input error uses 400 or 422",
}
# Phrases that say the credentials were refused: not a mention of an `api_key` parameter or of
# "authentication" in a hint (found by an outside check: a 400 INPUT_ERROR about a parameter
# named api_key failed a well-behaved tool).
_AUTH_WORDS = re.compile(
    r"\b(unauthori[sz]ed|unauthenticated|not authenticated|forbidden|access denied|"
    r"(?:invalid|expired|revoked|missing|bad|wrong) (?:api[ _-]?key|token|credentials?|"
    r"password|auth\w*)|(?:api[ _-]?key|token|credentials?) (?:is |are |was |were )?"
    r"(?:invalid|expired|revoked|missing|not valid)|authentication (?:failed|required|error))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Response:
    """What a check reads: the HTTP status, the response headers (names any case) and body."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    envelope: WireEnvelope

    @classmethod
    def of(cls, status: int, headers: Mapping[str, str] | None, body: bytes | None) -> Response:
        raw = body or b""
        return cls(status, {k.lower(): v for k, v in (headers or {}).items()}, raw,
                   parse_envelope(raw))  # fmt: skip

    @property
    def is_error(self) -> bool:
        return not 200 <= self.status < 300

    @property
    def details(self) -> Mapping[str, object]:
        details = (self.envelope.error_object or {}).get("details")
        return details if isinstance(details, dict) else {}


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's grade for one response, with the sentence a tool author needs."""

    check: str
    grade: Grade
    message: str


@dataclass(frozen=True, slots=True)
class Check:
    """A row of the check table: id, title, the seed's words, whether it applies, the grade."""

    id: str
    title: str
    source: str
    applies: Callable[[Response], bool]
    grade: Callable[[Response], tuple[Grade, str]]


def _envelope(r: Response) -> tuple[Grade, str]:
    env = r.envelope
    if not env.is_object or env.success is not False or env.error_object is None:
        return Grade.FAIL, (f"HTTP {r.status} without the error envelope "
                            '{"success": false, "error": {"code", "message", ...}}')
    missing = [name for name, value in (("code", env.error_code), ("message", env.error_message))
               if not value]  # fmt: skip
    if missing:
        return Grade.FAIL, f"error object without {' and '.join(missing)}"
    if not env.error_category:
        return Grade.WARN, "error object without a category (INPUT_ERROR, NOT_FOUND, ...)"
    return Grade.PASS, "envelope with code, message and category"


def _error_status(r: Response) -> tuple[Grade, str]:
    if r.envelope.success is False:
        return Grade.FAIL, (f"HTTP {r.status} with success:false: the executor takes it as a "
                            "success; set the error status before writing the body")
    return Grade.PASS, "no error body on a 2xx"


def _status_agrees(r: Response) -> tuple[Grade, str]:
    if r.envelope.success is True:
        return Grade.FAIL, f"HTTP {r.status} but the body says success:true"
    return Grade.PASS, "status and body agree"


def _category_status(r: Response) -> tuple[Grade, str]:
    category = (r.envelope.error_category or "").upper()
    if category not in _CATEGORIES:
        return Grade.WARN, (f"category {r.envelope.error_category} is none of "
                            f"{', '.join(_CATEGORIES)}: tools and dashboards cannot group it")
    expected = http_status_for_category(category)
    if r.status == expected:
        return Grade.PASS, f"{category} sent as {expected}"
    seed_pair = _SEED_PAIRS.get((category, r.status))
    if seed_pair is not None:  # the seeds send it so themselves: no warning for following them
        return Grade.PASS, f"{category} sent as {r.status} ({seed_pair})"
    if r.status // 100 != expected // 100:
        return Grade.FAIL, (f"category {category} belongs with HTTP {expected}, sent as "
                            f"{r.status}: the executor routes by the status")
    return Grade.WARN, f"category {category} is usually HTTP {expected}, sent as {r.status}"


def _retryable(r: Response) -> tuple[Grade, str]:
    error = r.envelope.error_object or {}
    if "retryable" not in error:
        if 400 <= r.status < 500 and r.status not in _UNCORRECTABLE_4XX:
            return Grade.WARN, (f"HTTP {r.status} without error.retryable: the executor cannot "
                                "tell whether a corrected request may be retried")
        return Grade.PASS, "retryable omitted where the status decides"
    if not isinstance(error["retryable"], bool):
        return Grade.FAIL, (f"error.retryable is {json.dumps(error['retryable'])}, not true "
                            "or false: the executor reads it as unspecified")
    return Grade.PASS, f"retryable {json.dumps(error['retryable'])}"


def _input_error_status(r: Response) -> tuple[Grade, str]:
    if TRANSIENT_INPUT_ERROR in warning_codes(r.status, r.body):
        return Grade.FAIL, (f"HTTP {r.status} for an input error "
                            f"({quoted_message(r.envelope.error_text)}): the same request is "
                            "resent and cannot succeed; answer 400 or 422")
    return Grade.PASS, "no input error sent as transient"


def _says_auth(r: Response) -> bool:
    """AUTH_ERROR, or a message that says the credentials were refused (an upstream's
    "invalid API key" relayed as a 502 SERVICE_ERROR is one)."""
    category = (r.envelope.error_category or "").upper()
    return category == ErrorCategory.AUTH_ERROR or bool(
        _AUTH_WORDS.search(r.envelope.error_text or "")
    )


def _auth_status(r: Response) -> tuple[Grade, str]:
    if _says_auth(r) and r.status not in (401, 403):
        return Grade.FAIL, (f"an authentication error sent as HTTP {r.status}: the executor "
                            "routes it by that status, not as refused credentials (it may "
                            "resend it or ask an LLM to correct it); answer 401 or 403 so it "
                            "stops at once")
    return Grade.PASS, "authentication errors sent as 401/403"


def _hint(r: Response) -> tuple[Grade, str]:
    hint = r.details.get("hint")
    if isinstance(hint, str) and hint.strip():
        return Grade.PASS, "details.hint present"
    return Grade.WARN, (f"HTTP {r.status} without error.details.hint: a correction layer has "
                        "only the message to go on")


def _redacted(r: Response) -> tuple[Grade, str]:
    text = r.envelope.error_message or r.envelope.error_text or ""
    if redact_sensitive_text(text) != text or redact_secrets(text) != text:
        return Grade.FAIL, ("the error message holds what looks like a credential; redact "
                            "it in the tool (core.RedactSensitiveText)")
    return Grade.PASS, "no credential in the message"


def _retry_after(r: Response) -> tuple[Grade, str]:
    if "retry-after" in r.headers or r.envelope.retry_after_detail_ms is not None:
        return Grade.PASS, "Retry-After given"
    return Grade.WARN, ("HTTP 429 without a Retry-After header or error.details.retry_after: "
                        "the executor falls back to its own backoff")


def _body_json(r: Response) -> tuple[Grade, str]:
    if r.body and not r.envelope.is_json:
        return Grade.FAIL, (f"HTTP {r.status} with a body that is not JSON ({len(r.body)} "
                            "bytes): success, error and retryable cannot be read")
    if not r.is_error and not r.envelope.is_object:  # found by an outside check: it passed
        kind = json_type_name(r.envelope.json_value)
        return Grade.FAIL, (f"HTTP {r.status} with a JSON {kind}, not an object: the executor "
                            "fails the step (result.not_json_object, seed 003); answer "
                            '{"success": true, "data": …}')
    return Grade.PASS, "JSON body"


def _is_error(r: Response) -> bool:
    return r.is_error


def _correctable(r: Response) -> bool:
    return 400 <= r.status < 500 and r.status not in _UNCORRECTABLE_4XX


CHECKS: tuple[Check, ...] = (
    Check("body_json", "JSON bodies", "seed 001 Part 2", lambda r: bool(r.body), _body_json),
    Check("envelope", "error envelope (success, error.code, .message, .category)",
          "seed 001 Part 2", _is_error, _envelope),
    Check("error_status", "no 2xx with success:false (WriteHeader before Encode)",
          "seed 000 §10.4, §11", lambda r: not r.is_error, _error_status),
    Check("status_agrees", "no success:true on an error status", "seed 000 §2",
          _is_error, _status_agrees),
    Check("category_status", "category agrees with the status (HTTPStatusForCategory)",
          "seed 000 §2", lambda r: r.is_error and bool(r.envelope.error_category),
          _category_status),
    Check("retryable", "error.retryable present and boolean", "seed 001 Part 2",
          _is_error, _retryable),
    Check("input_error_status", "input errors as 4xx, not 5xx (Scenario D)",
          "seed 000 §8 Scenario D, §11",
          # an authentication error ("invalid API key") is auth_status's: 401/403, not 400
          lambda r: r.status >= 500 and not _says_auth(r), _input_error_status),
    Check("auth_status", "authentication errors as 401/403, not 5xx", "seed 000 §8, §11",
          _is_error, _auth_status),
    Check("hint", "actionable details.hint on correctable errors", "seed 001 Part 2",
          _correctable, _hint),
    Check("redacted", "no credentials in error messages (RedactSensitiveText)",
          "seed 000 §2, §10.1", _is_error, _redacted),
    Check("retry_after", "Retry-After on 429", "seed 000 §7", lambda r: r.status == 429,
          _retry_after),
)
CHECK_IDS = tuple(check.id for check in CHECKS)


def grade_response(
    status: int,
    headers: Mapping[str, str] | None,
    body: bytes | None,
    checks: Iterable[Check] = CHECKS,
) -> list[Finding]:
    """Every applicable check's finding for one response (a status of 0 has none); `checks`
    is the table (`probe` adds its own rows to `CHECKS`)."""
    if not status:
        return []
    response = Response.of(status, headers, body)
    findings = []
    for check in checks:
        if check.applies(response):
            grade, message = check.grade(response)
            findings.append(Finding(check.id, grade, message))
    return findings
