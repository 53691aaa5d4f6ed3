"""The tool wire protocol: envelope types, upstream-error classification, retry-policy parsing."""

from __future__ import annotations

import json
import math
import re
import sys
import time
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

from executor import gojson
from executor.durations import NANOSECONDS_PER_MILLISECOND, parse_go_duration


class ErrorCategory(StrEnum):
    """The five error categories a tool may report; values are the wire strings."""

    INPUT_ERROR = "INPUT_ERROR"
    NOT_FOUND = "NOT_FOUND"
    RATE_LIMIT = "RATE_LIMIT"
    AUTH_ERROR = "AUTH_ERROR"
    SERVICE_ERROR = "SERVICE_ERROR"


_STATUS_FOR_CATEGORY: dict[str, int] = {
    ErrorCategory.INPUT_ERROR: 400,
    ErrorCategory.NOT_FOUND: 404,
    ErrorCategory.AUTH_ERROR: 401,
    ErrorCategory.RATE_LIMIT: 429,
    ErrorCategory.SERVICE_ERROR: 503,
}


def http_status_for_category(category: str) -> int:
    """HTTP status a tool should send for `category`: 400/404/401/429/503, anything else 500."""
    return _STATUS_FOR_CATEGORY.get(category, 500)


@dataclass(frozen=True, slots=True)
class ToolError:
    """The `error` object of a tool response (Go `core.ToolError`)."""

    code: str
    message: str
    category: str = ""
    retryable: bool = False
    details: dict[str, str] | None = None

    def error_text(self) -> str:
        """`[<code>] <message>`, as Go's `ToolError.Error()`."""
        return f"[{self.code}] {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON object in Go field order; `details` omitted when None or empty."""
        encoded: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "category": str(self.category),
            "retryable": self.retryable,
        }
        if self.details:
            encoded["details"] = dict(self.details)
        return encoded


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """The standard tool response envelope (Go `core.ToolResponse`)."""

    success: bool
    data: Any = None
    error: ToolError | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON object like Go's omitempty: `data` and `error` omitted when None."""
        encoded: dict[str, Any] = {"success": self.success}
        if self.data is not None:
            encoded["data"] = self.data
        if self.error is not None:
            encoded["error"] = self.error.to_dict()
        return encoded

    def to_json(self) -> bytes:
        """Compact UTF-8 JSON of `to_dict()`."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, body: bytes | str) -> ToolResponse | None:
        """Decode an envelope leniently; None unless the body is an object with a bool `success`.

        A string `error` becomes a ToolError with that message; non-string error fields become "",
        `retryable` is true only for JSON true, and non-string detail values are JSON-encoded.
        """
        decoded = _decode_json(body)
        if decoded is _NOT_JSON or not isinstance(decoded, dict):
            return None
        success = decoded.get("success")
        if not isinstance(success, bool):
            return None
        raw_error = decoded.get("error")
        tool_error: ToolError | None = None
        if isinstance(raw_error, dict):
            tool_error = _tool_error_from_object(raw_error)
        elif isinstance(raw_error, str):
            tool_error = ToolError(code="", message=raw_error)
        return cls(success=success, data=decoded.get("data"), error=tool_error)


def _tool_error_from_object(raw_error: dict[str, Any]) -> ToolError:
    """Build a ToolError from a decoded `error` object, keeping only well-typed fields."""
    raw_details = raw_error.get("details")
    details: dict[str, str] | None = None
    if isinstance(raw_details, dict) and raw_details:
        details = {
            str(key): value if isinstance(value, str) else json.dumps(value)
            for key, value in raw_details.items()
        }
    return ToolError(
        code=_string_or_empty(raw_error.get("code")),
        message=_string_or_empty(raw_error.get("message")),
        category=_string_or_empty(raw_error.get("category")),
        retryable=raw_error.get("retryable") is True,
        details=details,
    )


def _string_or_empty(value: Any) -> str:
    return value if isinstance(value, str) else ""


# ---------------------------------------------------------------------------------------------
# Upstream error classification (Go core.ClassifyUpstreamError)
# ---------------------------------------------------------------------------------------------

# Go RE2: `\s` is [\t\n\f\r ] (no \v) and `\d` is ASCII; case-sensitive; leftmost match wins.
_UPSTREAM_STATUS_PATTERN = re.compile(r"(?:status|error|code)[:\t\n\f\r ]+([0-9]{3})", re.ASCII)


@dataclass(frozen=True, slots=True)
class UpstreamErrorInfo:
    """How a tool should answer an upstream failure: HTTP status, category, retryable, code."""

    http_status: int
    category: ErrorCategory
    retryable: bool
    code: str


_SERVICE_ERROR_INFO = UpstreamErrorInfo(502, ErrorCategory.SERVICE_ERROR, True, "SERVICE_ERROR")
_INPUT_ERROR_INFO = UpstreamErrorInfo(400, ErrorCategory.INPUT_ERROR, False, "API_ERROR")
_UPSTREAM_INFO_BY_STATUS: dict[int, UpstreamErrorInfo] = {
    400: _INPUT_ERROR_INFO,
    404: _INPUT_ERROR_INFO,
    409: _INPUT_ERROR_INFO,
    422: _INPUT_ERROR_INFO,
    401: UpstreamErrorInfo(401, ErrorCategory.AUTH_ERROR, False, "AUTH_ERROR"),
    403: UpstreamErrorInfo(403, ErrorCategory.AUTH_ERROR, False, "AUTH_ERROR"),
    429: UpstreamErrorInfo(429, ErrorCategory.RATE_LIMIT, True, "RATE_LIMIT"),
}


def classify_upstream_error(err_text: str | None) -> UpstreamErrorInfo:
    """Classify an upstream error message by the first `status|error|code NNN` in it.

    400/404/409/422 → 400 INPUT_ERROR not retryable `API_ERROR`; 401 and 403 → themselves,
    AUTH_ERROR not retryable; 429 → 429 RATE_LIMIT retryable; 5xx, any other code, no match
    and None → 502 SERVICE_ERROR retryable (reference notes §1.4).
    """
    if err_text is None:
        return _SERVICE_ERROR_INFO
    match = _UPSTREAM_STATUS_PATTERN.search(err_text)
    if match is None:
        return _SERVICE_ERROR_INFO
    return _UPSTREAM_INFO_BY_STATUS.get(int(match.group(1)), _SERVICE_ERROR_INFO)


# ---------------------------------------------------------------------------------------------
# Retry policy on the wire and envelope parsing
# ---------------------------------------------------------------------------------------------


class RetryPolicy(StrEnum):
    """What a response body declares about same-step retries."""

    EXPLICIT_TRUE = "explicit_true"
    EXPLICIT_FALSE = "explicit_false"
    UNSPECIFIED = "unspecified"


class _NotJson:
    """Marker for a body that is not valid UTF-8 JSON (distinct from JSON null)."""


_NOT_JSON = _NotJson()


def _reject_non_standard_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _decode_int(literal: str) -> int | float:
    """A JSON integer; beyond Python's 4300-digit limit it is read as Go reads it, a float64."""
    try:
        return int(literal)
    except ValueError:
        return float(literal)


