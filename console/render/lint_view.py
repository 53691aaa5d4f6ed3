"""What `lint` shows, as data: `truva-console lint` prints the cards, the lint screen draws them.

`card_views(cards)` is the one computation of each card's heading, check lines, counts and
examples; `cards_text(views)` is the CLI's layout of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.lint import Example, ReportCard
from console.words import counted, on_one_line
from executor.tool_contract import Grade

MARKS = {Grade.PASS: "pass", Grade.WARN: "WARN", Grade.FAIL: "FAIL"}
NO_RESPONSES = "no tool responses recorded yet (run a plan, or probe a tool)"


@dataclass(frozen=True, slots=True)
class CheckLine:
    """One check of one tool: its grade, title, counts and the example of its worst grade."""

    check: str
    title: str
    source: str
    grade: Grade
    counts: dict[Grade, int]
    example: Example | None

    @property
    def counts_text(self) -> str:
        """`3 pass, 1 fail`: the grades seen, in grade order."""
        return ", ".join(f"{self.counts[g]} {g.value}" for g in Grade if self.counts[g])

    @property
    def example_text(self) -> str | None:
        """`EXECUTION STEP #N (HTTP 503): what the check said`, or None without an example
        (`no answer` in place of the status for a request that got none, as probe records)."""
        example = self.example
        if example is None:
            return None
        answer = f"HTTP {example.status}" if example.status else "no answer"
        return (f"{example.execution_id} {example.step_id} #{example.n} ({answer}): "
                f"{on_one_line(example.message)}")  # fmt: skip


@dataclass(frozen=True, slots=True)
class CardView:
    """One tool's report card as `lint` shows it."""

    tool: str
    grade: Grade
    responses: int
    capabilities: tuple[str, ...]
    checks: tuple[CheckLine, ...]

    @property
    def heading(self) -> str:
        """`weather: FAIL — 22 responses (current, current_v1)`."""
        capabilities = ", ".join(self.capabilities) or "-"
        return (f"{self.tool}: {MARKS[self.grade]} — {counted(self.responses, 'response')} "
                f"({capabilities})")  # fmt: skip


def card_views(cards: list[ReportCard]) -> list[CardView]:
    """Each report card with its checks in the check table's order."""
    return [
        CardView(
            tool=card.tool,
            grade=card.grade,
            responses=card.responses,
            capabilities=tuple(sorted(card.capabilities)),
            checks=tuple(
                _check_line(tally.to_dict(), tally.grade, tally.counts, tally.example)
                for tally in card.ordered_tallies()
            ),
        )
        for card in cards
    ]


def _check_line(shown: dict[str, Any], grade: Grade, counts: dict[Grade, int],
                example: Example | None) -> CheckLine:  # fmt: skip
    """A check's line from its `lint --json` entry (title and source as the card names them)."""
    return CheckLine(check=shown["check"], title=shown["title"], source=shown["source"],
                     grade=grade, counts=dict(counts), example=example)  # fmt: skip


def cards_text(views: list[CardView]) -> str:
    """Each tool's card: its grade, then one line per check with counts and an example."""
    if not views:
        return NO_RESPONSES
    lines: list[str] = []
    for view in views:
        lines.append(view.heading)
        for line in view.checks:
            lines.append(f"  {MARKS[line.grade]:<4}  {line.title}  ({line.counts_text})")
            if line.example_text is not None:
                lines.append(f"        e.g. {line.example_text}")
        lines.append("")
    return "\n".join(lines).rstrip()
