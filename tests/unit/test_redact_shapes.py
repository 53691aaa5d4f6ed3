"""The redaction policy beyond Go's patterns: credential shapes found by value, names that are
not credentials (`token_count`), and what each level (AT_REST, EXPORT) redacts where."""

from __future__ import annotations

import json

import pytest

from executor.redact import (
    REDACTED,
    Place,
    RedactionLevel,
    is_sensitive_name,
    looks_random,
    redact,
    redact_headers,
    redact_json_value,
    redact_secrets,
    redact_sensitive_text,
)
from tests.support.secrets import SECRET_FORMS, random_chars


@pytest.mark.parametrize(("text", "secret"), SECRET_FORMS.values(), ids=SECRET_FORMS.keys())
def test_each_credential_shape_is_redacted_in_text(text: str, secret: str) -> None:
    redacted = redact_secrets(f"debug: {text} (end)")
    assert secret not in redacted
    assert REDACTED in redacted
    assert redacted.startswith("debug: ") and redacted.endswith(" (end)")
    assert redact_secrets(redacted) == redacted


@pytest.mark.parametrize(("text", "secret"), SECRET_FORMS.values(), ids=SECRET_FORMS.keys())
def test_each_credential_shape_is_redacted_under_an_innocent_json_key(
    text: str, secret: str
) -> None:
    document = json.dumps({"note": text, "nested": [{"aws": text}], "n": 1})
    redacted = redact_secrets(document)
    assert secret not in redacted
    assert json.loads(redacted)["n"] == 1
    assert secret not in json.dumps(redact_json_value(json.loads(document)))


@pytest.mark.parametrize(("text", "secret"), SECRET_FORMS.values(), ids=SECRET_FORMS.keys())
def test_each_credential_shape_is_redacted_in_a_custom_header(text: str, secret: str) -> None:
    if "\n" in text:
        pytest.skip("a header value holds no line break")
    redacted = redact_headers({"X-Debug": text, "X-Note": f"see {text}"})
    assert secret not in json.dumps(redacted)


# Values that look like data, not secrets, and stay as they are.
KEPT = [
    ("short_token_value", "token=abc123"),
    ("lower_case_words", "key=application_default_settings"),
    ("digits_only", "session=12345678901234567890"),
    ("timestamp", "session: 2024-01-01T00:00:00Z"),
    ("sk_word", "ask-me-anything is a sk-short name"),
    ("akia_too_short", "AKIA1234"),
    ("git_sha_in_prose", "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it"),
    ("uuid_request_id", "request 123e4567-e89b-12d3-a456-426614174000 failed"),
    ("monkey_is_not_key", "monkey=" + "Ab1" * 8),
    ("npm_script_name", "run npm_config_cache_dir_for_the_build_step_of_app first"),
    ("shelf_hf_in_a_word", "shelf_hfLifeOfTheProductInDaysAndMonths12 is a column"),
    ("cookie_in_prose", "the cookie: none were set, see the cookie policy"),
    ("signature_in_prose", "the signature=valid check passed"),
    ("discord_in_prose", "join our discord server at discord.com/invite/abc"),
    ("slack_hooks_docs", "see https://api.slack.com/messaging/webhooks for hooks"),
]


@pytest.mark.parametrize("text", [case[1] for case in KEPT], ids=[case[0] for case in KEPT])
def test_values_that_are_not_credentials_are_kept(text: str) -> None:
    assert redact_secrets(text) == text


def test_go_patterns_alone_do_not_look_for_shapes() -> None:
    # The executor's error texts and prompts use Go's nine patterns exactly (reference §1.5).
    text, _ = SECRET_FORMS["openai_sk"]
    assert redact_sensitive_text(f"note {text}") == f"note {text}"


def test_looks_random() -> None:
    assert looks_random(random_chars(20))
    assert looks_random("9f86d081884c7d659a2feaa0c55ad015")
    assert not looks_random("aaaaaaaaaaaaaaaaaaaaaaaa")
    assert not looks_random("application_settings")
    assert not looks_random("Ab1" * 3)


# ------------------------------------------------------------------------ names (issue 7 #13)

TOKEN_COUNT_KEYS = [
    "token_count",
    "tokens_used",
    "max_tokens",
    "prompt_tokens",
    "token_type",
    "token_limit",
    "tokenCount",
    "refresh_token_expires_in",
]


@pytest.mark.parametrize("key", TOKEN_COUNT_KEYS)
def test_token_counting_keys_are_not_credentials(key: str) -> None:
    assert is_sensitive_name(key) is False
    document = json.dumps({key: 42, "usage": {key: "Bearer"}})
    assert redact_sensitive_text(document) == document
    assert redact_secrets(document) == document
    assert redact_json_value({key: 42}) == {key: 42}
    assert redact_headers({f"X-{key}": "12"}) == {f"X-{key}": "12"}


