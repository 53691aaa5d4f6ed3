"""Counted nouns, one-line texts, what came back, and runs of sent parameters (console/words.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from console.words import counted, on_one_line, received_text, sent_parameters

COUNTED_CASES = [
    ("one_attempt", 1, "attempt", None, "1 attempt"),
    ("two_attempts", 2, "attempt", None, "2 attempts"),
    ("zero_attempts", 0, "attempt", None, "0 attempts"),
    ("none_is_zero", None, "correction", None, "0 corrections"),
    ("one_dispatch", 1, "dispatch", "dispatches", "1 dispatch"),
    ("three_dispatches", 3, "dispatch", "dispatches", "3 dispatches"),
]


@pytest.mark.parametrize(
    ("count", "singular", "plural", "expected"),
    [c[1:] for c in COUNTED_CASES],
    ids=[c[0] for c in COUNTED_CASES],
)
def test_counted(count, singular, plural, expected):
    assert counted(count, singular, plural) == expected


ONE_LINE_CASES = [
    ("plain_text_unchanged", "HTTP 400 is not 2xx", "HTTP 400 is not 2xx"),
    ("newline", "crashed\nTraceback", "crashed\\nTraceback"),
    ("crlf_is_one_escape", "a\r\nb", "a\\r\\nb"),
    ("lone_cr", "a\rb", "a\\rb"),
    ("unicode_line_separator", "a\u2028b", "a\\u2028b"),
    ("tab_kept", "a\tb", "a\tb"),
    ("none_is_empty", None, ""),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in ONE_LINE_CASES], ids=[c[0] for c in ONE_LINE_CASES]
)
def test_on_one_line(text, expected):
    assert on_one_line(text) == expected
    assert len(on_one_line(text).splitlines()) <= 1


RECEIVED_CASES = [
    ("http_status", True, 400, None, "HTTP 400"),
    ("refused_connection_sent_nothing", True, 0, "connect", "not sent (the connection failed)"),
    ("reset_after_sending", True, 0, "reset", "no response (the connection was reset)"),
    ("timeout", True, 0, "timeout", "no response (timed out)"),
    ("cancelled_in_flight", True, 0, "cancelled", "no response (cancelled in flight)"),
    # a body past max_response_body_bytes, one that does not decode, bytes that are not HTTP:
    # the tool answered, so "no response" would not be true
    ("answered_unusably", True, 0, "protocol", "no usable response (a protocol error)"),
    ("never_dispatched", False, None, None, "not sent"),
    ("not_sent_because_the_connection_failed", False, None, "connect",
     "not sent (the connection failed)"),
    ("dispatched_without_status", True, None, None, "no response recorded"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("dispatched", "status", "transport_error", "expected"),
    [c[1:] for c in RECEIVED_CASES],
    ids=[c[0] for c in RECEIVED_CASES],
)
def test_received_text_never_says_http_none(dispatched, status, transport_error, expected):
    assert received_text(dispatched, status, transport_error) == expected


@dataclass(frozen=True, slots=True)
class Attempt:
    n: int
    dispatched: bool
    parameters: Any
    correction_layer: str | None = None
    transport_error: str | None = None


SENT_CASES = [
    ("one_attempt", [Attempt(1, True, {"a": 1})], [("#1", "sent", {"a": 1}, "")]),
    ("identical_resends_merge",
     [Attempt(1, True, {"a": 1}), Attempt(2, True, {"a": 1}), Attempt(3, True, {"a": 1})],
     [("#1-#3", "sent", {"a": 1}, "")]),
    ("a_correction_starts_a_new_run",
     [Attempt(1, True, {"c": "PARIS"}), Attempt(2, True, {"c": "PAR"}, "analyzer")],
     [("#1", "sent", {"c": "PARIS"}, ""),
      ("#2", "sent", {"c": "PAR"}, " (corrected by the analyzer layer)")]),
    ("true_and_1_differ_on_the_wire",
     [Attempt(1, True, {"a": 1}), Attempt(2, True, {"a": True})],
     [("#1", "sent", {"a": 1}, ""), ("#2", "sent", {"a": True}, "")]),
    ("a_refused_connection_is_not_sent",
     [Attempt(1, True, {"a": 1}, transport_error="connect")],
     [("#1", "not sent", {"a": 1}, "")]),
    ("not_sent_is_its_own_run",
     [Attempt(1, True, {"a": 1}), Attempt(2, False, {"a": 1})],
     [("#1", "sent", {"a": 1}, ""), ("#2", "not sent", {"a": 1}, "")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("attempts", "expected"), [c[1:] for c in SENT_CASES], ids=[c[0] for c in SENT_CASES]
)
def test_sent_parameters(attempts, expected):
    runs = sent_parameters(attempts)
    assert [(r.attempts_label, r.verb, r.parameters, r.note) for r in runs] == expected
