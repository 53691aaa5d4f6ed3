"""The one-pass RE2 prefilter of `executor.redact`: it lets through every text a gate opens for."""

from __future__ import annotations

import random
import string

import pytest

from executor.redact import patterns, redact_body, redact_secrets, redact_sensitive_text, shapes
from executor.redact import text as redact
from tests.support.secrets import SECRET_FORMS

# Every literal a gate of `_redact_text` looks for (named patterns, secret-ish words, shapes).
GATE_WORDS = (
    "key", "appid", "token", "authorization", "secret", "passw", "passphrase", "cookie",
    "credential", "bearer", "basic", "://", "password", "passwd", "pwd", "auth", "session",
    "sid", "sig", "private", "aws", "sk-", "sk_", "rk_", "AKIA", "ASIA", "ghp_", "gho_", "ghu_",
    "ghs_", "ghr_", "github_pat_", "glpat-", "eyJ", "xox", "xapp-", "AIza", "npm_", "hf_",
    "pypi-", "PRIVATE KEY",
)  # fmt: skip


def gates_open(text: str) -> bool:
    """Whether the named or the shape gate of `_redact_text` opens (the `re` hints)."""
    lowered = patterns.ascii_lower(text)
    return (
        patterns.NAMED_HINT.search(lowered) is not None
        or shapes._SHAPE_HINT.search(text) is not None
        or shapes._SECRETISH_HINT.search(lowered) is not None
    )


def test_the_prefilter_is_re2():
    assert redact._HINT_PREFILTER is not None


@pytest.mark.parametrize("word", GATE_WORDS)
def test_every_gate_word_passes_the_prefilter_in_any_case(word):
    assert gates_open(f"prose {word} prose")
    padding = "prose " * 200  # long enough for the prefilter to be asked
    for form in (word, word.upper(), word.title(), f"prose {word} prose", f"é{word}✓"):
        form = padding + form + padding
        if gates_open(form):
            assert redact._may_need_redaction(patterns.ascii_lower(form)), form


@pytest.mark.parametrize("name", sorted(SECRET_FORMS))
def test_every_secret_form_passes_the_prefilter(name):
    text, _secret = SECRET_FORMS[name]
    assert redact._may_need_redaction(patterns.ascii_lower(text + " prose" * 300))


def test_short_texts_skip_the_prefilter_and_go_to_the_gates():
    assert redact._may_need_redaction("plain short prose")
    assert not redact._may_need_redaction("plain long prose " * 100)


def test_the_prefilter_holds_back_only_texts_no_gate_opens_for():
    rng = random.Random(12)
    alphabet = string.ascii_letters + string.digits + " _-:/=\"'{}[],.\n" + "éü✓"
    held_back = 0
    for _ in range(4_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) * 40
        if not redact._may_need_redaction(patterns.ascii_lower(text)):
            held_back += 1
            assert not gates_open(text), text
            assert redact_secrets(text) == text == redact_sensitive_text(text)
    assert held_back > 1_000  # the corpus exercises both outcomes


def test_undecodable_body_bytes_still_reach_the_gates():
    body = b"\xff\xfe password=hunter2-long-value \x80"
    assert redact_body(body) == b"\xff\xfe password=[REDACTED] \x80"
