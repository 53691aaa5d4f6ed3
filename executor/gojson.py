"""JSON text read as TruvaG3's Go `encoding/json` reads it: bad UTF-8 and lone surrogates in
strings become U+FFFD instead of an error or an unsendable string.

Go documents it ("invalid UTF-8 or invalid UTF-16 surrogate pairs are not treated as an error.
Instead, they are replaced by the Unicode replacement character U+FFFD"): each byte its UTF-8
decoder rejects is one U+FFFD, and a `\\uD800` escape that does not start a valid pair is one.
Python's `json` keeps a lone surrogate in the string (which then cannot be encoded, so a step
that binds it or an LLM correction that carries it could not be sent), and a body that is not
UTF-8 is not JSON to it at all. Outside strings, a bad byte is a syntax error for both.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
# What may start a JSON text after its leading whitespace (Go's scanner refuses anything else
# at the first byte, as `json.loads` does).
_JSON_START = frozenset(b'{["-0123456789tfn')
_WHITESPACE = b" \t\r\n"


def go_text(data: bytes | bytearray | memoryview) -> str:
    """`data` as UTF-8, each byte that does not decode replaced by U+FFFD, as Go reads it.

    `surrogateescape` gives each rejected byte its own surrogate (U+DC80 + byte: the bytes Go's
    `utf8.DecodeRune` rejects one at a time, a truncated or overlong sequence byte by byte), and
    UTF-8 never decodes to a surrogate, so each one left is such a byte."""
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _SURROGATE.sub("\ufffd", raw.decode("utf-8", "surrogateescape"))


def loads(document: str | bytes | bytearray, **options: Any) -> Any:
    """`json.loads(document, **options)` with Go's replacements.

    Bytes that are not UTF-8 are decoded with `surrogateescape` (see `go_text`) and parsed as
    they are, so a body that is not JSON at all fails at once rather than after a pass over
    all of it; the strings of one that is get U+FFFD for those surrogates. Python pairs valid
    surrogate escapes itself, so a surrogate left in a decoded string is a lone one or such a
    byte. The value is walked only when the text could give one: a `\\uD…` escape, or a
    surrogate character in the text."""
    if isinstance(document, bytes | bytearray):
        start = bytes(document[:64]).lstrip(_WHITESPACE)[:1]
        if start and start[0] not in _JSON_START:  # binary, say: not JSON at its first byte,
            raise json.JSONDecodeError("Expecting value", "", 0)  # as Go's scanner says
        try:
            text, raw = bytes(document).decode("utf-8"), False
        except UnicodeDecodeError:
            text, raw = bytes(document).decode("utf-8", "surrogateescape"), True
    else:
        text = document
        raw = not text.isascii() and _SURROGATE.search(text) is not None
    value = json.loads(text, **options)
    if raw or "\\ud" in text or "\\uD" in text:
        return _replace_lone_surrogates(value)
    return value


def _replace_lone_surrogates(value: Any) -> Any:
    """`value` with U+FFFD for every surrogate in its strings and keys, walked without
    recursion (a document nested ~990 levels deep, as `json.loads` allows, stays readable)."""
    if not isinstance(value, dict | list):
        return _clean(value)
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (source, target, where in it)
    while stack:
        source, target, where = stack.pop()
        if isinstance(source, dict):
            copied: Any = {}
            items = [(_clean(key), item) for key, item in source.items()]
            for key, _ in items:
                copied[key] = None
            # Filled in the order they came, so of keys that become equal the last one's value
            # stays, as in a Go map.
            stack.extend((item, copied, key) for key, item in reversed(items))
        elif isinstance(source, list):
            copied = [None] * len(source)
            stack.extend((item, copied, index) for index, item in reversed(list(enumerate(source))))
        else:
            copied = _clean(source)
        target[where] = copied
    return root[0]


def _clean(value: Any) -> Any:
    if isinstance(value, str) and not value.isascii():
        return _SURROGATE.sub("\ufffd", value)
    return value
