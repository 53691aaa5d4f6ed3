"""Texts, JSON text and bodies redacted (JSON token by token, other bytes kept exactly)."""

from __future__ import annotations

import json
import re
from typing import Any

from executor.redact.names import is_secretish_name, is_sensitive_name
from executor.redact.patterns import NAMED_HINT, PATTERN_GATES, REDACTED, TEXT_PATTERNS, ascii_lower
from executor.redact.shapes import looks_random, may_hold_shape, redact_shapes


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
    `sk_live_…`/`rk_live_…`, Google `AIza…`, npm `npm_…`, Hugging Face `hf_…`, PyPI
    `pypi-AgE…`, PEM private key blocks, Slack and Discord webhook paths, signed-URL
    parameters (`X-Amz-Signature=`, `sig=`), the credential after any `Authorization` scheme,
    cookie values of a written-out `Cookie:`/`Set-Cookie:` header, and a long random-looking
    value assigned to a secret-ish word (`token=…`, `session: …`, `aws_key="…"`).
    """
    return _redact_text(value, shapes=True)


def _hint_prefilter() -> Any:
    """One RE2 pattern for every hint word, lowered: the words of `NAMED_HINT`, the secret-ish
    words and the shape prefixes (their case-sensitive words lowered, so the pattern finds a
    superset on the lowered text); None when RE2 is not installed."""
    try:
        import re2  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a dependency; without it every gate runs
        return None
    words = (
        "key", "appid", "token", "authorization", "secret", "passw", "passphrase", "cookie",
        "credential", "bearer", "basic", "://",
        "password", "passwd", "pwd", "auth", "session", "sid", "sig", "private", "aws",
        "sk-", "sk_", "rk_", "akia", "asia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
        "github_pat_", "glpat-", "eyj", "xox", "xapp-", "aiza", "npm_", "hf_", "pypi-",
        "private key", "hooks.slack.com", "discord",
    )  # fmt: skip
    return re2.compile("|".join(re.escape(word) for word in words))


_HINT_PREFILTER = _hint_prefilter()
_PREFILTER_MIN_CHARS = 1024


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


# Also JSON in JSON strings (`\\\/`). A run of backslashes is read once, from its first (the
# lookbehind refuses a backslash after a backslash): matched from every backslash of a long run,
# 40 KB of backslashes took 5 s (quadratic). The leading literal lets `re` skip to each
# backslash: with the lookbehind first, 1 MB of prose took 25 ms instead of 2.
_JSON_ESCAPE = re.compile(r"\\(?<!\\\\)\\*+(?:u[0-9a-fA-F]{4}|/)")


_GATE_DECODE_PASSES = 4  # `\\u005cu0070`: a backslash escaped in JSON in JSON, then its escape


def _ascii_escape(match: re.Match[str]) -> str:
    escape = match.group()
    if escape[-1] == "/":
        return "/"
    code = int(escape[-4:], 16)
    # No hint word holds a character past ASCII; the gates' text stays ASCII (and fast).
    return chr(code) if code < 0x80 else escape


def _unescaped_for_gates(value: str) -> str:
    """`value` with JSON's `\\/` and ASCII `\\uXXXX` escapes decoded, which can hide a hint word
    (`https:\\/\\/`, `\\u0070assword`) from the gates; the gates only decide what to look at."""
    if "\\" not in value:  # one memchr; a two-character search runs about 20 times slower
        return value
    for _ in range(_GATE_DECODE_PASSES):
        if "\\/" not in value and "\\u" not in value:  # every match ends in one of them
            break
        decoded = _JSON_ESCAPE.sub(_ascii_escape, value)
        if decoded == value:
            break
        value = decoded
    return value


# Levels of JSON text inside JSON strings read as JSON; past them a string that opens a gate is
# replaced whole (each level reads its whole text again: a body nested √n deep cost n·√n, and
# recursion past Python's limit failed the export).
_MAX_JSON_DEPTH = 16


def _redact_text(value: str, *, shapes: bool, depth: int = 0, lines: bool = True) -> str:
    if not value:
        return value
    gate_value = _unescaped_for_gates(value)
    lowered = ascii_lower(gate_value)
    if not _may_need_redaction(lowered):
        return value
    named = NAMED_HINT.search(lowered) is not None
    shaped = shapes and may_hold_shape(gate_value, lowered)
    if not named and not shaped:
        return value
    if depth > _MAX_JSON_DEPTH:
        return REDACTED
    if value.lstrip()[:1] in ("{", "["):
        redacted_json = _redact_json_text(value, shapes=shapes, depth=depth)
        if redacted_json is not None:
            return redacted_json
    if value.rstrip().endswith((")", ");")):
        redacted_call = _redact_jsonp(value, shapes=shapes, depth=depth)
        if redacted_call is not None:
            return redacted_call
    if lines and "\n" in value:
        by_line = _redact_json_lines(value, shapes=shapes, depth=depth)
        if by_line is not None:
            return by_line
    if '"' in value:
        # JSON outside one whole document (a truncated one, JSONP, a top-level string…): the
        # patterns below read the raw text and know fewer names, so keys and escaped string
        # tokens are read here.
        value = _redact_json_fragments(value, shapes=shapes, depth=depth)
        lowered = ascii_lower(value)
    elif gate_value is not value:
        lowered = ascii_lower(value)
    value = _redact_plain(value, lowered, named=named, shaped=shaped)
    if "\\" in value:
        # What the tokens did not show (a string cut short, quotes paired wrongly by a stray
        # one): the text read with its plain escapes decoded, kept only if that finds more.
        unescaped = _SAFE_ESCAPE.sub(_safe_escape, value)
        if unescaped != value:
            redacted = _redact_plain(unescaped, ascii_lower(unescaped), named=named, shaped=shaped)
            if redacted != unescaped:
                return redacted
    return value


def _redact_plain(value: str, lowered: str, *, named: bool, shaped: bool) -> str:
    """The ordered patterns (their literals looked for in `lowered`), then the shapes."""
    if named:
        # A replacement never creates a gate's literal, so the gates hold for the new text.
        for gate, (pattern, replacement) in zip(PATTERN_GATES, TEXT_PATTERNS, strict=True):
            for literal in gate:
                if literal in lowered:
                    value = pattern.sub(replacement, value)
                    break
    if shaped:
        value = redact_shapes(value)
    return value


# A single (unescaped) `\/` or `\u00XX` of printable ASCII but `"` and `\\`: decoded, the text
# means the same as JSON and keeps its structure.
_SAFE_ESCAPE = re.compile(r"\\(?<!\\\\)(?:/|u00(?!22|5[cC])[2-7][0-9a-fA-F])")


def _safe_escape(match: re.Match[str]) -> str:
    escape = match.group()
    return "/" if escape == "\\/" else chr(int(escape[-2:], 16))


_JSONP_CALL = re.compile(r"\s*+[A-Za-z_$][\w$.]*+\s*+\(", re.ASCII)


def _redact_jsonp(text: str, *, shapes: bool, depth: int) -> str | None:
    """`callback({…});` with its one JSON argument redacted as JSON; None if not that."""
    call = _JSONP_CALL.match(text)
    close = text.rfind(")")
    if call is None or close < call.end():
        return None
    argument = text[call.end() : close]
    if argument.lstrip()[:1] not in ("{", "["):
        return None
    redacted = _redact_json_text(argument, shapes=shapes, depth=depth)
    return None if redacted is None else text[: call.end()] + redacted + text[close:]


def _redact_json_lines(text: str, *, shapes: bool, depth: int) -> str | None:
    """SSE `data:` lines and NDJSON: each line holding one JSON document is redacted as JSON,
    the runs of other lines as text; None when no line holds a JSON document."""
    pieces: list[str] = []
    prose: list[str] = []
    found = False
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        line = text[start:end]
        start = end
        body = line.rstrip("\r\n")
        prefix = ""
        if body.startswith("data:"):
            prefix = "data: " if body.startswith("data: ") else "data:"
        payload = body[len(prefix) :]
        redacted = None
        if payload.lstrip()[:1] in ("{", "["):
            redacted = _redact_json_text(payload, shapes=shapes, depth=depth)
        if redacted is None:
            prose.append(line)
            continue
        if prose:
            pieces.append(_redact_text("".join(prose), shapes=shapes, depth=depth, lines=False))
            prose.clear()
        pieces.append(prefix + redacted + line[len(body) :])
        found = True
    if not found:
        return None
    if prose:
        pieces.append(_redact_text("".join(prose), shapes=shapes, depth=depth, lines=False))
    return "".join(pieces)


_JSON_STRING_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_JSON_WHITESPACE = " \t\n\r"
_JSON_DECODER = json.JSONDecoder()
_REDACTED_JSON_STRING = json.dumps(REDACTED)
_JSON_SCALAR = re.compile(r"-?[0-9]++(?:\.[0-9]++)?+(?:[eE][-+]?+[0-9]++)?+|true|false")
_JSON_FLAT_VALUE = r'(?:"[^"\\]*+(?:\\.[^"\\]*+)*+"|-?[0-9][0-9.eE+-]*+|true|false|null)'
# An array of strings, numbers, booleans and nulls (`"cookie": ["a", "b"]`).
_JSON_FLAT_ARRAY = re.compile(
    rf"\[\s*+(?:{_JSON_FLAT_VALUE}(?:\s*+,\s*+{_JSON_FLAT_VALUE})*+\s*+)?+\]", re.DOTALL
)


def _redact_json_text(text: str, *, shapes: bool, depth: int = 0) -> str | None:
    """Redact a JSON document keeping its bytes outside changed values; None if not valid JSON."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return None
    return _redact_json_tokens(text, shapes=shapes, depth=depth, document=True)