def _decode_json(body: bytes | str | None) -> Any:
    """Decode a JSON body as Go does (`executor.gojson`: bad UTF-8 and lone surrogates in strings
    are U+FFFD) but with no NaN/Infinity; `_NOT_JSON` when it is not JSON.

    Nesting deeper than the interpreter's recursion limit (about 990 levels) counts as not JSON.
    """
    if body is None:
        return _NOT_JSON
    try:
        return gojson.loads(
            body, parse_constant=_reject_non_standard_constant, parse_int=_decode_int
        )
    except (UnicodeDecodeError, ValueError, RecursionError):
        return _NOT_JSON


def _retry_policy_of(decoded: Any) -> RetryPolicy:
    """seed 000 §12: only `error.retryable` in `{"success": false, "error": {...}}` counts."""
    if not isinstance(decoded, dict) or decoded.get("success") is not False:
        return RetryPolicy.UNSPECIFIED
    error_object = decoded.get("error")
    if not isinstance(error_object, dict):
        return RetryPolicy.UNSPECIFIED
    retryable = error_object.get("retryable")
    if retryable is True:
        return RetryPolicy.EXPLICIT_TRUE
    if retryable is False:
        return RetryPolicy.EXPLICIT_FALSE
    return RetryPolicy.UNSPECIFIED


