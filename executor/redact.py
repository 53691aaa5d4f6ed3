"""Credential redaction for text, headers and JSON values (Go `core.RedactSensitiveText`)."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

# Go RE2 `\s` is [\t\n\f\r ]: Python's would also take \v.
_WS = r"[\t\n\f\r ]"
_BARE_VALUE_STOP = r"\t\n\f\r ,;}&\]\"'\\"
_NOT_ALREADY_REDACTED = r"(?!\[REDACTED\])"

# Go sensitiveValueNamePattern (N) and unquotedSensitiveNamePattern (U: N without authorization).
_NAMES = (
    r"(?:api[_-]?key|apikey|appid|access[_-]?token|refresh[_-]?token|auth[_-]?token|"
    r"authorization|client[_-]?secret|secret[_-]?(?:key|token)|password|passwd)"
)
_UNQUOTED_NAMES = (
    r"(?:api[_-]?key|apikey|appid|access[_-]?token|refresh[_-]?token|auth[_-]?token|"
    r"client[_-]?secret|secret[_-]?(?:key|token)|password|passwd)"
)
_FLAGS = re.IGNORECASE | re.ASCII

# Every text pattern and sensitive JSON key needs one of these words; text without any is kept.
_SENSITIVE_HINT = re.compile(
    r"key|appid|token|authorization|secret|passw|passphrase|cookie|credential|bearer|basic|://",
    _FLAGS,
)

_TEXT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # 1. JSON double-quoted key: "api_key": "value" (escape-aware value).
    (
        re.compile(rf'("{_NAMES}"{_WS}*:{_WS}*")((?:[^"\\]|\\.)*)(")', _FLAGS),
        rf"\g<1>{REDACTED}\g<3>",
    ),
    # 2. Single-quoted key: 'api_key': 'value'.
    (
        re.compile(rf"('{_NAMES}'{_WS}*:{_WS}*')([^'\"\\]*)(')", _FLAGS),
        rf"\g<1>{REDACTED}\g<3>",
    ),
    # 3. Authorization assignment: the whole value, Bearer/Basic word included.
    (
        re.compile(
            rf"(\bauthorization\b{_WS}*[=:]{_WS}*){_NOT_ALREADY_REDACTED}"
            rf"(?:\"(?:[^\"\\]|\\.)*\"|'[^'\"\\]*'|(?:bearer|basic){_WS}+[^{_BARE_VALUE_STOP}]+"
            rf"|[^{_BARE_VALUE_STOP}]+)",
            _FLAGS,
        ),
        rf"\g<1>{REDACTED}",
    ),
    # 4. Unquoted name, double-quoted value: password="value".
    (
        re.compile(rf'(\b{_UNQUOTED_NAMES}\b{_WS}*[=:]{_WS}*")((?:[^"\\]|\\.)*)(")', _FLAGS),
        rf"\g<1>{REDACTED}\g<3>",
    ),
    # 5. Unquoted name, single-quoted value: password='value'.
    (
        re.compile(rf"(\b{_UNQUOTED_NAMES}\b{_WS}*[=:]{_WS}*')([^'\"\\]*)(')", _FLAGS),
        rf"\g<1>{REDACTED}\g<3>",
    ),
    # 6. Unquoted name, bare value: api_key=value.
    (
        re.compile(
            rf"(\b{_UNQUOTED_NAMES}\b{_WS}*[=:]{_WS}*){_NOT_ALREADY_REDACTED}"
            rf"([^{_BARE_VALUE_STOP}]+)",
            _FLAGS,
        ),
        rf"\g<1>{REDACTED}",
    ),
    # 7. URL query parameter; plain `key` and `token` count only here.
    (
        re.compile(rf"([?&](?:{_NAMES}|key|token)=)([^&#\t\n\f\r \"'\\]*)", _FLAGS),
        rf"\g<1>{REDACTED}",
    ),
    # 8. Standalone bearer/basic credential; the word keeps its casing.
    (
        re.compile(rf"(\b(?:bearer|basic){_WS}+)([A-Za-z0-9._~+/=-]+)", _FLAGS),
        rf"\g<1>{REDACTED}",
    ),
    # 9. URL userinfo: scheme://user:password@host.
    (
        re.compile(r"([a-z][a-z0-9+.-]*://)([^/@\t\n\f\r \"\\]+)@", _FLAGS),
        rf"\g<1>{REDACTED}@",
    ),
)


def redact_sensitive_text(value: str) -> str:
    """Replace credential values in `value` with `[REDACTED]`; empty in, empty out.

    Text goes through the nine ordered patterns of reference notes §1.5 with Go's name sets,
    hardened in three ways where Go's output would not be usable:
    - a JSON object or array is redacted token by token (values of sensitive keys, and every
      string through the patterns), so it stays valid JSON with its formatting kept, including
      JSON nested in escaped strings;
    - bare and single-quoted values never consume `"` or `\\`, so a fragment cannot swallow
      the end of a JSON string it sits in;
    - a value that is already `[REDACTED]` is left alone, so redacting twice equals once.
    """
    if not value or not _SENSITIVE_HINT.search(value):
        return value
    stripped = value.lstrip()
    if stripped[:1] in ("{", "["):
        redacted_json = _redact_json_text(value)
        if redacted_json is not None:
            return redacted_json
    for pattern, replacement in _TEXT_PATTERNS:
        value = pattern.sub(replacement, value)
    return value


# ---------------------------------------------------------------------------------------------
# Sensitive names (JSON keys, header names)
# ---------------------------------------------------------------------------------------------

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NAME_SEPARATOR = re.compile(r"[^a-z0-9]+")
_SENSITIVE_WORDS = frozenset(
    {
        "apikey",
        "appid",
        "authorization",
        "cookie",
        "credential",
        "credentials",
        "passphrase",
        "passwd",
        "password",
        "secret",
        "token",
    }
)
_SENSITIVE_WORD_PAIRS = frozenset(
    {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")}
)


def is_sensitive_name(name: str) -> bool:
    """Whether a JSON key or header name names a credential (`api_key`, `X-Auth-Token`, `Cookie`).

    The name is split into words (separators and camelCase); it is sensitive when a word is one
    of token, secret, password, passwd, passphrase, apikey, appid, authorization, cookie,
    credential(s), or two adjacent words are api/access/private/secret + key. Plurals such as
    `max_tokens` are not sensitive.
    """
    words = [word for word in _NAME_SEPARATOR.split(_CAMEL_BOUNDARY.sub("_", name).lower()) if word]
    if any(word in _SENSITIVE_WORDS for word in words):
        return True
    return any(pair in _SENSITIVE_WORD_PAIRS for pair in itertools.pairwise(words))


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers with credential-bearing values replaced by `[REDACTED]` and the rest text-redacted.

    Authorization, Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key, Api-Key and any header
    whose name `is_sensitive_name` lose their value entirely.
    """
    return {
        name: REDACTED if is_sensitive_name(name) else redact_sensitive_text(value)
        for name, value in headers.items()
    }


