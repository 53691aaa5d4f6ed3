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

import codecs
import json
import re
from typing import Any

_ERRORS = "truvag3-go-replace"


def _one_replacement_per_byte(error: UnicodeError) -> tuple[str, int]:
    """Go's `utf8.DecodeRune` rejects a bad sequence one byte at a time: U+FFFD for each."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "\ufffd", error.start + 1


codecs.register_error(_ERRORS, _one_replacement_per_byte)

_SURROGATE = re.compile("[\ud800-\udfff]")


def go_text(data: bytes | bytearray | memoryview) -> str:
    """`data` as UTF-8, each byte that does not decode replaced by U+FFFD, as Go reads it."""
    return bytes(data).decode("utf-8", _ERRORS)


def loads(document: str | bytes | bytearray, **options: Any) -> Any:
    """`json.loads(document, **options)` with Go's replacements (bytes are read by `go_text`).

    Python pairs valid surrogate escapes itself, so a surrogate left in a decoded string is a
    lone one. The value is walked only when the text could give one: a `\\uD…` escape, or a
    surrogate character in text given as `str` (UTF-8 bytes cannot hold one)."""
    if isinstance(document, bytes | bytearray):
        text, raw = go_text(document), False
    else:
        text = document
        raw = not text.isascii() and _SURROGATE.search(text) is not None
    value = json.loads(text, **options)
    if raw or "\\ud" in text or "\\uD" in text:
        return _replace_lone_surrogates(value)
    return value


def _replace_lone_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if not value.isascii() else value
    if isinstance(value, dict):
        # Keys that become equal keep the last value, as a Go map does.
        return {
            _replace_lone_surrogates(key): _replace_lone_surrogates(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_replace_lone_surrogates(item) for item in value]
    return value
