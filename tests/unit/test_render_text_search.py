"""Search in text: case-insensitive, (row, column) ranges, wrapping jumps, a bound on matches,
searched piece by piece (stoppable between pieces) with the matches of one whole scan."""

from __future__ import annotations

import re
from bisect import bisect_right

import pytest

import console.render.text_search as text_search
from console.render.text_search import (
    MAX_MATCHES,
    SearchResult,
    SearchStopped,
    next_match,
    search_text,
    split_rows,
)

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


def scanned_whole(text: str, query: str, limit: int = MAX_MATCHES) -> SearchResult:
    """The search as one case-insensitive scan of the whole text, rows from the line starts."""
    starts = [0, *(found.end() for found in re.finditer("\n", text))]

    def location(offset: int) -> tuple[int, int]:
        row = bisect_right(starts, offset) - 1
        return row, offset - starts[row]

    found = [(location(m.start()), location(m.end()))
             for m in re.finditer(re.escape(query), text, re.IGNORECASE)]  # fmt: skip
    return SearchResult(query, tuple(found[:limit]), truncated=len(found) > limit)


# name -> (text, query, limit); searched in pieces of 8 characters
PIECES = {
    "across_a_piece_boundary": ("0123456Tokio tokio\n  TOKIO", "tokio", MAX_MATCHES),
    "every_piece_boundary": ("ab" * 40, "ba", MAX_MATCHES),
    "overlapping_occurrences": ("a" * 21, "aaa", MAX_MATCHES),
    "longer_than_a_piece": ("x" * 5 + "needle in a haystack" * 3, "needle in a haystack", 99),
    "a_query_across_lines": ("one\ntwo\none\ntwo\n" * 3, "one\ntw", MAX_MATCHES),
    "rows_in_a_later_piece": ("\n\n\nkey: v\n" * 9 + "key", "KEY", MAX_MATCHES),
    "limit_in_a_later_piece": ("zz." * 30, "zz", 12),
    "non_ascii_text": ("Ärger über ÄRGER, straße STRASSE, ÆØÅ æøå\n" * 3, "ärger", MAX_MATCHES),
    "dotted_capital_i": ("İstanbul istanbul\nİSTANBUL", "stanbul", MAX_MATCHES),
    "kelvin_sign_query_on_ascii": ("ok OK kK", "\u212a", MAX_MATCHES),
    "long_s_on_ascii": ("sS\u017f s", "s", MAX_MATCHES),
    "no_newline_at_all": ("[" + '{"city":"Tokio"},' * 40 + "]", '"tokio"', MAX_MATCHES),
    "no_match": ("abc" * 30, "abd", MAX_MATCHES),
}


@pytest.mark.parametrize(("text", "query", "limit"), PIECES.values(), ids=PIECES.keys())
def test_a_search_in_pieces_finds_what_one_scan_of_the_whole_text_finds(
    monkeypatch, text: str, query: str, limit: int
) -> None:
    monkeypatch.setattr(text_search, "SEARCH_CHUNK_CHARS", 8)
    assert search_text(text, query, limit=limit) == scanned_whole(text, query, limit)


def test_stop_is_asked_before_each_piece_and_stops_the_search(monkeypatch) -> None:
    monkeypatch.setattr(text_search, "SEARCH_CHUNK_CHARS", 10)
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) == 3

    with pytest.raises(SearchStopped):
        search_text("tokio " * 20, "tokio", stop=stop)
    assert len(asked) == 3
    finished = search_text("tokio " * 20, "tokio", stop=lambda: False)
    assert len(finished.matches) == 20


def test_matches_of_joined_parts_are_split_with_rows_counted_per_part() -> None:
    text = "\n".join(["a tokio", "b\nTokio c tokio", "tokio"])  # parts start at rows 0, 1, 3
    matches = search_text(text, "tokio").matches
    assert split_rows(matches, [0, 1, 3]) == [
        [(0, ((0, 2), (0, 7)))],
        [(1, ((1, 0), (1, 5))), (2, ((1, 8), (1, 13)))],
        [(3, ((0, 0), (0, 5)))],
    ]
    assert split_rows(matches, [0]) == [list(enumerate(matches))]
