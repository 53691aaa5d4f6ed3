"""executor.llm: which LLM endpoint failures are retried, how they are counted, the intent text."""

from __future__ import annotations

import pytest

from executor.llm import (
    FAILURE_CONNECTION,
    FAILURE_HTTP_STATUS,
    FAILURE_OTHER,
    FAILURE_RESPONSE,
    FAILURE_TIMEOUT,
    LLMExchange,
    failure_summary,
    intent_text,
)


def exchange(kind: str | None, status: int | None = None, headers=None) -> LLMExchange:
    return LLMExchange(
        site="error_analysis", model="m", base_url="http://127.0.0.1:1/v1", temperature=0.0,
        max_tokens=1, messages=(), request_body=b"", response_status=status, response_body=b"",
        raw_text=None, prompt_tokens=None, completion_tokens=None, total_tokens=None,
        latency_ms=0.0, error=None if kind is None else "failed", started_at=0.0,
        error_kind=kind, response_headers=headers or {},
    )


FAILURES = [
    # (name, exchange, endpoint_failure, transient)
    ("answered", exchange(None, 200), None, False),
    ("http_503", exchange(FAILURE_HTTP_STATUS, 503), "HTTP 503", True),
    ("http_500", exchange(FAILURE_HTTP_STATUS, 500), "HTTP 500", True),
    ("http_429", exchange(FAILURE_HTTP_STATUS, 429), "HTTP 429", True),
    ("http_408", exchange(FAILURE_HTTP_STATUS, 408), "HTTP 408", True),
    ("http_401_unavailable_not_transient", exchange(FAILURE_HTTP_STATUS, 401), "HTTP 401", False),
    ("http_400_unavailable_not_transient", exchange(FAILURE_HTTP_STATUS, 400), "HTTP 400", False),
    ("timeout", exchange(FAILURE_TIMEOUT), "timeout", True),
    ("connection", exchange(FAILURE_CONNECTION), "connection error", True),
    ("no_choices_is_malformed_not_unavailable", exchange(FAILURE_RESPONSE, 200), None, False),
    ("prompt_build_failure_is_not_the_endpoint", exchange(FAILURE_OTHER), None, False),
]


@pytest.mark.parametrize(("call", "label", "transient"), [f[1:] for f in FAILURES],
                         ids=[f[0] for f in FAILURES])
def test_endpoint_failure_classes(call: LLMExchange, label: str | None, transient: bool) -> None:
    assert (call.endpoint_failure, call.transient_failure) == (label, transient)


def test_retry_after_header_is_found_in_any_case() -> None:
    call = exchange(FAILURE_HTTP_STATUS, 429, {"retry-after": "3"})
    assert call.retry_after_header == "3"
    assert exchange(FAILURE_HTTP_STATUS, 429).retry_after_header is None


SUMMARIES = [
    ("three_same", ["HTTP 503"] * 3, "HTTP 503 ×3"),
    ("mixed_in_first_seen_order", ["HTTP 429", "HTTP 503", "HTTP 429"], "HTTP 429 ×2, HTTP 503 ×1"),
    ("one", ["timeout"], "timeout ×1"),
]


@pytest.mark.parametrize(("labels", "expected"), [s[1:] for s in SUMMARIES],
                         ids=[s[0] for s in SUMMARIES])
def test_failure_summary(labels: list[str], expected: str) -> None:
    assert failure_summary(labels) == expected


INTENTS = [
    ("query_only", "Find hotels", None, "Find hotels"),
    ("both_labelled", "Find hotels", "Search by IATA code",
     "User query: Find hotels\nStep instruction: Search by IATA code"),
    ("instruction_same_as_query", "Find hotels", "Find hotels", "Find hotels"),
    ("blank_instruction", "Find hotels", "  ", "Find hotels"),
    ("instruction_without_query", "", "Search by IATA code",
     "Step instruction: Search by IATA code"),
]


@pytest.mark.parametrize(("query", "instruction", "expected"), [i[1:] for i in INTENTS],
                         ids=[i[0] for i in INTENTS])
def test_intent_text(query: str, instruction: str | None, expected: str) -> None:
    assert intent_text(query, instruction) == expected