def redact_json_value(value: Any) -> Any:
    """A copy of a decoded JSON value with credentials removed.

    Non-null values under a sensitive key (`is_sensitive_name`) become `"[REDACTED]"`; every
    other string goes through `redact_sensitive_text`; containers are walked.
    """
    if isinstance(value, dict):
        return {
            key: (
                REDACTED
                if isinstance(key, str) and is_sensitive_name(key) and item is not None
                else redact_json_value(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_json_value(item) for item in value]
    if isinstance(value, str):
        return redact_sensitive_text(value)
    return value


# ---------------------------------------------------------------------------------------------
# JSON text, token by token
# ---------------------------------------------------------------------------------------------

_JSON_STRING_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_WHITESPACE = " \t\n\r"
_JSON_DECODER = json.JSONDecoder()
_REDACTED_JSON_STRING = json.dumps(REDACTED)


def _redact_json_text(text: str) -> str | None:
    """Redact a JSON document keeping its bytes outside changed values; None if not valid JSON."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return None
    pieces: list[str] = []
    position = 0
    length = len(text)
    while position < length:
        quote = text.find('"', position)
        if quote < 0:
            pieces.append(text[position:])
            break
        pieces.append(text[position:quote])
        token_end = _JSON_STRING_TOKEN.match(text, quote).end()  # type: ignore[union-attr]
        token = text[quote:token_end]
        position = _skip_json_whitespace(text, token_end)
        if position < length and text[position] == ":":
            pieces.append(token)
            pieces.append(text[token_end : position + 1])
            if is_sensitive_name(_decode_json_string(token)):
                value_start = _skip_json_whitespace(text, position + 1)
                pieces.append(text[position + 1 : value_start])
                _, position = _JSON_DECODER.raw_decode(text, value_start)
                literal = text[value_start:position]
                pieces.append(literal if literal == "null" else _REDACTED_JSON_STRING)
            else:
                position += 1
            continue
        decoded = _decode_json_string(token)
        redacted = redact_sensitive_text(decoded)
        pieces.append(token if redacted == decoded else json.dumps(redacted, ensure_ascii=False))
        position = token_end
    return "".join(pieces)


def _skip_json_whitespace(text: str, position: int) -> int:
    while position < len(text) and text[position] in _JSON_WHITESPACE:
        position += 1
    return position


def _decode_json_string(token: str) -> str:
    """The value of a JSON string token; only tokens with escapes need the decoder."""
    return json.loads(token) if "\\" in token else token[1:-1]
