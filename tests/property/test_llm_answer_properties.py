"""Properties of the LLM answer parsers: a verdict of the right types, or LLMParseError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings

from executor.llm import (
    AnalyzerVerdict,
    LegacyVerdict,
    LLMParseError,
    ResolverVerdict,
    parse_analysis,
    parse_legacy_correction,
    parse_reresolution,
)
from tests.property.strategies import examples, llm_answers

PARSERS: list[tuple[str, Callable[[str], Any], type]] = [
    ("analysis", parse_analysis, AnalyzerVerdict),
    ("reresolution", parse_reresolution, ResolverVerdict),
    ("legacy", parse_legacy_correction, LegacyVerdict),
]


@settings(max_examples=examples(350))
@given(text=llm_answers())
@pytest.mark.parametrize(("site", "parse", "verdict_type"), PARSERS, ids=[p[0] for p in PARSERS])
def test_an_llm_answer_gives_a_typed_verdict_or_a_parse_error(
    site: str, parse: Callable[[str], Any], verdict_type: type, text: str
) -> None:
    try:
        verdict = parse(text)
    except LLMParseError as error:
        assert str(error)
        return
    assert isinstance(verdict, verdict_type)
    if isinstance(verdict, AnalyzerVerdict):
        assert isinstance(verdict.should_retry, bool)
        assert isinstance(verdict.is_transient_error, bool)
        assert isinstance(verdict.reason, str)
        assert isinstance(verdict.suggested_changes, dict)
    elif isinstance(verdict, ResolverVerdict):
        assert isinstance(verdict.should_retry, bool)
        assert isinstance(verdict.corrected_parameters, dict)
        assert isinstance(verdict.analysis, str)
    else:
        assert isinstance(verdict.corrected_parameters, dict)


DEEP_ANSWER = '{"should_retry": true, "suggested_changes": {"a": ' + "[" * 5000 + "]" * 5000 + "}}"


@pytest.mark.parametrize(("site", "parse", "verdict_type"), PARSERS, ids=[p[0] for p in PARSERS])
def test_a_deeply_nested_llm_answer_is_a_parse_error(
    site: str, parse: Callable[[str], Any], verdict_type: type
) -> None:
    with pytest.raises(LLMParseError):
        parse(DEEP_ANSWER)
