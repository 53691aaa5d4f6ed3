"""Properties of the tool wire parsers over generated statuses, bodies and Retry-After values."""

from __future__ import annotations

import math
import time
from email.utils import parsedate_to_datetime
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from executor.wire import (
    LONGEST_WAIT_MS,
    ErrorCategory,
    RetryPolicy,
    ToolResponse,
    UpstreamErrorInfo,
    WireEnvelope,
    classify_upstream_error,
    parse_envelope,
    parse_retry_after_detail,
    parse_retry_after_header,
    parse_retry_policy,
)
from tests.property.strategies import (
    NOW,
    envelope_bodies,
    examples,
    hostile_bodies,
    http_dates,
    retry_after_details,
    retry_after_headers,
)


def expected_policy(envelope: Any) -> RetryPolicy:
    """SPEC §2.1 read literally: success is JSON false, error an object, retryable a boolean."""
    if not isinstance(envelope, dict) or envelope.get("success") is not False:
        return RetryPolicy.UNSPECIFIED
    error = envelope.get("error")
    if not isinstance(error, dict):
        return RetryPolicy.UNSPECIFIED
    if error.get("retryable") is True:
        return RetryPolicy.EXPLICIT_TRUE
    if error.get("retryable") is False:
        return RetryPolicy.EXPLICIT_FALSE
    return RetryPolicy.UNSPECIFIED


def assert_well_formed(envelope: WireEnvelope) -> None:
    assert isinstance(envelope.retry_policy, RetryPolicy)
    assert envelope.success is None or isinstance(envelope.success, bool)
    for text in (envelope.error_code, envelope.error_message, envelope.error_category):
        assert text is None or isinstance(text, str)
    assert envelope.error_object is None or isinstance(envelope.error_object, dict)
    assert envelope.is_object == isinstance(envelope.json_value, dict)
    assert "\n" not in envelope.error_text and "\r" not in envelope.error_text
    if envelope.retry_after_detail_ms is not None:
        assert math.isfinite(envelope.retry_after_detail_ms)
        assert envelope.retry_after_detail_ms >= 0


@settings(max_examples=examples(1500))
@given(body=hostile_bodies())
@example(body=b'{"success":false,"error":{"details":{"retry_after":1' + b"0" * 400 + b"}}}")
@example(body=b'{"success":false,"error":{"retryable":false},"n":' + b"9" * 5000 + b"}")
def test_parse_envelope_never_raises_on_hostile_bodies(body: bytes) -> None:
    envelope = parse_envelope(body)
    assert_well_formed(envelope)
    assert envelope.retry_policy is parse_retry_policy(body)
    assert parse_envelope(body.decode("utf-8", errors="replace")).is_json in (True, False)
    response = ToolResponse.from_json(body)
    assert response is None or isinstance(response.success, bool)


@settings(max_examples=examples(1500))
@given(pair=envelope_bodies())
def test_retry_policy_is_read_only_from_a_false_success_and_an_object_error(
    pair: tuple[dict[str, Any], bytes],
) -> None:
    envelope, body = pair
    parsed = parse_envelope(body)
    assert_well_formed(parsed)
    assert parsed.retry_policy is expected_policy(envelope)
    assert parse_retry_policy(body) is expected_policy(envelope)
    assert parse_retry_policy(body.decode("utf-8")) is expected_policy(envelope)
    success = envelope.get("success")
    assert parsed.success == (success if isinstance(success, bool) else None)
    error = envelope.get("error")
    assert (parsed.error_object is not None) == isinstance(error, dict)
    # The lenient Go-style decoder agrees on the one boolean that matters.
    response = ToolResponse.from_json(body)
    if not isinstance(success, bool):
        assert response is None
    else:
        assert response is not None and response.success is success
        if isinstance(error, dict):
            assert response.error is not None
            assert response.error.retryable is (error.get("retryable") is True)