def _redact_json_fragments(text: str, *, shapes: bool, depth: int) -> str:
    """`_redact_json_tokens` for a text that is not one JSON document."""
    return _redact_json_tokens(text, shapes=shapes, depth=depth, document=False)


def _redact_json_tokens(text: str, *, shapes: bool, depth: int, document: bool) -> str:
    """The JSON string tokens of `text` redacted, the other bytes kept: a sensitive key's value
    replaced (with `shapes`, a secret-ish key's random-looking string; `_secret_value`).

    In a `document` (valid JSON) every value string is redacted as its decoded value and a key
    only for shapes; in other text (the patterns read it next) only the tokens with escapes
    are, and a token that does not decode (`"\\x"`) or does not end stays as it is.
    """
    pieces: list[str] = []
    position = 0
    length = len(text)
    while position < length:
        quote = text.find('"', position)
        if quote < 0:
            pieces.append(text[position:])
            break
        pieces.append(text[position:quote])
        match = _JSON_STRING_TOKEN.match(text, quote)
        if match is None:  # not in a document: an unterminated string, the rest is text
            pieces.append(text[quote:])
            break
        token = match.group()
        position = match.end()
        try:
            decoded = _decode_json_string(token)
        except ValueError:
            pieces.append(token)
            continue
        colon = _skip_json_whitespace(text, position)
        is_key = colon < length and text[colon] == ":"
        if is_key and document:
            pieces.append(_redacted_json_key(decoded, token, shapes=shapes))
        elif document or "\\" in token:
            pieces.append(_redacted_json_string(decoded, token, shapes=shapes, depth=depth))
        else:
            pieces.append(token)
        if is_key:
            value_start = _skip_json_whitespace(text, colon + 1)
            value_end = _secret_value(text, value_start, decoded, shapes=shapes, document=document)
            if value_end is not None:
                pieces.append(text[position:value_start])
                pieces.append(_REDACTED_JSON_STRING)
                position = value_end
    return "".join(pieces)


