"""Search in text: case-insensitive, (row, column) ranges, wrapping jumps, a bound on matches."""

from __future__ import annotations

from console.render.text_search import next_match, search_text

TEXT = 'first line\n  "city": "Tokio",\n  "note": "unknown city TOKIO"\n'


def test_matches_are_row_column_ranges_found_case_insensitively() -> None:
    result = search_text(TEXT, "tokio")
    assert result.matches == (((1, 11), (1, 16)), ((2, 24), (2, 29)))
    assert result.summary(0) == "1/2 matches"


def test_a_query_with_regex_characters_is_literal() -> None:
    assert search_text(TEXT, '"city": "').matches == (((1, 2), (1, 11)),)
    assert search_text(TEXT, "c.ty").matches == ()
    assert search_text(TEXT, "c.ty").summary(None) == "no match for 'c.ty'"


def test_jumps_wrap_around_both_ways() -> None:
    result = search_text(TEXT, "tokio")
    assert next_match(result, (1, 11)) == 1
    assert next_match(result, (2, 24)) == 0
    assert next_match(result, (1, 11), backwards=True) == 1
    assert next_match(result, (2, 24), backwards=True) == 0


def test_many_matches_are_cut_at_the_limit_and_say_so() -> None:
    result = search_text("ab" * 50, "b", limit=10)
    assert len(result.matches) == 10 and result.truncated
    assert result.summary(None) == "10+ matches"


def test_an_empty_query_finds_nothing() -> None:
    assert search_text(TEXT, "").matches == ()
