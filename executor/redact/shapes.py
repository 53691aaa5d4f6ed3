"""Well-known credential shapes found by value (sk-, AKIA, ghp_, npm_, JWTs, PEM keys, …)."""

from __future__ import annotations

import math
import re
from collections import Counter

from executor.redact.patterns import REDACTED, ascii_lower

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
    (("npm_",), re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36,}")),
    (("hf_",), re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}")),
    (("pypi-",), re.compile(r"(?<![A-Za-z0-9_-])pypi-AgE[A-Za-z0-9_-]{50,}")),
)
_SHAPE_HINT = re.compile(
    r"sk-|sk_|rk_|AKIA|ASIA|gh[pousr]_|github_pat_|glpat-|eyJ|xox|xapp-|AIza|npm_|hf_|pypi-|"
    r"PRIVATE KEY|hooks\.slack\.com|discord"
)
# Webhook URLs whose path is the credential: Slack's `hooks.slack.com/services/T…/B…/<secret>`
# (and its workflow triggers), Discord's `discord.com/api/webhooks/<id>/<token>`.
_WEBHOOK_PATHS = (
    re.compile(r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]+"),
    re.compile(r"(discord(?:app)?\.com/api/webhooks/[0-9]+/)[A-Za-z0-9_-]+"),
)

# Words that make an adjacent random-looking value a secret (in text, a key or a header name).
_SECRETISH = (
    r"token|secret|passw(?:or)?d|pwd|passphrase|credentials?|auth|session|sid|signature|sig|"
    r"private|aws|key"
)
SECRETISH_WORDS = frozenset(
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
_SECRETISH_ASSIGNMENT = re.compile(
    rf"((?<![a-z])(?:{_SECRETISH})[a-z0-9_-]{{0,20}}+[\"']?[\t ]{{0,3}}[:=][\t ]{{0,3}}[\"']?)"
    r"([a-z0-9+/_.~=-]{16,})"
)
# `Authorization: Token 9944b0…`, `ApiKey QWxh…`, `Digest …`: any scheme word (or the
# `[REDACTED]` Go's pattern 3 left of it), then the credential, redacted when it looks like one
# (`_looks_like_credential`). Matched on the ASCII-lowered text.
_AUTHORIZATION_CREDENTIAL = re.compile(
    r"(?<![a-z0-9_])authorization[\"']?[\t ]{0,3}[:=][\t ]{0,3}[\"']?"
    r"(?:\[redacted\]|[a-z][a-z0-9_-]{0,30}+)[\t ]+([^\t\n\f\r ,;\"'\\\[]+)"
)
_PARAMETER_NAME = re.compile(r"[a-z_-]+=")
_LINE_END = re.compile(r"[\r\n]")
# A `Cookie:` or `Set-Cookie:` header written out in text: every cookie's value of the first,
# the cookie's own value of the second (its attributes, `Path=/`, `HttpOnly`, are kept).
_COOKIE_HEADER = re.compile(r"(?<![a-z0-9_.{-])(set-)?cookie[\t ]{0,3}:[\t ]{0,3}")
_COOKIE_PAIR = re.compile(r"([^=;,\t\n\f\r \"'\\]+)=([^;,\t\n\f\r \"'\\]*)")
# Query parameters of signed URLs (S3 and GCS presigned, Azure SAS `sig`).
_SIGNED_URL_PARAMETER = re.compile(
    r"([?&](?:x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|"
    r"x-goog-credential|signature|sig)=)([^&#\t\n\f\r \"'\\]+)"
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


def may_hold_shape(value: str, lowered: str) -> bool:
    return (
        _SHAPE_HINT.search(value) is not None
        or _SECRETISH_HINT.search(lowered) is not None
        or "cookie" in lowered
    )


def redact_shapes(value: str) -> str:
    value = _redact_pem_blocks(value)
    for prefixes, pattern in _CREDENTIAL_SHAPES:
        if any(prefix in value for prefix in prefixes):
            value = pattern.sub(REDACTED, value)
    if "hooks.slack.com" in value or "discord" in value:
        for pattern in _WEBHOOK_PATHS:
            value = pattern.sub(rf"\g<1>{REDACTED}", value)
    lowered = ascii_lower(value)
    spans: list[tuple[int, int]] = []
    for match in _SECRETISH_ASSIGNMENT.finditer(lowered):
        if looks_random(value[match.start(2) : match.end(2)]):
            spans.append(match.span(2))
    if "authorization" in lowered:
        for match in _AUTHORIZATION_CREDENTIAL.finditer(lowered):
            # `Digest username="…"`: a parameter list, not one credential
            parameter = _PARAMETER_NAME.fullmatch(match.group(1)) is not None
            if not parameter and _looks_like_credential(value[match.start(1) : match.end(1)]):
                spans.append(match.span(1))
    if "cookie" in lowered:
        spans.extend(_cookie_value_spans(lowered))
    if "sig" in lowered or "x-amz-" in lowered or "x-goog-" in lowered:
        spans.extend(match.span(2) for match in _SIGNED_URL_PARAMETER.finditer(lowered))
    return _replace_spans(value, spans)


def _looks_like_credential(word: str) -> bool:
    """A word after an authorization scheme that is a credential, not prose: 8+ characters
    with a digit, a base64 or token sign, or both cases (`9944b0…`, `QWxh…==`, `Xk9mP2qvLx`)."""
    if len(word) < 8 or word == REDACTED:
        return False
    return (
        any(character.isdigit() or character in "+/=_-.~" for character in word)
        or (word.lower() != word and word.upper() != word)
    )


def _cookie_value_spans(lowered: str) -> list[tuple[int, int]]:
    """The values of the cookies in each `Cookie:` / `Set-Cookie:` header line of the text.

    One pass: a header inside a stretch already read (`cookie: a=b; cookie: c=d` on one line)
    is not read again, so the cost stays linear in the text."""
    spans = []
    scanned = 0
    line_end = -1
    for header in _COOKIE_HEADER.finditer(lowered):
        if header.start() < scanned:
            continue
        if header.end() > line_end:  # a new line: where it ends, found once per line
            found = _LINE_END.search(lowered, header.end())
            line_end = len(lowered) if found is None else found.start()
        # Read up to the line's end, or to the next cookie header on it (read in its turn).
        following = _COOKIE_HEADER.search(lowered, header.end(), line_end)
        end = following.start() if following is not None else line_end
        for pair in _COOKIE_PAIR.finditer(lowered, header.end(), end):
            if pair.end(2) > pair.start(2):
                spans.append(pair.span(2))
            if header.group(1):  # Set-Cookie: one cookie, then its attributes
                break
        scanned = end
    return spans


def _replace_spans(value: str, spans: list[tuple[int, int]]) -> str:
    """`value` with each span (of the same-length lowered text) replaced by `[REDACTED]`;
    overlapping spans are merged."""
    if not spans:
        return value
    pieces: list[str] = []
    position = 0
    for start, end in sorted(spans):
        if end <= position:
            continue
        start = max(start, position)
        pieces.append(value[position:start])
        pieces.append(REDACTED)
        position = end
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
