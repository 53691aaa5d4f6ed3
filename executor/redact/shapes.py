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
    r"PRIVATE KEY"
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
    return _SHAPE_HINT.search(value) is not None or _SECRETISH_HINT.search(lowered) is not None


def redact_shapes(value: str) -> str:
    value = _redact_pem_blocks(value)
    for prefixes, pattern in _CREDENTIAL_SHAPES:
        if any(prefix in value for prefix in prefixes):
            value = pattern.sub(REDACTED, value)
    lowered = ascii_lower(value)
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
