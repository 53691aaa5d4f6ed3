"""How a failed LLM layer is named in a step's error."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from executor.runtime.outcomes import layer_failure


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        # the client already says it for an unexpected error: said once, not twice
        ("LLM call failed: OverflowError: port out of range",
         "LLM call failed: OverflowError: port out of range"),
        ("HTTP 503: overloaded", "LLM call failed: HTTP 503: overloaded"),
        ("LLM request timed out after 30 s", "LLM call failed: LLM request timed out after 30 s"),
    ],
)
def test_an_llm_error_is_named_once(error: str, shown: str) -> None:
    result = SimpleNamespace(exchange=SimpleNamespace(error=error), parse_error=None)
    assert layer_failure(result) == shown  # type: ignore[arg-type]
