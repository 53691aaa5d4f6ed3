"""Case-insensitive search in large texts (MB bodies and prompts), as (row, column) ranges.

Pure and linear: one regular-expression scan for the matches and one for the line starts, so
the TUI can run it in a worker thread and never block the screen.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

MAX_MATCHES = 10_000

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


def line_starts(text: str) -> list[int]:
    """The offset at which each line of `text` starts."""
    return [0, *(match.end() for match in re.finditer("\n", text))]


def search_text(text: str, query: str, *, limit: int = MAX_MATCHES) -> SearchResult:
    """Every case-insensitive occurrence of `query` in `text` (the first `limit`)."""
    if not query:
        return SearchResult(query, ())
    starts = line_starts(text)
    matches: list[tuple[Location, Location]] = []
    truncated = False
    for found in re.finditer(re.escape(query), text, re.IGNORECASE):
        if len(matches) == limit:
            truncated = True
            break
        matches.append((_location(starts, found.start()), _location(starts, found.end())))
    return SearchResult(query, tuple(matches), truncated)


def _location(starts: list[int], offset: int) -> Location:
    row = bisect_right(starts, offset) - 1
    return row, offset - starts[row]


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
    parts: list[list[tuple[int, Match]]] = [[] for _ in row_starts]
    for index, ((start_row, start_column), (end_row, end_column)) in enumerate(matches):
        part = bisect_right(row_starts, start_row) - 1
        first = row_starts[part]
        parts[part].append((index, ((start_row - first, start_column),
                                    (end_row - first, end_column))))  # fmt: skip
    return parts
