"""Case-insensitive search in large texts (MB bodies and prompts), as (row, column) ranges.

Pure and linear: one regular-expression scan, a piece of SEARCH_CHUNK_CHARS at a time, with the
rows counted between matches, so the TUI can run it in a worker thread, stop it between pieces
when the query changes, and never hold the interpreter for a whole body at once.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

MAX_MATCHES = 10_000
# The piece of text scanned between two asks of `stop` (a regular expression scan holds the
# interpreter's lock: about 1 ms per piece here).
SEARCH_CHUNK_CHARS = 1 << 18

Location = tuple[int, int]
Match = tuple[Location, Location]
# One highlighted piece of a line: start column, end column (None: to the end of the line).
RowSpan = tuple[int, int | None]


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The matches of `query`, each a (start, end) pair of (row, column) locations, in order.

    `truncated` is True when there were more than MAX_MATCHES (only the first are listed).
    """

    query: str
    matches: tuple[tuple[Location, Location], ...]
    truncated: bool = False

    def summary(self, current: int | None) -> str:
        """`3/17 matches`, `no match for "x"`, `10000+ matches`."""
        if not self.matches:
            return f"no match for {self.query!r}"
        total = f"{len(self.matches)}{'+' if self.truncated else ''}"
        noun = "match" if total == "1" else "matches"
        if current is None:
            return f"{total} {noun}"
        return f"{current + 1}/{total} {noun}"


class SearchStopped(Exception):
    """`search_text` was told to stop (its query or text was replaced) before it finished."""


def search_text(
    text: str,
    query: str,
    *,
    limit: int = MAX_MATCHES,
    stop: Callable[[], bool] | None = None,
) -> SearchResult:
    """Every case-insensitive occurrence of `query` in `text` (the first `limit`).

    `stop()` is asked before each piece of SEARCH_CHUNK_CHARS; when it says so, the search
    raises SearchStopped.
    """
    if not query:
        return SearchResult(query, ())
    # ASCII text and query: each piece lower-cased, searched for the lower-cased query; the
    # matches of a case-insensitive scan, in about a tenth of its time.
    folded = text.isascii() and query.isascii()
    if folded:
        pattern = re.compile(re.escape(query.lower()))
    else:
        pattern = re.compile(re.escape(query), re.IGNORECASE)
    # A case-insensitive match of a literal is as long as the literal: a match that starts in
    # a piece ends at most this far past it.
    overlap = len(query) - 1
    one_line = "\n" not in query
    rows = _RowCounter(text)
    matches: list[tuple[Location, Location]] = []
    position = 0
    while position < len(text):
        if stop is not None and stop():
            raise SearchStopped
        piece_start = position
        piece_end = min(piece_start + SEARCH_CHUNK_CHARS, len(text))
        scan_end = min(piece_end + overlap, len(text))
        if folded:
            found_in = pattern.finditer(text[piece_start:scan_end].lower())
        else:
            found_in = pattern.finditer(text, piece_start, scan_end)
        shift = piece_start if folded else 0
        for found in found_in:
            start, end = found.start() + shift, found.end() + shift
            if start >= piece_end:
                break  # found again, whole, in the next piece
            if len(matches) == limit:
                return SearchResult(query, tuple(matches), truncated=True)
            row, column = rows.location(start)
            if one_line:
                matches.append(((row, column), (row, column + end - start)))
            else:
                matches.append(((row, column), rows.location(end)))
            position = end
        position = max(position, piece_end)
    return SearchResult(query, tuple(matches))


class _RowCounter:
    """(row, column) of offsets asked in increasing order, counting the newlines in between."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.offset = self.row = self.row_start = 0

    def location(self, offset: int) -> Location:
        text, since = self.text, self.offset
        newlines = text.count("\n", since, offset)
        if newlines:
            self.row += newlines
            self.row_start = text.rfind("\n", since, offset) + 1
        self.offset = offset
        return self.row, offset - self.row_start


def next_match(result: SearchResult, cursor: Location, *, backwards: bool = False) -> int | None:
    """The index of the first match after `cursor` (or the last before it), wrapping around."""
    if not result.matches:
        return None
    if backwards:
        before = [i for i, (start, _) in enumerate(result.matches) if start < cursor]
        return before[-1] if before else len(result.matches) - 1
    after = next((i for i, (start, _) in enumerate(result.matches) if start > cursor), None)
    return 0 if after is None else after


def rows_of(matches: tuple[Match, ...] | list[Match]) -> dict[int, list[RowSpan]]:
    """The matches line by line, so a view highlights only the lines it paints."""
    rows: dict[int, list[RowSpan]] = {}
    for (start_row, start_column), (end_row, end_column) in matches:
        if start_row == end_row:
            rows.setdefault(start_row, []).append((start_column, end_column))
            continue
        rows.setdefault(start_row, []).append((start_column, None))
        for row in range(start_row + 1, end_row):
            rows.setdefault(row, []).append((0, None))
        rows.setdefault(end_row, []).append((0, end_column))
    return rows


def split_rows(matches: tuple[Match, ...], row_starts: list[int]) -> list[list[tuple[int, Match]]]:
    """`matches` of a text made of parts joined by newlines, as (index, match) pairs per part,
    with rows counted from the start of the part; `row_starts[k]` is part k's first row."""
    if row_starts == [0]:  # one part: its rows are the text's
        return [list(enumerate(matches))]
    parts: list[list[tuple[int, Match]]] = [[] for _ in row_starts]
    for index, ((start_row, start_column), (end_row, end_column)) in enumerate(matches):
        part = bisect_right(row_starts, start_row) - 1
        first = row_starts[part]
        parts[part].append((index, ((start_row - first, start_column),
                                    (end_row - first, end_column))))  # fmt: skip
    return parts