@pytest.mark.parametrize("key", ["token", "access_token", "next_token", "X-Auth-Token", "idToken"])
def test_a_name_ending_in_token_is_a_credential(key: str) -> None:
    assert is_sensitive_name(key) is True
    assert json.loads(redact_sensitive_text(json.dumps({key: "t1"}))) == {key: REDACTED}


# ------------------------------------------------------------------------ levels and places

BODY = json.dumps({"note": SECRET_FORMS["openai_sk"][0]}).encode()


@pytest.mark.parametrize(
    ("place", "value"),
    [
        (Place.BODY, BODY),
        (Place.TEXT, "query with " + SECRET_FORMS["github_classic"][0]),
        (Place.JSON, {"note": SECRET_FORMS["jwt"][0]}),
    ],
    ids=["body", "text", "json"],
)
def test_at_rest_keeps_bodies_texts_and_values_export_redacts_them(place: Place, value) -> None:
    assert redact(RedactionLevel.AT_REST, place, value) == value
    assert redact(RedactionLevel.EXPORT, place, value) != value


@pytest.mark.parametrize("level", list(RedactionLevel))
def test_both_levels_redact_headers_urls_and_error_texts(level: RedactionLevel) -> None:
    stripe, _ = SECRET_FORMS["stripe_secret"]
    debug = f"token={random_chars(40, '0123456789abcdef')}"
    headers = redact(level, Place.HEADERS, {"X-Debug": debug, "X-Key-Id": stripe})
    assert headers == {"X-Debug": f"token={REDACTED}", "X-Key-Id": REDACTED}
    url = redact(level, Place.URL, f"https://h.test/v1?note={stripe}")
    assert url == f"https://h.test/v1?note={REDACTED}"
    error = redact(level, Place.ERROR_TEXT, f"component returned status 401: bad key {stripe}")
    assert error == f"component returned status 401: bad key {REDACTED}"


def test_plan_at_rest_redacts_credentials_only_and_export_redacts_the_query() -> None:
    github, _ = SECRET_FORMS["github_classic"]
    plan = {
        "query": f"use {github}",
        "tools": {"t": {"base_url": "https://u:p@h.test", "headers": {"X-Note": github}}},
        "capabilities": {"t.c": {"path": "/c", "schema": {"properties": {"password": {}}}}},
        "steps": [{"id": "s", "parameters": {"note": github}}],
    }
    at_rest = redact(RedactionLevel.AT_REST, Place.PLAN, plan)
    assert at_rest["tools"]["t"] == {
        "base_url": "https://[REDACTED]@h.test",
        "headers": {"X-Note": REDACTED},
    }
    assert at_rest["query"] == plan["query"] and at_rest["steps"] == plan["steps"]
    exported = redact(RedactionLevel.EXPORT, Place.PLAN, plan)
    assert github not in json.dumps(exported)
    assert exported["capabilities"]["t.c"]["schema"] == {"properties": {"password": {}}}


def _leaves(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path, value


def test_plan_export_redacts_everything_the_at_rest_level_does() -> None:
    github, _ = SECRET_FORMS["github_classic"]
    session = random_chars(40, "0123456789abcdef")
    plan = {
        "query": "q",
        "tools": {"t": {"base_url": f"https://h.test/?key={github}",
                        "headers": {"X-Session": session, "Authorization": "Basic dTpw"}}},
        "capabilities": {"t.c": {"path": f"/c?api_key={github}", "schema": {"type": "object"}}},
        "llm": {"base_url": "https://u:p@llm.test/v1", "api_key": "sk-plain"},
        "steps": [],
    }  # fmt: skip
    at_rest = dict(_leaves(redact(RedactionLevel.AT_REST, Place.PLAN, plan)))
    exported = dict(_leaves(redact(RedactionLevel.EXPORT, Place.PLAN, plan)))
    changed_at_rest = [path for path, value in _leaves(plan) if at_rest[path] != value]
    assert len(changed_at_rest) == 6
    assert [path for path in changed_at_rest if exported[path] != at_rest[path]] == []


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("digest_parameters_keep_their_names",
     'Authorization: Digest username="Mufasa", realm="x"',
     'Authorization: [REDACTED] username="Mufasa", realm="x"'),
    ("a_set_cookie_keeps_its_attributes",
     "Set-Cookie: id=a3fWa9X2kLq81bZp; Expires=Thu, 21 Oct 2031 07:28:00 GMT; Secure",
     "Set-Cookie: id=[REDACTED]; Expires=Thu, 21 Oct 2031 07:28:00 GMT; Secure"),
    ("every_cookie_of_a_cookie_header", "Cookie: a=1; b=2\nnext line",
     "Cookie: a=[REDACTED]; b=[REDACTED]\nnext line"),
    ("a_custom_scheme_and_its_credential", "Proxy-Authorization: Negotiate YIIabc123==",
     "Proxy-Authorization: [REDACTED] [REDACTED]"),
])
def test_credentials_written_out_as_headers_keep_what_is_not_secret(
    name: str, text: str, expected: str
) -> None:
    assert redact_secrets(text) == expected