def parse_retry_policy(body: bytes | str | None) -> RetryPolicy:
    """The retry policy a response body declares (seed 000 §12, SPEC §2.1).

    `error.retryable` counts only when the body is a JSON object whose `success` is JSON false
    and whose `error` is an object, and only a JSON boolean counts. Everything else is
    UNSPECIFIED, which is not the same as false: an omitted, null, string or numeric
    `retryable`, a top-level `retryable`, a string `error`, a missing or non-false `success`,
    a non-object body, invalid UTF-8 and non-JSON.

    Keys match exactly (case-sensitive): `Retryable` or `Success` declare nothing. Go's struct
    decoding matched keys case-insensitively; the seeds define the wire keys for tools in any
    language, so this port reads only the documented spelling.
    """
    return _retry_policy_of(_decode_json(body))


@dataclass(frozen=True, slots=True)
class WireEnvelope:
    """What a response body says, read leniently; every field is None/False when absent.

    `success` is set only for a JSON boolean; `error_object` only when `error` is an object;
    the `error_*` strings only when those fields are strings; `retry_policy` follows
    `parse_retry_policy`; `error_text` is one readable line for people, not for parsing.
    """

    is_json: bool
    json_value: Any
    is_object: bool
    success: bool | None
    error_object: dict[str, Any] | None
    error_code: str | None
    error_message: str | None
    error_category: str | None
    retry_policy: RetryPolicy
    retry_after_detail_ms: float | None
    error_text: str


_LINE_BREAKS = re.compile(r"[\r\n]+")


def _one_line(text: str) -> str:
    """Each run of line breaks, with the blanks and tabs around it, becomes one space (linear)."""
    lines = _LINE_BREAKS.split(text)
    if len(lines) == 1:
        return text.strip()
    first, *middle, last = lines
    pieces = [first.rstrip(" \t"), *(line.strip(" \t") for line in middle), last.lstrip(" \t")]
    return " ".join(pieces).strip()


def parse_envelope(body: bytes | str | None) -> WireEnvelope:
    """Read a tool response body into a `WireEnvelope` (never raises)."""
    decoded = _decode_json(body)
    is_json = decoded is not _NOT_JSON
    json_value = decoded if is_json else None
    is_object = isinstance(json_value, dict)
    success: bool | None = None
    error_object: dict[str, Any] | None = None
    error_string: str | None = None
    if isinstance(json_value, dict):
        raw_success = json_value.get("success")
        success = raw_success if isinstance(raw_success, bool) else None
        raw_error = json_value.get("error")
        if isinstance(raw_error, dict):
            error_object = raw_error
        elif isinstance(raw_error, str):
            error_string = raw_error
    error_code = error_message = error_category = None
    retry_after_detail_ms = None
    if error_object is not None:
        error_code = _string_or_none(error_object.get("code"))
        error_message = _string_or_none(error_object.get("message"))
        error_category = _string_or_none(error_object.get("category"))
        details = error_object.get("details")
        if isinstance(details, dict):
            retry_after_detail_ms = parse_retry_after_detail(details.get("retry_after"))
    if error_message:
        error_text = _one_line(error_message)
    elif error_string:
        error_text = _one_line(error_string)
    else:
        error_text = _one_line(_body_text(body))
    return WireEnvelope(
        is_json=is_json,
        json_value=json_value,
        is_object=is_object,
        success=success,
        error_object=error_object,
        error_code=error_code,
        error_message=error_message,
        error_category=error_category,
        retry_policy=_retry_policy_of(decoded),
        retry_after_detail_ms=retry_after_detail_ms,
        error_text=error_text,
    )