def _secret_value(text: str, start: int, key: str, *, shapes: bool, document: bool) -> int | None:
    """Where the value at `start` ends when it is `key`'s secret; None otherwise.

    A sensitive key's value but null: in a document any value; elsewhere a string, number,
    boolean or array of those (an object's strings are tokens of their own; not `raw_decode`,
    each of whose errors counts the lines before it). With `shapes`, a secret-ish key's
    random-looking string.
    """
    if is_sensitive_name(key):
        if document:
            _, end = _JSON_DECODER.raw_decode(text, start)
            return None if text[start:end] == "null" else end
        value = (
            _JSON_STRING_TOKEN.match(text, start)
            or _JSON_SCALAR.match(text, start)
            or _JSON_FLAT_ARRAY.match(text, start)
        )
        return None if value is None else value.end()
    if shapes and is_secretish_name(key):
        value = _JSON_STRING_TOKEN.match(text, start)
        if value is not None:
            try:
                string = _decode_json_string(value.group())
            except ValueError:
                return None
            if looks_random(string):
                return value.end()
    return None


def _redacted_json_string(decoded: str, token: str, *, shapes: bool, depth: int = 0) -> str:
    """A JSON string token with its value redacted; `token` itself when nothing changed."""
    redacted = _redact_text(decoded, shapes=shapes, depth=depth + 1)
    if redacted == decoded:
        return token
    encoded = _json_string(redacted, token)
    # JSON in JSON written with `\\u005c` for each backslash, written back by `json.dumps` with
    # `\\\\`, doubles its backslashes at each level: 2 KB nested 20 deep came back as 262 KB.
    return encoded if len(encoded) <= 2 * len(token) + 64 else _REDACTED_JSON_STRING


_SURROGATE = re.compile("[\ud800-\udfff]")


def _json_string(value: str, token: str) -> str:
    """`value` as a JSON string in place of `token`: a lone surrogate the token held as an
    escape (`\\udc80`) stays an escape, where written raw it would become an undecodable byte
    of the body; one it held raw (a body's undecodable byte) stays raw, so the byte comes back."""
    encoded = json.dumps(value, ensure_ascii=False)
    if _SURROGATE.search(encoded) is None:
        return encoded
    raw = set(_SURROGATE.findall(token))
    return _SURROGATE.sub(
        lambda match: match.group() if match.group() in raw else f"\\u{ord(match.group()):04x}",
        encoded,
    )


def _redacted_json_key(key: str, token: str, *, shapes: bool) -> str:
    """A key token: only credential shapes are looked for in keys, and only with `shapes`."""
    if not shapes or not may_hold_shape(key, ascii_lower(key)):
        return token
    redacted = redact_shapes(key)
    return token if redacted == key else _json_string(redacted, token)


def _skip_json_whitespace(text: str, position: int) -> int:
    while position < len(text) and text[position] in _JSON_WHITESPACE:
        position += 1
    return position


def _decode_json_string(token: str) -> str:
    """The value of a JSON string token; only tokens with escapes need the decoder."""
    return json.loads(token) if "\\" in token else token[1:-1]


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