@settings(max_examples=examples(1500))
@given(value=retry_after_headers)
@example(value="9" * 400)
@example(value="-1")
@example(value="Fri, 31 Dec 9999 23:59:59 GMT")
def test_retry_after_header_is_none_or_a_finite_non_negative_wait(value: str) -> None:
    waited = parse_retry_after_header(value, now=NOW)
    assert waited is None or (math.isfinite(waited) and waited >= 0)
    text = value.strip()
    if text.isascii() and text.isdigit():
        # delta-seconds; a wait too long for a float is the longest one, never ignored.
        expected = float(text) * 1000.0
        assert waited == (pytest.approx(expected) if math.isfinite(expected) else LONGEST_WAIT_MS)
    if text.startswith("-") and text[1:].isdigit() and int(text[1:]) > 0:
        assert waited is None
    if not text:
        assert waited is None


@settings(max_examples=examples(500))
@given(date=http_dates())
def test_retry_after_http_date_waits_until_that_moment_and_never_a_negative_time(
    date: str,
) -> None:
    waited = parse_retry_after_header(date, now=NOW)
    assert waited is not None
    expected = max(0.0, (parsedate_to_datetime(date).timestamp() - NOW) * 1000.0)
    assert waited == pytest.approx(expected, abs=1.0)


@settings(max_examples=examples(800))
@given(value=retry_after_details)
@example(value=10**400)
@example(value=-(10**400))
@example(value=float("nan"))
def test_retry_after_detail_is_none_or_a_finite_non_negative_wait(value: Any) -> None:
    waited = parse_retry_after_detail(value)
    assert waited is None or (math.isfinite(waited) and waited >= 0)
    if isinstance(value, bool) or value is None:
        assert waited is None
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        assert waited is None
    if isinstance(value, int) and not isinstance(value, bool) and value > 10**306:
        assert waited == LONGEST_WAIT_MS  # a wait too long for a float is not ignored


@settings(max_examples=examples(800))
@given(text=st.one_of(st.none(), st.text(max_size=80),
                      st.builds(lambda word, sep, code: f"{word}{sep}{code}",
                                st.sampled_from(["status", "error", "code", "Status"]),
                                st.sampled_from([":", " ", ": ", "\t", "\v", "-", ":\n"]),
                                st.integers(0, 1200).map(str))))
def test_classify_upstream_error_always_answers_a_known_category(text: str | None) -> None:
    info = classify_upstream_error(text)
    assert isinstance(info, UpstreamErrorInfo)
    assert info.category in set(ErrorCategory)
    assert info.retryable is (info.category in {ErrorCategory.RATE_LIMIT,
                                                ErrorCategory.SERVICE_ERROR})
    assert info.http_status in {400, 401, 403, 429, 502}


# --- named regressions found by the fuzzer -------------------------------------------------------

FOUND_BODIES = [
    pytest.param(b'{"success":false,"error":{"details":{"retry_after":1' + b"0" * 400 + b"}}}",
                 RetryPolicy.UNSPECIFIED, LONGEST_WAIT_MS,
                 id="retry_after_detail_beyond_float_range"),
    pytest.param(b'{"success":false,"error":{"retryable":false},"n":' + b"9" * 5000 + b"}",
                 RetryPolicy.EXPLICIT_FALSE, None, id="integer_longer_than_4300_digits"),
    pytest.param(b'{"success":false,"error":{"retryable":true,"details":{"retry_after":'
                 + b"2" + b"0" * 4999 + b'}}}',
                 RetryPolicy.EXPLICIT_TRUE, LONGEST_WAIT_MS,
                 id="retry_after_detail_of_5000_digits"),
]


@pytest.mark.parametrize(("body", "policy", "detail_ms"), FOUND_BODIES)
def test_found_bodies_parse_without_raising(body: bytes, policy: RetryPolicy,
                                            detail_ms: float | None) -> None:
    envelope = parse_envelope(body)
    assert envelope.retry_policy is policy
    assert envelope.retry_after_detail_ms == detail_ms


@pytest.mark.serial  # a bound on wall-clock seconds
@pytest.mark.parametrize("unit", [" ", "\t", " \t", "\r\n", "a \n"], ids=repr)
def test_one_line_error_text_of_a_long_blank_body_is_linear(unit: str) -> None:
    # The old line-break regex was quadratic: 80 KB of blanks took 39 s, 100 KB about a minute.
    body = (unit * (100_000 // len(unit))).encode()
    started = time.perf_counter()
    envelope = parse_envelope(body)
    assert time.perf_counter() - started < 2.0
    assert "\n" not in envelope.error_text