def _string_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _body_text(body: bytes | str | None) -> str:
    if body is None:
        return ""
    if isinstance(body, bytes | bytearray):
        return bytes(body).decode("utf-8", errors="replace")
    return body


# ---------------------------------------------------------------------------------------------
# Retry-After
# ---------------------------------------------------------------------------------------------

_DECIMAL_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+", re.ASCII)


# A requested wait too long for a float in milliseconds (over ~1.8e305 s, or a number beyond
# float range) is read as the longest a float holds: longer than any `retry_after_max_ms`, so it
# stops the step like any wait over the cap, instead of being ignored (which resent after the
# computed backoff: the longer the wait asked for, the sooner the resend).
LONGEST_WAIT_MS = sys.float_info.max


def _seconds_to_ms(text: str) -> float | None:
    """Non-negative decimal seconds (`2`, `1.5`) in ms; None for anything else."""
    if not _DECIMAL_SECONDS.fullmatch(text):
        return None
    milliseconds = float(text) * 1000.0
    return milliseconds if math.isfinite(milliseconds) else LONGEST_WAIT_MS


def parse_retry_after_detail(value: Any) -> float | None:
    """`error.details.retry_after` in ms, or None when absent or unreadable.

    Accepts a Go duration string (`60s`, `1.5s`, `500ms`), a plain number string meaning
    seconds (`2`, `1.5`), or a JSON number meaning seconds. Negative values are unreadable; a
    wait too long for a float (as for the header) is `LONGEST_WAIT_MS`.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        if value < 0 or (isinstance(value, float) and math.isnan(value)):
            return None
        try:
            milliseconds = float(value) * 1000.0
        except OverflowError:  # an integer beyond float range
            return LONGEST_WAIT_MS
        return milliseconds if math.isfinite(milliseconds) else LONGEST_WAIT_MS
    if not isinstance(value, str):
        return None
    text = value.strip()
    seconds_ms = _seconds_to_ms(text)
    if seconds_ms is not None:
        return seconds_ms
    try:
        duration_ns = parse_go_duration(text)
    except ValueError:
        return None
    if duration_ns < 0:
        return None
    return duration_ns / NANOSECONDS_PER_MILLISECOND


def parse_retry_after_header(value: str | None, now: float | None = None) -> float | None:
    """A `Retry-After` header in ms: delta-seconds (integer or decimal) or an HTTP-date.

    A date is measured from `now` (epoch seconds, default the current time); a past date gives 0.
    Anything unreadable, including a negative number, gives None.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    seconds_ms = _seconds_to_ms(text)
    if seconds_ms is not None:
        return seconds_ms
    try:
        retry_at = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if retry_at.tzinfo is None:
        # RFC 9110 dates are GMT; email.utils leaves "-0000" zones naive.
        retry_at = retry_at.replace(tzinfo=UTC)
    reference_time = time.time() if now is None else now
    return max(0.0, (retry_at.timestamp() - reference_time) * 1000.0)


# ---------------------------------------------------------------------------------------------
# Status classes used by routing
# ---------------------------------------------------------------------------------------------

TERMINAL_STATUSES = frozenset({401, 403, 405})


def is_transient_status(status: int) -> bool:
    """seed 000 §3: transport failure (0), 408, 429 and every 5xx are retried unchanged."""
    return status in (0, 408, 429) or 500 <= status <= 599


def is_terminal_status(status: int) -> bool:
    """seed 000 §12: 401, 403 and 405 stop the step before any correction layer."""
    return status in TERMINAL_STATUSES


def is_success_status(status: int) -> bool:
    """A 2xx status."""
    return 200 <= status <= 299
