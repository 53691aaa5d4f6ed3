"""Sensitive names: which JSON keys and header names name a credential."""

from __future__ import annotations

import functools
import itertools
import re

from executor.redact.shapes import SECRETISH_WORDS

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
        "pwd",
        "secret",
    }
)
_SENSITIVE_WORD_PAIRS = frozenset(
    {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("auth", "key")}
)
# A last word that names the credential itself: `access_token`, a custom `X-Auth` header.
_SENSITIVE_LAST_WORDS = frozenset({"token", "auth"})


def _name_words(name: str) -> list[str]:
    return [word for word in _NAME_SEPARATOR.split(_CAMEL_BOUNDARY.sub("_", name).lower()) if word]


@functools.lru_cache(maxsize=4096)
def is_sensitive_name(name: str) -> bool:
    """Whether a JSON key or header name names a credential (`api_key`, `X-Auth-Token`, `Cookie`).

    The name is split into words (separators and camelCase); it is sensitive when a word is one
    of secret, password, passwd, pwd, passphrase, apikey, appid, authorization, cookie,
    credential(s), when its last word is token or auth (`access_token`, `X-Auth`; not
    `token_count`, `auth_method`), or when two adjacent words are api/access/private/secret/auth
    + key (`X-Auth-Key`). Plurals such as `max_tokens` are not sensitive.
    """
    words = _name_words(name)
    if any(word in _SENSITIVE_WORDS for word in words) or (
        words and words[-1] in _SENSITIVE_LAST_WORDS
    ):
        return True
    return any(pair in _SENSITIVE_WORD_PAIRS for pair in itertools.pairwise(words))


@functools.lru_cache(maxsize=4096)
def is_secretish_name(name: str) -> bool:
    """Whether a random-looking value under this key or header name is taken for a secret
    (`aws`, `session_id`, `X-Signature`); broader than `is_sensitive_name`."""
    return any(word in SECRETISH_WORDS for word in _name_words(name))
