"""Header maps and decoded JSON values with their credentials redacted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from executor.redact.names import is_secretish_name, is_sensitive_name
from executor.redact.patterns import REDACTED
from executor.redact.shapes import looks_random
from executor.redact.text import redact_secrets


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers with credential-bearing values replaced by `[REDACTED]` and the rest redacted.

    Authorization, Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key, Api-Key and any header
    whose name `is_sensitive_name` lose their value entirely, and so does a random-looking
    value under a secret-ish name (`X-Session: 9f…`); other values go through `redact_secrets`.
    """
    return {name: _redact_named_text(name, value) for name, value in headers.items()}


def _redact_named_text(name: str, value: str) -> str:
    if is_sensitive_name(name):
        return REDACTED
    if is_secretish_name(name) and looks_random(value):
        return REDACTED
    return redact_secrets(value)


def redact_json_value(value: Any) -> Any:
    """A copy of a decoded JSON value with credentials removed.

    Non-null values under a sensitive key (`is_sensitive_name`) become `"[REDACTED]"`, and so
    do random-looking strings under a secret-ish key (`is_secretish_name`); every other string
    goes through `redact_secrets`; containers are walked.
    """
    if isinstance(value, dict):
        return {key: _redact_json_item(key, item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json_value(item) for item in value]
    if isinstance(value, str):
        return redact_secrets(value)
    return value


def _redact_json_item(key: Any, item: Any) -> Any:
    if isinstance(key, str) and item is not None:
        if is_sensitive_name(key):
            return REDACTED
        if isinstance(item, str) and is_secretish_name(key) and looks_random(item):
            return REDACTED
    return redact_json_value(item)
