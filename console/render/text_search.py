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


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The matches of `query`, each a (start, end) pair of (row, column) locations, in order.

    `truncated` is True when there were more than MAX_MATCHES (only the first are listed).
    """

    query: str
    matches: tuple[tuple[Location, Location], ...]
    truncated: bool = False

    def summary(self, current: int | None) -> str:
        """`3 of 17 matches`, `no match for "x"`, `10000+ matches`."""
        if not self.matches:
            return f"no match for {self.query!r}"
        total = f"{len(self.matches)}{'+' if self.truncated else ''}"
        noun = "match" if total == "1" else "matches"
        if current is None:
            return f"{total} {noun}"
        return f"{current + 1} of {total} {noun}"


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
