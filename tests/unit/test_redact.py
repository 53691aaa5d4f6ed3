"""Redaction: the Go corpus of reference notes §1.5, valid JSON after redaction, headers, values."""

from __future__ import annotations

import json

import pytest

from executor.redact import (
    REDACTED,
    is_sensitive_name,
    redact_body,
    redact_headers,
    redact_json_value,
    redact_sensitive_text,
)

# Reference notes §1.5 (core/sensitive_text_test.go), with the Go test names.
GO_CORPUS = [
    (
        "assignment",
        "request failed: api_key=top-secret status=401",
        "request failed: api_key=[REDACTED] status=401",
    ),
    ("quoted_assignment", 'api-key: "top secret"', 'api-key: "[REDACTED]"'),
    (
        "json",
        '{"error":"denied","api_key":"top-secret"}',
        '{"error":"denied","api_key":"[REDACTED]"}',
    ),
    (
        "url_query",
        "https://api.example.test/data?appid=top-secret&units=metric",
        "https://api.example.test/data?appid=[REDACTED]&units=metric",
    ),
    (
        "url_generic_key",
        "https://api.example.test/data?key=top-secret",
        "https://api.example.test/data?key=[REDACTED]",
    ),
    ("authorization", "Authorization: Bearer top-secret", "Authorization: [REDACTED]"),
    ("standalone_bearer", "upstream sent Bearer top-secret", "upstream sent Bearer [REDACTED]"),
    (
        "url_user_info",
        "redis://operator:top-secret@redis.example.test:6379",
        "redis://[REDACTED]@redis.example.test:6379",
    ),
    (
        "ordinary_prose",
        "the cache key is stable and the token count is 42",
        "the cache key is stable and the token count is 42",
    ),
]

# One row per pattern shape and name variant beyond the Go corpus.
PATTERN_CASES = [
    ("single_quoted_key", "{'password': 'hunter2'}", "{'password': '[REDACTED]'}"),
    ("json_key_with_spaces", '{"Client_Secret" : "abc"}', '{"Client_Secret" : "[REDACTED]"}'),
    ("authorization_basic", "authorization=Basic dXNlcjpwYXNz", "authorization=[REDACTED]"),
    ("authorization_quoted", "Authorization: 'Bearer abc'", "Authorization: [REDACTED]"),
    ("authorization_bare", "authorization=abc123;next", "authorization=[REDACTED];next"),
    ("unquoted_single_quoted_value", "passwd='abc'", "passwd='[REDACTED]'"),
    ("access_token_bare", "access-token: abc.def", "access-token: [REDACTED]"),
    ("secret_key_bare", "SECRET_KEY=xyz rest", "SECRET_KEY=[REDACTED] rest"),
    ("refresh_token_colon", "refresh_token:r1,", "refresh_token:[REDACTED],"),
    ("query_token", "GET /v1?token=abc#frag", "GET /v1?token=[REDACTED]#frag"),
    ("query_second_param", "/x?a=1&apikey=abc&b=2", "/x?a=1&apikey=[REDACTED]&b=2"),
    ("bearer_keeps_lower_case_word", "got bearer abc.def-ghi", "got bearer [REDACTED]"),
    ("bearer_keeps_upper_case_word", "BEARER abc", "BEARER [REDACTED]"),
    ("basic_standalone", "sent Basic dXNlcg==", "sent Basic [REDACTED]"),
    ("userinfo_user_only", "https://token@github.com/x", "https://[REDACTED]@github.com/x"),
    ("name_inside_word_not_matched", "mypassword=abc", "mypassword=abc"),
    ("plain_key_not_sensitive_outside_url", "key=abc token=def", "key=abc token=def"),
    ("authorization_word_alone", "authorization failed", "authorization failed"),
    ("email_not_userinfo", "mail bob@example.com", "mail bob@example.com"),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [case[1:] for case in GO_CORPUS + PATTERN_CASES],
    ids=[case[0] for case in GO_CORPUS + PATTERN_CASES],
)
def test_redact_sensitive_text(text: str, expected: str) -> None:
    redacted = redact_sensitive_text(text)
    assert redacted == expected
    assert "top-secret" not in redacted and "top secret" not in redacted


