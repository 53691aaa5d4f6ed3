"""Tool-contract warnings: what a recorded response says that a well-behaved tool would not.

Pure functions of an attempt's HTTP status and response body, shared by the console (badges,
the `warn:` filter, `ls --warning`) and usable by a linter. The wording is for tool authors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from executor.redact import redact_secrets, redact_sensitive_text
from executor.wire import (
    RetryPolicy,
    is_success_status,
    is_transient_status,
    parse_envelope,
)

SUCCESS_FALSE_ON_2XX = "success_false_on_2xx"
SUCCESS_TRUE_ON_ERROR = "success_true_on_error"
BODY_NOT_JSON = "body_not_json"
TRANSIENT_INPUT_ERROR = "transient_input_error"
RETRYABLE_MISSING_ON_4XX = "retryable_missing_on_4xx"

# Every warning code with a short label (the `warn:` filter takes either the code or `any`).
WARNING_CODES: dict[str, str] = {
    SUCCESS_FALSE_ON_2XX: "2xx with success:false",
    SUCCESS_TRUE_ON_ERROR: "success:true on an error status",
    BODY_NOT_JSON: "body is not JSON",
    TRANSIENT_INPUT_ERROR: "transient status for an input error",
    RETRYABLE_MISSING_ON_4XX: "4xx without error.retryable",
}

# Words of an error message that describe the request's input, not the service's health.
_INPUT_ERROR = re.compile(
    r"\b(not found|invalid|unknown|missing|required|malformed|must be|unrecognized|"
    r"validation|bad request|no such|does not exist)\b",
    re.IGNORECASE,
)
# An outage in words that would otherwise read as an input error ("unknown error", "no such
# host", "must be retried later", "required dependency … is down", "invalid response").
_OUTAGE = re.compile(
    r"\b(unknown (?:error|exception|failure)|no such host|must be retried|"
    r"required (?:service|dependency|backend)|invalid (?:response|reply|answer) from|"
    r"upstream status 5\d\d|temporarily|unavailable|timed? ?out|overloaded)\b",
    re.IGNORECASE,
)
_INPUT_CATEGORIES = frozenset({"INPUT_ERROR", "VALIDATION", "VALIDATION_ERROR", "NOT_FOUND"})
_QUOTED_LIMIT = 80
# 4xx statuses the executor never corrects (terminal, quota, transient): retryable is moot there.
_NOT_CORRECTABLE_4XX = frozenset({401, 402, 403, 405, 408, 429})


@dataclass(frozen=True, slots=True)
class ContractWarning:
    """One warning: a stable `code` (a key of WARNING_CODES) and a sentence for the tool author."""

    code: str
    message: str


def quoted_message(text: str) -> str:
    """A tool's error message as a warning or a lint card quotes it: credentials redacted (the
    message is the tool's, and may hold a password), cut at `_QUOTED_LIMIT` characters."""
    text = redact_sensitive_text(redact_secrets(text))
    text = text if len(text) <= _QUOTED_LIMIT else text[: _QUOTED_LIMIT - 1] + "…"
    return f'"{text}"'


def response_warnings(
    status: int | None, body: bytes | None, *, dispatched: bool = True
) -> tuple[ContractWarning, ...]:
    """The contract warnings of one response: `status` 0 or None (nothing received) has none."""
    if not dispatched or not status:
        return ()
    envelope = parse_envelope(body)
    warnings: list[ContractWarning] = []
    success = is_success_status(status)
    if body and not envelope.is_json:
        warnings.append(ContractWarning(BODY_NOT_JSON, (
            f"HTTP {status} came with a body that is not JSON ({len(body)} bytes): the executor "
            "cannot read success, error or retryable from it; send a JSON object"
        )))  # fmt: skip
    if success and envelope.success is False:
        warnings.append(ContractWarning(SUCCESS_FALSE_ON_2XX, (
            f"HTTP {status} but the body says success:false: the error was treated as a "
            "success; the tool should set an error status before writing the body"
        )))  # fmt: skip
    if not success and envelope.success is True:
        warnings.append(ContractWarning(SUCCESS_TRUE_ON_ERROR, (
            f"HTTP {status} but the body says success:true: status and body disagree; the "
            "executor follows the status"
        )))  # fmt: skip
    if status not in (408, 429) and is_transient_status(status) and _describes_input(envelope):
        warnings.append(ContractWarning(TRANSIENT_INPUT_ERROR, (
            f"HTTP {status} is transient, so the same request is resent, but the body describes "
            f"an input error ({quoted_message(envelope.error_text)}): resending cannot fix it; the "
            "tool should answer 400 or 422 with error.retryable and a hint"
        )))  # fmt: skip
    if (400 <= status < 500 and status not in _NOT_CORRECTABLE_4XX and envelope.is_json
            and envelope.retry_policy is RetryPolicy.UNSPECIFIED):  # fmt: skip
        warnings.append(ContractWarning(RETRYABLE_MISSING_ON_4XX, (
            f"HTTP {status} without error.retryable true or false in "
            '{"success": false, "error": {…}}: the executor cannot tell whether a corrected '
            "request may be retried"
        )))  # fmt: skip
    return tuple(warnings)


def _describes_input(envelope) -> bool:
    """Whether a transient answer's body describes an input error: an input category, else not
    when the message names an outage ("upstream status 500: unknown error", as TruvaG3's
    ClassifyUpstreamError words one, found by an outside check to fail a tool that followed
    the seeds); else its code or the words of its message ("location not found" sent as a 503,
    whatever its retryable says: that is the misclassification)."""
    if envelope.error_category and envelope.error_category.upper() in _INPUT_CATEGORIES:
        return True
    if envelope.error_text and _OUTAGE.search(envelope.error_text):
        return False
    code = envelope.error_code or ""
    if code.upper().startswith(("INVALID", "MISSING", "UNKNOWN", "NOT_FOUND")):
        return True
    return bool(envelope.error_text and _INPUT_ERROR.search(envelope.error_text))


def warning_codes(status: int | None, body: bytes | None, *, dispatched: bool = True) -> set[str]:
    """Just the codes of `response_warnings`."""
    return {w.code for w in response_warnings(status, body, dispatched=dispatched)}
