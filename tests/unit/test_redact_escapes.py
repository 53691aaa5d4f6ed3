"""A secret spelled with JSON's escapes is redacted wherever the JSON stands in a body.

The gates read a text with its `\\/` and ASCII `\\uXXXX` escapes decoded; once one opens, the
secret must also be found: in one JSON document token by token, and outside one (SSE `data:`
lines, NDJSON, a truncated document, a top-level string) in each escaped string token.
Each named case is a secret form of the redaction corpus, spelled plainly and then hidden.
"""

from __future__ import annotations

import json

import pytest

from executor.redact import redact_secrets
from executor.redact.text import redact_body
from store.bundle import redact_row

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
OPENAI_KEY = "sk-proj-" + "aB3xY9kQ" * 5

# name -> (plain text holding a secret, the secret, the word whose first letter is \u-escaped)
SECRETS = {
    "assignment": ("request failed: api_key=top-secret status=401", "top-secret", "api_key"),
    "quoted_assignment": ('api-key: "top secret"', "top secret", "api-key"),
    "url_query": ("https://api.example.test/data?appid=top-secret&u=1", "top-secret", "appid"),
    "authorization": ("Authorization: Bearer top-secret", "top-secret", "Authorization"),
    "standalone_bearer": ("upstream sent Bearer top-secret", "top-secret", "Bearer"),
    "url_user_info": ("redis://operator:top-secret@redis.example.test:6379", "top-secret",
                      "redis"),
    "password": ("password=hunter2", "hunter2", "password"),
    "openai_key": (f"key is {OPENAI_KEY}", OPENAI_KEY[8:], "sk"),
    "jwt": (f"id {JWT}", JWT[40:], "eyJ"),
    "aws_key_id": ("id AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE", "AKIA"),
}  # fmt: skip


def _escaped_string(text: str, word: str | None) -> str:
    """`text` as a JSON string with `/` escaped, and `word`'s first letter as a \\u escape."""
    token = json.dumps(text).replace("/", "\\/")
    if word is None or word not in token:
        return token
    at = token.index(word)
    return f"{token[:at]}\\u{ord(word[0]):04x}{token[at + 1 :]}"


# spelling -> a body holding the JSON string token, at each `@`
SPELLINGS = {
    "json_document": '{"msg":@}',
    "top_level_string": "@",
    "sse_data_line": 'data: {"msg":@}\n\n',
    "ndjson": '{"msg":@}\n{"n":2,"msg":@}\n',
    "truncated_document": '{"msg":@,"more":"...',
    "jsonp": 'cb({"msg":@})',
    "byte_order_mark": '\ufeff{"msg":@}',
    "sse_inside_a_json_string": json.dumps({"log": 'data: {"msg":@}'}),
}


def _exported(body: str) -> str:
    data = body.encode()
    row = redact_row("attempts", {"response_body": data, "response_size": len(data)})
    return row["response_body"].decode()


@pytest.mark.parametrize("escape", ["slashes", "unicode"])
@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("case", SECRETS)
def test_an_escaped_secret_is_redacted_in_any_json_context(
    case: str, spelling: str, escape: str
) -> None:
    text, secret, word = SECRETS[case]
    token = _escaped_string(text, word if escape == "unicode" else None)
    if spelling == "sse_inside_a_json_string":  # the token is itself inside a JSON string
        token = json.dumps(token)[1:-1]
    body = SPELLINGS[spelling].replace("@", token)
    exported = _exported(body)
    assert secret not in exported and secret.replace("/", "\\/") not in exported
    assert "[REDACTED]" in exported


def test_the_bytes_around_an_escaped_secret_are_kept() -> None:
    body = 'event: m\ndata: {"u":"https:\\/\\/bob:hunter2@h.test\\/x","n":1}\n\ndata: [DONE]\n\n'
    exported = _exported(body)
    assert exported == (
        'event: m\ndata: {"u":"https://[REDACTED]@h.test/x","n":1}\n\ndata: [DONE]\n\n'
    )
    assert json.loads(exported.split("data: ")[1]) == {"u": "https://[REDACTED]@h.test/x", "n": 1}


@pytest.mark.parametrize(
    ("body", "secret"),
    [
        pytest.param('data: {"\\u0070assword":"hunter2"}\n', "hunter2", id="sse_escaped_key"),
        pytest.param('{"\\u0061pi_key": 123456, "x":"...', "123456", id="truncated_number_value"),
        pytest.param(
            '{"w":"{\\"\\u005cu0070assword\\":\\"hunter2\\"}"}', "hunter2",
            id="backslash_escaped_as_u005c_in_json_in_json",
        ),
        pytest.param(
            'cb({"\\u0073k-proj-' + "aB3" * 14 + '":1})', "aB3aB3", id="jsonp_shape_in_a_key"
        ),
        pytest.param(
            '"https:\\/\\/h.test\\/?a=1\\u0026api_key=hunter2"', "hunter2",
            id="go_escaped_ampersand_in_a_top_level_string",
        ),
    ],
)  # fmt: skip
def test_escaped_keys_and_nested_escapes(body: str, secret: str) -> None:
    assert secret not in _exported(body)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param('data: {"note":"caf\\u00e9 \\ud83d\\ude00 ok"}\n', id="non_ascii_escapes"),
        pytest.param('log "\\x" and "\\u12" stay', id="tokens_that_do_not_decode"),
        pytest.param('data: {"path":"a\\/b","say":"\\"hi\\""}\n', id="escapes_without_secrets"),
        pytest.param('an "unterminated \\u0070 string', id="unterminated_string"),
    ],
)
def test_escaped_text_without_a_secret_is_kept_byte_for_byte(body: str) -> None:
    assert _exported(body) == body


