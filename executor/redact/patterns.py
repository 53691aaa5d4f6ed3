"""Go's credential text patterns (`core.RedactSensitiveText`), linear, with cheap literal hints."""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

# Go RE2 `\s` is [\t\n\f\r ]: Python's would also take \v.
_WS = r"[\t\n\f\r ]"
_BARE_VALUE_STOP = r"\t\n\f\r ,;}&\]\"'\\"
_NOT_ALREADY_REDACTED = r"(?!\[REDACTED\])"
# A double-quoted value with escapes; possessive, since giving characters back never helps.
_DQ_VALUE = r'[^"\\]*+(?:\\.[^"\\]*+)*+'

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

# Every text pattern and sensitive JSON key needs one of these words (in the ASCII-lowered
# text); text without any is kept. Searching the lowered copy case-sensitively is ten times
# faster than a case-insensitive alternation.
NAMED_HINT = re.compile(
    r"key|appid|token|authorization|secret|passw|passphrase|cookie|credential|bearer|basic|://"
)
_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def ascii_lower(value: str) -> str:
    """`value` with A-Z lowered and every other character (and so every index) kept."""
    return value.lower() if value.isascii() else value.translate(_ASCII_LOWER)


# Each pattern below is linear: its quantified runs are disjoint from what follows them, and a
# run that could start at every character of a long word (the scheme of pattern 9) is anchored
# at the start of that word by a lookbehind, so no character is rescanned from many starts.
TEXT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # 1. JSON double-quoted key: "api_key": "value" (escape-aware value).
    (
        re.compile(rf'("{_NAMES}"{_WS}*:{_WS}*")({_DQ_VALUE})(")', _FLAGS),
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
            rf"(?:\"{_DQ_VALUE}\"|'[^'\"\\]*'|(?:bearer|basic){_WS}+[^{_BARE_VALUE_STOP}]+"
            rf"|[^{_BARE_VALUE_STOP}]+)",
            _FLAGS,
        ),
        rf"\g<1>{REDACTED}",
    ),
    # 4. Unquoted name, double-quoted value: password="value".
    (
        re.compile(rf'(\b{_UNQUOTED_NAMES}\b{_WS}*[=:]{_WS}*")({_DQ_VALUE})(")', _FLAGS),
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
    # 9. URL userinfo: scheme://user:password@host. Go's leftmost scheme start is the first
    # letter of the run of scheme characters before `://`; the run's leading digits and signs
    # are matched (and kept) from the run's start instead of retrying at every letter.
    (
        re.compile(
            r"((?<![a-z0-9+.-])[0-9+.-]*)([a-z][a-z0-9+.-]*://)([^/@\t\n\f\r \"\\]+)@", _FLAGS
        ),
        rf"\g<1>\g<2>{REDACTED}@",
    ),
)


# Literals (in the lowered text) without which pattern i cannot match; it is skipped then.
PATTERN_GATES: tuple[tuple[str, ...], ...] = (
    ('"',),
    ("'",),
    ("authorization",),
    ('"',),
    ("'",),
    ("=", ":"),
    ("?", "&"),
    ("bearer", "basic"),
    ("://",),
)
