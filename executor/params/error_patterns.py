"""The legacy layer-3 trigger (reference §2.6, Go `isTypeRelatedError`): error-text patterns."""

from __future__ import annotations

TYPE_ERROR_PATTERNS = (
    "cannot unmarshal string into",
    "cannot unmarshal number into",
    "cannot unmarshal bool into",
    "json: cannot unmarshal",
    "type mismatch",
    "invalid type",
    "expected number",
    "expected string",
    "expected boolean",
    "expected integer",
    "expected float",
    "invalid value",
)

VALIDATION_ERROR_PATTERNS = (
    "must be greater than",
    "must be less than",
    "must be positive",
    "must be non-negative",
    "must be at least",
    "must be at most",
    "is required",
    "missing required",
    "cannot be empty",
    "cannot be zero",
    "cannot be null",
    "cannot be negative",
    "invalid format",
    "out of range",
    "invalid_request",
    "bad request",
    "validation failed",
    "constraint violation",
)


def match_type_related_error(error_text: str, response_body: str) -> str | None:
    """The first type or validation pattern found in `lower(error_text + " " + response_body)`."""
    haystack = f"{error_text} {response_body}".lower()
    for pattern in (*TYPE_ERROR_PATTERNS, *VALIDATION_ERROR_PATTERNS):
        if pattern in haystack:
            return pattern
    return None