RANDOM = "aB3xY9kQ7mN2pL5vW8zT"


@pytest.mark.parametrize(
    ("body", "secret"),
    [
        pytest.param('{"msg":"see https:\\/\\/bob:hunter2@h.test\\/x and then the recor', "hunter2",
                     id="cut_inside_the_string_with_the_secret"),
        pytest.param('data: {"msg":"\\u0070assword=hunter2 and the rest was cut', "hunter2",
                     id="sse_cut_inside_an_escaped_word"),
        pytest.param('C:\\> cd "C:\\Program Files\\"\ndata: {"pass\\u0077ord":"hunter2"}\n\n',
                     "hunter2", id="a_stray_quote_before_an_sse_line"),
        pytest.param('C:\\> cd "C:\\Dir\\"\n{"u":"https:\\/\\/bob:hunter2@h.test"} trailing',
                     "hunter2", id="a_stray_quote_before_a_cut_line"),
        pytest.param(f'data: {{"s\\u0065ssion_id":"{RANDOM}"}}\n\n', RANDOM,
                     id="escaped_secretish_key_random_value"),
        pytest.param('data: {"cred\\u0065ntials":{"user":"bob","pass":"hunter2"}}\n\n', "hunter2",
                     id="escaped_sensitive_key_object_value"),
        pytest.param('data: {"pass\\u0077ord":["hunter2"]}\n\n', "hunter2",
                     id="escaped_sensitive_key_array_value"),
        pytest.param('data: {"secret":"hunter2"}\n\ndata: {"passphrase":"hunter2"}\n\n', "hunter2",
                     id="plain_sensitive_keys_in_sse"),
        pytest.param('{"cookie":"hunter2"}\n{"private_key":"hunter2"}\n', "hunter2",
                     id="plain_sensitive_keys_in_ndjson"),
        pytest.param('data: {"m":"col1\tcol2 https:\\/\\/bob:hunter2@h.test\\/x"}\n\n', "hunter2",
                     id="a_raw_tab_in_the_string"),
        pytest.param('cb({"a":{"cookie":["hunter2"]},"b":{"passphrase":"hunter2"}});', "hunter2",
                     id="jsonp_plain_keys_nested"),
        pytest.param('cb({"a":1},{"cookie": ["x", "hunter2"], "password": [null, true, 2]});',
                     "hunter2", id="jsonp_two_arguments_array_values"),
        pytest.param('{"a":{"passphrase":"hunter2","more":"cut', "hunter2",
                     id="truncated_document_plain_key"),
        pytest.param(f'x = {{"session_token": "{RANDOM}", "n": 1', RANDOM,
                     id="truncated_document_secretish_key"),
    ],
)  # fmt: skip
def test_escaped_or_streamed_secrets_found_past_the_string_tokens(body: str, secret: str) -> None:
    assert secret not in _exported(body)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(b'data: {"m":"\\udc80 password=hunter2"}\n\n',
                     b'data: {"m":"\\udc80 password=[REDACTED]"}\n\n',
                     id="a_lone_surrogate_escape_stays_an_escape"),
        pytest.param(b'\xff\xfe\ndata: {"m":"\\ud800 password=hunter2"}\n\n',
                     b'\xff\xfe\ndata: {"m":"\\ud800 password=[REDACTED]"}\n\n',
                     id="undecodable_bytes_elsewhere_kept"),
        pytest.param(b'{"m":"caf\xc3\xa9 \xff password=hunter2"}',
                     b'{"m":"caf\xc3\xa9 \xff password=[REDACTED]"}',
                     id="an_undecodable_byte_in_the_redacted_string_kept"),
    ],
)  # fmt: skip
def test_a_redacted_body_keeps_its_other_bytes(body: bytes, expected: bytes) -> None:
    assert redact_body(body) == expected


def _nested_strings(levels: int, inner: str = "key") -> str:
    """`inner` inside `levels` JSON strings, each writing `\\` and `"` as `\\u005c`, `\\u0022`."""
    text = json.dumps(inner)
    for _ in range(levels):
        text = '"' + text.replace("\\", "\\u005c").replace('"', "\\u0022") + '"'
    return text


@pytest.mark.parametrize("levels", [3, 16, 17, 40, 332])
@pytest.mark.parametrize("inner", ["key", "password=hunter2"])
def test_json_nested_deep_in_strings_is_redacted_without_failing_or_growing(
    levels: int, inner: str
) -> None:
    # 332 levels (553 KB) raised RecursionError out of the export; written back with json's
    # `\\\\` at each level, 2 KB nested 20 deep grew to 262 KB.
    text = _nested_strings(levels, inner)
    redacted = redact_secrets(text)
    assert "hunter2" not in redacted
    assert len(redacted) <= 2 * len(text) + 64
    if inner == "key" and levels <= 16:
        assert redacted == text  # nothing to redact