@pytest.mark.parametrize(
    "text",
    [case[1] for case in GO_CORPUS + PATTERN_CASES],
    ids=[case[0] for case in GO_CORPUS + PATTERN_CASES],
)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_sensitive_text(text)
    assert redact_sensitive_text(once) == once


def test_empty_stays_empty() -> None:
    assert redact_sensitive_text("") == ""


def test_provider_error_from_executor_test() -> None:
    secret = "sk-live-9f8e7d6c5b4a"
    redacted = redact_sensitive_text(
        f"component returned status 502: provider rejected api_key={secret}"
    )
    assert "api_key=[REDACTED]" in redacted
    assert secret not in redacted


# ---------------------------------------------------------------------------------------------
# JSON stays valid
# ---------------------------------------------------------------------------------------------

JSON_CASES = [
    (
        "go_preserves_json",
        '{"error":"provider rejected api_key=top-secret","api_key":"another-secret"}',
        {"error": "provider rejected api_key=[REDACTED]", "api_key": "[REDACTED]"},
    ),
    (
        "nested_objects_and_arrays",
        '{"a": {"b": [{"password": "p1"}, "Bearer t0k3n"]}, "n": 1}',
        {"a": {"b": [{"password": "[REDACTED]"}, "Bearer [REDACTED]"]}, "n": 1},
    ),
    (
        "escaped_quotes_in_value",
        r'{"api_key": "ab\"cd", "note": "say \"hi\""}',
        {"api_key": "[REDACTED]", "note": 'say "hi"'},
    ),
    (
        "authorization_with_escaped_quotes_in_string",
        r'{"h": "authorization=\"abc\""}',
        {"h": "authorization=[REDACTED]"},
    ),
    (
        "json_inside_a_json_string",
        r'{"body": "{\"password\":\"p1\",\"ok\":true}"}',
        {"body": '{"password":"[REDACTED]","ok":true}'},
    ),
    (
        "bearer_at_end_of_string",
        '{"msg":"Authorization: Bearer abc"}',
        {"msg": "Authorization: [REDACTED]"},
    ),
    (
        "url_at_end_of_string",
        '{"url":"https://x.test/?key=abc","next":"https://u:p@h.test/"}',
        {"url": "https://x.test/?key=[REDACTED]", "next": "https://[REDACTED]@h.test/"},
    ),
    (
        "quoted_value_would_pair_with_next_string",
        '{"note":"set password=","x":"y"}',
        {"note": "set password=", "x": "y"},
    ),
    (
        "non_string_secret_values",
        '{"password": 1234, "token": null, "secret": {"k": "v"}, "ok": false}',
        {"password": "[REDACTED]", "token": None, "secret": "[REDACTED]", "ok": False},
    ),
    (
        "cookie_and_credentials_keys",
        '{"cookie": "sid=1", "Credentials": ["u", "p"], "recipe": "cookies"}',
        {"cookie": "[REDACTED]", "Credentials": "[REDACTED]", "recipe": "cookies"},
    ),
    (
        "top_level_array",
        '[{"access_token": "a"}, "passwd=x"]',
        [{"access_token": "[REDACTED]"}, "passwd=[REDACTED]"],
    ),
    (
        "unicode_kept",
        '{"city": "Zürich", "password": "ü"}',
        {"city": "Zürich", "password": "[REDACTED]"},
    ),
    (
        "url_credentials_behind_escaped_slashes",
        r'{"url":"https:\/\/bob:hunter2@example.com\/x","note":"hi"}',
        {"url": "https://[REDACTED]@example.com/x", "note": "hi"},
    ),
    (
        "sensitive_key_spelled_with_unicode_escapes",
        r'{"\u0070assword":"hunter2","\u0041pi_Key":"k1"}',
        {"password": "[REDACTED]", "Api_Key": "[REDACTED]"},
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [case[1:] for case in JSON_CASES],
    ids=[case[0] for case in JSON_CASES],
)
def test_json_stays_valid(text: str, expected: object) -> None:
    redacted = redact_sensitive_text(text)
    assert json.loads(redacted) == expected
    assert redact_sensitive_text(redacted) == redacted


def test_json_formatting_outside_redacted_values_is_kept() -> None:
    text = '{\n  "user": "ann",\n  "password" :  "p1",\n  "n": 1.50\n}'
    assert (
        redact_sensitive_text(text)
        == '{\n  "user": "ann",\n  "password" :  "[REDACTED]",\n  "n": 1.50\n}'
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(r'{"url":"https:\/\/bob:hunter2@example.com\/x"', id="escaped_slashes"),
        pytest.param(r'{"\u0070assword":"hunter2"', id="unicode_escaped_key"),
        pytest.param(
            r'{"inner":"{\"url\":\"https:\\\/\\\/bob:hunter2@h.test\"}"', id="json_in_json"
        ),
        pytest.param(r'{"k":"\u0073k-proj-' + "aB3" * 14 + '"', id="unicode_escaped_shape"),
    ],
)
@pytest.mark.parametrize("padding", [0, 4096], ids=["short", "past_prefilter_size"])
def test_json_escapes_do_not_hide_a_secret_from_the_gates(body: str, padding: int) -> None:
    # The gates (hint words, the RE2 prefilter) read the text with JSON's escapes decoded.
    text = body + ',"prose":"' + "the tool call failed " * (padding // 21) + '"}'
    redacted = redact_body(text.encode()).decode()
    assert "hunter2" not in redacted and "aB3aB3" not in redacted
    assert json.loads(redacted)["prose"] == json.loads(text)["prose"]


def test_broken_json_falls_back_to_text_patterns() -> None:
    assert redact_sensitive_text('{"api_key":"abc"') == '{"api_key":"[REDACTED]"'


# ---------------------------------------------------------------------------------------------
# Names, headers, decoded values
# ---------------------------------------------------------------------------------------------

NAME_CASES = [
    ("Authorization", True),
    ("Proxy-Authorization", True),
    ("Cookie", True),
    ("Set-Cookie", True),
    ("X-Api-Key", True),
    ("Api-Key", True),
    ("X-Auth-Token", True),
    ("X-Amz-Security-Token", True),
    ("apiKey", True),
    ("APIKey", True),
    ("client_secret", True),
    ("privateKey", True),
    ("password", True),
    ("appid", True),
    # found by an outside check: custom headers with ordinary values were kept and exported
    ("X-Auth", True),
    ("X-Auth-Key", True),
    ("auth", True),
    ("auth_method", False),
    ("X-Auth-Email", False),
    ("oauth_provider", False),
    ("Content-Type", False),
    ("X-TruvaG3-Request-ID", False),
    ("max_tokens", False),
    ("total_tokens", False),
    ("key", False),
    ("keyboard", False),
    ("secretary", False),
]


@pytest.mark.parametrize(
    ("name", "sensitive"),
    NAME_CASES,
    ids=[case[0] for case in NAME_CASES],
)
def test_is_sensitive_name(name: str, sensitive: bool) -> None:
    assert is_sensitive_name(name) is sensitive


def test_redact_headers() -> None:
    headers = {
        "Authorization": "Bearer abc",
        "Proxy-Authorization": "Basic xyz",
        "Cookie": "session=1",
        "Set-Cookie": "id=2",
        "X-Api-Key": "k",
        "Api-Key": "k2",
        "X-Custom-Token": "t",
        "Content-Type": "application/json",
        "X-Debug": "called with api_key=abc",
        "Location": "https://u:p@h.test/",
    }
    assert redact_headers(headers) == {
        "Authorization": REDACTED,
        "Proxy-Authorization": REDACTED,
        "Cookie": REDACTED,
        "Set-Cookie": REDACTED,
        "X-Api-Key": REDACTED,
        "Api-Key": REDACTED,
        "X-Custom-Token": REDACTED,
        "Content-Type": "application/json",
        "X-Debug": "called with api_key=[REDACTED]",
        "Location": "https://[REDACTED]@h.test/",
    }


def test_redact_json_value_walks_and_does_not_mutate() -> None:
    value = {
        "parameters": {"city": "Paris", "apiKey": "abc", "token": None},
        "usage": {"total_tokens": 42},
        "messages": [{"role": "user", "content": "my password=hunter2"}],
        "flags": (True, 3),
    }
    original = json.loads(json.dumps(value))
    assert redact_json_value(value) == {
        "parameters": {"city": "Paris", "apiKey": REDACTED, "token": None},
        "usage": {"total_tokens": 42},
        "messages": [{"role": "user", "content": "my password=[REDACTED]"}],
        "flags": [True, 3],
    }
    assert json.loads(json.dumps(value)) == original
