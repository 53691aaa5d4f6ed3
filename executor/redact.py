"""The one redaction policy: credential names and shapes, and what each level redacts where.

`redact_sensitive_text` is Go's `core.RedactSensitiveText` (the nine patterns of reference
notes §1.5); the executor uses it for error texts and prompts. `redact_secrets` adds
value-based detection of well-known credential shapes. `redact(level, place, value)` applies
the policy: `AT_REST` (the store and its spool) and `EXPORT` (trace bundles). Every pattern
runs in time linear in its input.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

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
_NAMED_HINT = re.compile(
    r"key|appid|token|authorization|secret|passw|passphrase|cookie|credential|bearer|basic|://"
)
_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def _ascii_lower(value: str) -> str:
    """`value` with A-Z lowered and every other character (and so every index) kept."""
    return value.lower() if value.isascii() else value.translate(_ASCII_LOWER)


# Each pattern below is linear: its quantified runs are disjoint from what follows them, and a
# run that could start at every character of a long word (the scheme of pattern 9) is anchored
# at the start of that word by a lookbehind, so no character is rescanned from many starts.
_TEXT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
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
_PATTERN_GATES: tuple[tuple[str, ...], ...] = (
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
    return _redact_text(value, shapes=False)


def redact_secrets(value: str) -> str:
    """`redact_sensitive_text`, then credential shapes found by value wherever they stand.

    The shapes: OpenAI `sk-…`/`sk-proj-…`, AWS access key ids `AKIA…`/`ASIA…`, GitHub
    `ghp_…`/`gho_…`/`github_pat_…`, GitLab `glpat-…`, JWTs `eyJ….….…`, Slack `xox?-…`, Stripe
    `sk_live_…`/`rk_live_…`, Google `AIza…`, PEM private key blocks, and a long random-looking
    value assigned to a secret-ish word (`token=…`, `session: …`, `aws_key="…"`).
    """
    return _redact_text(value, shapes=True)


def _redact_text(value: str, *, shapes: bool) -> str:
    if not value:
        return value
    lowered = _ascii_lower(value)
    if not _may_need_redaction(lowered):
        return value
    named = _NAMED_HINT.search(lowered) is not None
    shaped = shapes and _may_hold_shape(value, lowered)
    if not named and not shaped:
        return value
    if value.lstrip()[:1] in ("{", "["):
        redacted_json = _redact_json_text(value, shapes=shapes)
        if redacted_json is not None:
            return redacted_json
    if named:
        # A replacement never creates a gate's literal, so the gates hold for the new text.
        for gate, (pattern, replacement) in zip(_PATTERN_GATES, _TEXT_PATTERNS, strict=True):
            for literal in gate:
                if literal in lowered:
                    value = pattern.sub(replacement, value)
                    break
    if shaped:
        value = _redact_shapes(value)
    return value


def _hint_prefilter() -> Any:
    """One RE2 pattern for every hint word, lowered: the words of `_NAMED_HINT`,
    `_SECRETISH_HINT` and `_SHAPE_HINT` (its case-sensitive words lowered, so the pattern finds
    a superset on the lowered text); None when RE2 is not installed."""
    try:
        import re2  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a dependency; without it every gate runs
        return None
    words = (
        "key", "appid", "token", "authorization", "secret", "passw", "passphrase", "cookie",
        "credential", "bearer", "basic", "://",
        "password", "passwd", "pwd", "auth", "session", "sid", "sig", "private", "aws",
        "sk-", "sk_", "rk_", "akia", "asia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
        "github_pat_", "glpat-", "eyj", "xox", "xapp-", "aiza", "private key",
    )  # fmt: skip
    return re2.compile("|".join(re.escape(word) for word in words))


def _may_need_redaction(lowered: str) -> bool:
    """False only when the ASCII-lowered text holds none of the hint words, so neither the
    patterns' nor the shapes' gates would open: one linear RE2 pass instead of `re` scanning
    the text once per gate (each several times slower on prose)."""
    if _HINT_PREFILTER is None or len(lowered) < _PREFILTER_MIN_CHARS:
        return True  # a short text: `re` checks its gates faster than RE2 is called
    try:
        return _HINT_PREFILTER.search(lowered) is not None
    except UnicodeEncodeError:  # lone surrogates (undecodable body bytes): let the gates judge
        return True


# ---------------------------------------------------------------------------------------------
# Credential shapes, found by value
# ---------------------------------------------------------------------------------------------

# Each shape starts after a character that cannot be part of it and ends in an open-ended run
# of its own characters, so a match either takes the whole run or fails within a few bytes.
# Each is tried only when one of its literal prefixes is in the text.
_CREDENTIAL_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (("sk-",), re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{20,}")),
    (("sk_", "rk_"), re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    (("AKIA", "ASIA"), re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")),
    (
        ("gh", "github_pat_"),
        re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    ),
    (("glpat-",), re.compile(r"(?<![A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20,}")),
    (
        ("eyJ",),
        re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    ),
    (("xox", "xapp-"), re.compile(r"(?<![A-Za-z0-9])(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,}")),
    (("AIza",), re.compile(r"(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{30,}")),
)
_SHAPE_HINT = re.compile(
    r"sk-|sk_|rk_|AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|eyJ|xox|xapp-|AIza|PRIVATE KEY"
)

# Words that make an adjacent random-looking value a secret (in text, a key or a header name).
_SECRETISH = (
    r"token|secret|passw(?:or)?d|pwd|passphrase|credentials?|auth|session|sid|signature|sig|"
    r"private|aws|key"
)
_SECRETISH_WORDS = frozenset(
    {
        "token", "tokens", "secret", "secrets", "password", "passwd", "pwd", "pass",
        "passphrase", "credential", "credentials", "auth", "session", "sid", "signature", "sig",
        "private", "aws", "key", "keys", "apikey", "cookie", "jwt",
    }
)  # fmt: skip
# `token=…`, `session_id: "…"`, `aws-key = '…'`: the word (not inside a longer word), up to 20
# name characters taken possessively, the separator; then the value, redacted only when it
# looks random (`looks_random`). Matched on the ASCII-lowered text.
_SECRETISH_HINT = re.compile(_SECRETISH)
_HINT_PREFILTER = _hint_prefilter()
_PREFILTER_MIN_CHARS = 1024
_SECRETISH_ASSIGNMENT = re.compile(
    rf"((?<![a-z])(?:{_SECRETISH})[a-z0-9_-]{{0,20}}+[\"']?[\t ]{{0,3}}[:=][\t ]{{0,3}}[\"']?)"
    r"([a-z0-9+/_.~=-]{16,})"
)
_PEM_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,10}-----")
_PEM_END = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,10}-----")
_MIN_RANDOM_LENGTH = 16
_MIN_RANDOM_BITS_PER_CHAR = 3.0


_DIGIT = re.compile(r"[0-9]")
# Enough of a value to judge it; a generated secret looks random from its first characters.
_RANDOM_SAMPLE = 256


def looks_random(value: str) -> bool:
    """Whether `value` looks like a generated secret: 16+ characters, at least two of lower,
    upper and digits, and at least 3 bits of Shannon entropy per character (judged on its
    first 256 characters)."""
    if len(value) < _MIN_RANDOM_LENGTH:
        return False
    sample = value[:_RANDOM_SAMPLE]
    kinds = (
        (sample.upper() != sample)  # a lower-case letter
        + (sample.lower() != sample)  # an upper-case letter
        + (_DIGIT.search(sample) is not None)
    )
    if kinds < 2:
        return False
    length = len(sample)
    entropy = -sum(n / length * math.log2(n / length) for n in Counter(sample).values())
    return entropy >= _MIN_RANDOM_BITS_PER_CHAR


def _may_hold_shape(value: str, lowered: str) -> bool:
    return _SHAPE_HINT.search(value) is not None or _SECRETISH_HINT.search(lowered) is not None


def _redact_shapes(value: str) -> str:
    value = _redact_pem_blocks(value)
    for prefixes, pattern in _CREDENTIAL_SHAPES:
        if any(prefix in value for prefix in prefixes):
            value = pattern.sub(REDACTED, value)
    lowered = _ascii_lower(value)
    pieces: list[str] = []
    position = 0
    for match in _SECRETISH_ASSIGNMENT.finditer(lowered):
        value_start, value_end = match.span(2)
        if looks_random(value[value_start:value_end]):
            pieces.append(value[position:value_start])
            pieces.append(REDACTED)
            position = value_end
    if not pieces:
        return value
    pieces.append(value[position:])
    return "".join(pieces)


def _redact_pem_blocks(value: str) -> str:
    """A PEM private key's body becomes `[REDACTED]`; with no END line, the rest of the text."""
    if "PRIVATE KEY" not in value:
        return value
    pieces: list[str] = []
    position = 0
    while (begin := _PEM_BEGIN.search(value, position)) is not None:
        pieces.append(value[position : begin.end()])
        pieces.append(REDACTED)
        end = _PEM_END.search(value, begin.end())
        if end is None:
            return "".join(pieces)
        pieces.append(end.group(0))
        position = end.end()
    pieces.append(value[position:])
    return "".join(pieces)


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
    }
)
_SENSITIVE_WORD_PAIRS = frozenset(
    {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")}
)


def _name_words(name: str) -> list[str]:
    return [word for word in _NAME_SEPARATOR.split(_CAMEL_BOUNDARY.sub("_", name).lower()) if word]


@functools.lru_cache(maxsize=4096)
def is_sensitive_name(name: str) -> bool:
    """Whether a JSON key or header name names a credential (`api_key`, `X-Auth-Token`, `Cookie`).

    The name is split into words (separators and camelCase); it is sensitive when a word is one
    of secret, password, passwd, passphrase, apikey, appid, authorization, cookie,
    credential(s), when its last word is token (`access_token`, not `token_count`), or when two
    adjacent words are api/access/private/secret + key. Plurals such as `max_tokens` are not
    sensitive.
    """
    words = _name_words(name)
    if any(word in _SENSITIVE_WORDS for word in words) or words[-1:] == ["token"]:
        return True
    return any(pair in _SENSITIVE_WORD_PAIRS for pair in itertools.pairwise(words))


@functools.lru_cache(maxsize=4096)
def is_secretish_name(name: str) -> bool:
    """Whether a random-looking value under this key or header name is taken for a secret
    (`aws`, `session_id`, `X-Signature`); broader than `is_sensitive_name`."""
    return any(word in _SECRETISH_WORDS for word in _name_words(name))


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


def redact_body(body: bytes) -> bytes:
    """Body bytes with credentials replaced; bytes outside a replaced value are kept exactly.

    UTF-8 text (JSON included, which stays valid JSON) goes through `redact_secrets`. Other
    bytes are matched as text with each undecodable byte standing for itself, so a binary body
    without a secret comes back byte-exact.
    """
    text = body.decode("utf-8", "surrogateescape")
    redacted = redact_secrets(text)
    if redacted == text:
        return body
    try:
        return redacted.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        # A JSON `\ud800` escape decoded to a lone surrogate: write it back as the escape.
        return redacted.encode("utf-8", "backslashreplace")


# ---------------------------------------------------------------------------------------------
# The policy: what each level redacts where
# ---------------------------------------------------------------------------------------------


class Place(StrEnum):
    """A kind of recorded value, as the policy tells them apart."""

    HEADERS = "headers"  # request and response header maps
    URL = "url"  # tool and LLM URLs
    ERROR_TEXT = "error_text"  # transport error messages, step errors
    LLM_SETTINGS = "llm_settings"  # the LLM endpoint snapshot (api_key, base_url)
    PLAN = "plan"  # the plan snapshot
    TEXT = "text"  # any other text: the query, reasons, prompts, answers, event messages
    JSON = "json"  # any other JSON value: parameters, results, decisions, messages
    BODY = "body"  # request and response bytes


class RedactionLevel(StrEnum):
    """Where recorded values go. AT_REST: the store and its spool, where bodies, parameters,
    prompts and answers stay exactly as sent and received. EXPORT: a trace bundle, where
    everything that can carry a credential is redacted."""

    AT_REST = "at_rest"
    EXPORT = "export"


_REDACTED_AT_REST = frozenset(
    {Place.HEADERS, Place.URL, Place.ERROR_TEXT, Place.LLM_SETTINGS, Place.PLAN}
)


def redacts(level: RedactionLevel, place: Place) -> bool:
    """Whether `level` changes values of `place` (the plan: at rest only its credentials)."""
    return level is RedactionLevel.EXPORT or place in _REDACTED_AT_REST


def redact(level: RedactionLevel, place: Place, value: Any) -> Any:
    """`value` (text, a decoded JSON value, header map or body bytes) as `level` keeps it."""
    if value is None or not redacts(level, place):
        return value
    if place is Place.HEADERS:
        if isinstance(value, Mapping) and all(isinstance(item, str) for item in value.values()):
            return redact_headers({str(key): item for key, item in value.items()})
        return redact_json_value(value)
    if place is Place.BODY:
        return redact_body(bytes(value))
    if place is Place.PLAN:
        return redact_plan(value, level)
    if place in (Place.LLM_SETTINGS, Place.JSON):
        return redact_json_value(value)
    return redact_secrets(value) if isinstance(value, str) else redact_json_value(value)


def redact_plan(plan: Any, level: RedactionLevel) -> Any:
    """The plan snapshot as `level` keeps it.

    At rest: the tools' headers and base URLs, the capabilities' paths and the `llm` block.
    On export: everything, except that capability schemas keep their keys (a property named
    `password` describes a type, not a secret) and have only their strings redacted, so a
    replay still validates parameters.
    """
    if not isinstance(plan, dict):
        return redact_json_value(plan) if level is RedactionLevel.EXPORT else plan
    if level is RedactionLevel.AT_REST:
        return _plan_credentials_redacted(plan)
    if not isinstance(plan.get("capabilities"), dict):
        return redact_json_value(plan)
    redacted = redact_json_value({key: item for key, item in plan.items() if key != "capabilities"})
    capabilities = {}
    for name, capability in plan["capabilities"].items():
        if isinstance(capability, dict):
            capabilities[name] = {
                **redact_json_value({k: v for k, v in capability.items() if k != "schema"}),
                **(
                    {"schema": _redact_strings(capability["schema"])}
                    if "schema" in capability
                    else {}
                ),
            }
        else:
            capabilities[name] = redact_json_value(capability)
    return {key: capabilities if key == "capabilities" else redacted[key] for key in plan}


def _plan_credentials_redacted(plan: dict[str, Any]) -> dict[str, Any]:
    redacted = dict(plan)
    tools = plan.get("tools")
    if isinstance(tools, dict):
        redacted["tools"] = {
            name: _tool_credentials_redacted(spec) if isinstance(spec, dict) else spec
            for name, spec in tools.items()
        }
    capabilities = plan.get("capabilities")
    if isinstance(capabilities, dict):
        redacted["capabilities"] = {
            name: {**spec, "path": redact_secrets(spec["path"])}
            if isinstance(spec, dict) and isinstance(spec.get("path"), str)
            else spec
            for name, spec in capabilities.items()
        }
    if plan.get("llm") is not None:
        redacted["llm"] = redact_json_value(plan["llm"])
    return redacted


def _tool_credentials_redacted(spec: dict[str, Any]) -> dict[str, Any]:
    redacted = dict(spec)
    if isinstance(spec.get("headers"), dict):
        redacted["headers"] = redact_headers({str(k): str(v) for k, v in spec["headers"].items()})
    if isinstance(spec.get("base_url"), str):
        redacted["base_url"] = redact_secrets(spec["base_url"])
    return redacted


def _redact_strings(value: Any) -> Any:
    """Every string of a JSON value through `redact_secrets`, keys and shape kept."""
    if isinstance(value, dict):
        return {key: _redact_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact_strings(item) for item in value]
    if isinstance(value, str):
        return redact_secrets(value)
    return value


# ---------------------------------------------------------------------------------------------
# JSON text, token by token
# ---------------------------------------------------------------------------------------------

_JSON_STRING_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_JSON_WHITESPACE = " \t\n\r"
_JSON_DECODER = json.JSONDecoder()
_REDACTED_JSON_STRING = json.dumps(REDACTED)


def _redact_json_text(text: str, *, shapes: bool) -> str | None:
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
            key = _decode_json_string(token)
            pieces.append(_redacted_json_key(key, token, shapes=shapes))
            pieces.append(text[token_end : position + 1])
            value_start = _skip_json_whitespace(text, position + 1)
            value_end = None
            if is_sensitive_name(key):
                _, value_end = _JSON_DECODER.raw_decode(text, value_start)
                if text[value_start:value_end] == "null":
                    value_end = None
            elif shapes and is_secretish_name(key) and text.startswith('"', value_start):
                string_end = _JSON_STRING_TOKEN.match(text, value_start).end()  # type: ignore[union-attr]
                if looks_random(_decode_json_string(text[value_start:string_end])):
                    value_end = string_end
            if value_end is None:
                position += 1
            else:
                pieces.append(text[position + 1 : value_start])
                pieces.append(_REDACTED_JSON_STRING)
                position = value_end
            continue
        pieces.append(_redacted_json_string(_decode_json_string(token), token, shapes=shapes))
        position = token_end
    return "".join(pieces)


def _redacted_json_string(decoded: str, token: str, *, shapes: bool) -> str:
    """A JSON string token with its value redacted; `token` itself when nothing changed."""
    redacted = _redact_text(decoded, shapes=shapes)
    return token if redacted == decoded else json.dumps(redacted, ensure_ascii=False)


def _redacted_json_key(key: str, token: str, *, shapes: bool) -> str:
    """A key token: only credential shapes are looked for in keys, and only with `shapes`."""
    if not shapes or not _may_hold_shape(key, _ascii_lower(key)):
        return token
    redacted = _redact_shapes(key)
    return token if redacted == key else json.dumps(redacted, ensure_ascii=False)


def _skip_json_whitespace(text: str, position: int) -> int:
    while position < len(text) and text[position] in _JSON_WHITESPACE:
        position += 1
    return position


def _decode_json_string(token: str) -> str:
    """The value of a JSON string token; only tokens with escapes need the decoder."""
    return json.loads(token) if "\\" in token else token[1:-1]
