"""Redaction time grows linearly with hostile input: hex, letters, `a://` runs, deep JSON…

Each case is timed at n and 8·n side by side (interleaved, best of three, in the calling
thread's CPU seconds); a quadratic pattern shows a ratio near 64, a linear one near 8. The bound
is 24. The last tests bound multi-MB calls absolutely.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from executor.redact import redact_secrets, redact_sensitive_text
from store.bundle import redact_row

# Each case judges CPU-time ratios or bounds (a second worker on the other core shares caches and
# memory bandwidth with it).
pytestmark = pytest.mark.serial

HEX = "0123456789abcdef"


def _hex(n: int) -> str:
    return (HEX * (n // len(HEX) + 1))[:n]


def _nested_strings(levels: int) -> str:
    """`"key"` inside `levels` JSON strings, each writing `\\` and `"` as `\\u005c`, `\\u0022`."""
    text = '"key"'
    for _ in range(levels):
        text = '"' + text.replace("\\", "\\u005c").replace('"', "\\u0022") + '"'
    return text


# name → a hostile text of about n characters.
HOSTILE: dict[str, Callable[[int], str]] = {
    "hex_after_a_hint": lambda n: "token " + _hex(n),
    "letters_after_a_hint": lambda n: "token " + "a" * n,
    "error_text_of_a_200_with_a_hex_dump": lambda n: "component returned status 200: "
    + json.dumps({"data": {"next_token": "t1", "sha_dump": _hex(n)}}),
    "scheme_runs": lambda n: "a://" * (n // 4),
    "scheme_then_colons": lambda n: "token a://" + "a:" * (n // 2),
    "digits_before_scheme": lambda n: "1" * n + "a://u@h",
    "deep_json_arrays": lambda n: "[" * (n // 2) + "]" * (n // 2),
    "deep_json_objects": lambda n: '{"a":' * (n // 5) + "1" + "}" * (n // 5),
    "json_strings_with_urls": lambda n: json.dumps(
        [{"token_count": i, "u": "b://c@d"} for i in range(n // 40)]
    ),
    "open_quoted_values": lambda n: '"password":"' * (n // 12),
    "backslashes_in_a_value": lambda n: '"api_key":"' + "\\" * n,
    "escaped_slashes": lambda n: "https:" + "\\/" * (n // 2),
    "backslash_runs_before_a_u": lambda n: ("\\" * 99 + "u") * (n // 100),
    "escaped_key_colons": lambda n: '"\\u0070assword":' * (n // 17),
    "escaped_keys_before_open_strings": lambda n: 'x"\\u0070assword":"' * (n // 19),
    "escaped_keys_before_open_arrays": lambda n: '"\\u0070assword":[' * (n // 18),
    "sse_lines_with_escapes": lambda n: 'data: {"u":"https:\\/\\/b:c@d"}\n' * (n // 32),
    "json_strings_nested_in_strings": lambda n: _nested_strings(int((n / 5) ** 0.5)),
    "sensitive_keys_before_open_arrays": lambda n: '"password":["a",1,' * (n // 18),
    "sse_lines_of_json_with_keys": lambda n: 'data: {"secret":"a","u":[1,2]}\n\n' * (n // 34),
    "bearer_words": lambda n: "Bearer " * (n // 7),
    "authorization_then_spaces": lambda n: "authorization" + " " * n,
    "key_words": lambda n: "key" * (n // 3),
    "token_assignments": lambda n: "token=" * (n // 6),
    "jwt_prefixes": lambda n: "eyJ" * (n // 3),
    "openai_prefixes": lambda n: "sk-" * (n // 3),
    "aws_prefixes": lambda n: "AKIA" * (n // 4),
    "pem_begin_lines": lambda n: "-----BEGIN RSA PRIVATE KEY-----\n" * (n // 32),
    "pem_without_end": lambda n: "-----BEGIN PRIVATE KEY-----" + "A" * n,
    # Found quadratic by review (48 KB: 9.4 s, 1.1 GB): a cookie header's line read per header.
    "cookie_headers_on_one_line": lambda n: "cookie: a=b;" * (n // 12),
    "cookie_header_lines": lambda n: "Cookie: a=b\n" * (n // 12),
    "authorization_schemes": lambda n: "Authorization: Token abc123456789 " * (n // 34),
    "signed_url_parameters": lambda n: "?sig=abc&X-Amz-Signature=def" * (n // 28),
}

SMALL = 125_000
FACTOR = 8


def _seconds(function: Callable[[str], object], text: str) -> float:
    """CPU seconds of this thread in `function(text)`: other processes on the machine and the
    suite's other threads do not count (wall-clock ratios reached 24.8 at load 5 on linear code)."""
    started = time.thread_time()
    function(text)
    return time.thread_time() - started


def _assert_linear(function: Callable[[str], object], build: Callable[[int], str]) -> None:
    small, large = build(SMALL), build(FACTOR * SMALL)
    small_s = large_s = float("inf")
    for _ in range(3):  # interleaved, so a busy spell slows both sizes alike
        small_s = min(small_s, _seconds(function, small))
        large_s = min(large_s, _seconds(function, large))
    ratio = large_s / max(small_s, 0.005)  # below 5 ms: cache and timer noise
    assert ratio < 3 * FACTOR, f"{FACTOR}x input took {ratio:.1f}x the time"


@pytest.mark.parametrize("build", HOSTILE.values(), ids=HOSTILE.keys())
def test_name_patterns_are_linear(build: Callable[[int], str]) -> None:
    _assert_linear(redact_sensitive_text, build)


@pytest.mark.parametrize("build", HOSTILE.values(), ids=HOSTILE.keys())
def test_name_and_shape_patterns_are_linear(build: Callable[[int], str]) -> None:
    _assert_linear(redact_secrets, build)


@pytest.mark.parametrize(
    "name", ["letters_after_a_hint", "json_strings_with_urls", "scheme_runs"]
)
def test_export_of_a_hostile_response_body_is_linear(name: str) -> None:
    def export_row(text: str) -> object:
        body = text.encode()
        return redact_row("attempts", {"response_body": body, "response_size": len(body)})

    _assert_linear(export_row, HOSTILE[name])


@pytest.mark.parametrize(
    "name",
    ["hex_after_a_hint", "letters_after_a_hint", "error_text_of_a_200_with_a_hex_dump",
     "scheme_runs", "deep_json_arrays"],
)  # fmt: skip
def test_five_megabytes_redact_within_a_generous_bound(name: str) -> None:
    # Before the patterns were linear, 40 KB of letters took 16 s and 80 KB 70 s.
    text = HOSTILE[name](5_000_000)
    started = time.thread_time()
    redact_secrets(text)
    assert time.thread_time() - started < 10.0
