"""Tool contract report cards: every recorded (or probed) response graded per tool.

`lint_store(store, tool=None)` grades each answered attempt in the store with
`executor.tool_contract.grade_response` and folds the findings into one `ReportCard` per tool:
per check, how many responses passed, warned and failed, and an example attempt for the worst
grade. Headless: no Textual. `truva-console lint` prints the cards; `probe` grades its own
responses the same way.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from executor.tool_contract import CHECKS, GRADE_ORDER, Check, Finding, Grade, grade_response
from store.queries import Store

CHECK_TITLES = {check.id: check.title for check in CHECKS}
CHECK_SOURCES = {check.id: check.source for check in CHECKS}


@dataclass(frozen=True, slots=True)
class Example:
    """Where a grade was seen: the attempt, and what the check said about it."""

    execution_id: str
    step_id: str
    n: int
    status: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"execution_id": self.execution_id, "step_id": self.step_id, "n": self.n,
                "http_status": self.status or None, "message": self.message}  # fmt: skip


@dataclass(slots=True)
class CheckTally:
    """One check's counts for one tool, and an example of its worst grade."""

    check: str
    title: str
    source: str
    counts: dict[Grade, int] = field(default_factory=lambda: dict.fromkeys(Grade, 0))
    example: Example | None = None

    @property
    def grade(self) -> Grade:
        if self.counts[Grade.FAIL]:
            return Grade.FAIL
        return Grade.WARN if self.counts[Grade.WARN] else Grade.PASS

    def add(self, finding: Finding, where: tuple[str, str, int, int]) -> None:
        before = self.grade
        self.counts[finding.grade] += 1
        worse = GRADE_ORDER[finding.grade] > GRADE_ORDER[before]
        if finding.grade is not Grade.PASS and (self.example is None or worse):
            self.example = Example(*where, finding.message)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "title": self.title,
            "source": self.source,
            "grade": self.grade.value,
            "counts": {grade.value: count for grade, count in self.counts.items()},
            "example": self.example.to_dict() if self.example else None,
        }


@dataclass(slots=True)
class ReportCard:
    """Every check's tally for one tool, in the order of its check table (`checks`: the lint
    table, or probe's, which adds its own rows)."""

    tool: str
    capabilities: set[str] = field(default_factory=set)
    responses: int = 0
    tallies: dict[str, CheckTally] = field(default_factory=dict)
    checks: tuple[Check, ...] = CHECKS

    @property
    def grade(self) -> Grade:
        grades = [tally.grade for tally in self.tallies.values()] or [Grade.PASS]
        return max(grades, key=GRADE_ORDER.__getitem__)

    def add(self, capability: str | None, where: tuple[str, str, int, int],
            findings: Iterable[Finding]) -> None:  # fmt: skip
        self.responses += 1
        if capability:
            self.capabilities.add(capability)
        table = _by_id(self.checks)
        for finding in findings:
            tally = self.tallies.get(finding.check)
            if tally is None:
                row = table[finding.check]
                tally = self.tallies[finding.check] = CheckTally(row.id, row.title, row.source)
            tally.add(finding, where)

    def ordered_tallies(self) -> list[CheckTally]:
        order = {check.id: index for index, check in enumerate(self.checks)}
        return sorted(self.tallies.values(), key=lambda tally: order[tally.check])

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "grade": self.grade.value,
            "capabilities": sorted(self.capabilities),
            "responses": self.responses,
            "checks": [tally.to_dict() for tally in self.ordered_tallies()],
        }


def lint_store(store: Store, *, tool: str | None = None) -> list[ReportCard]:
    """One report card per tool with answered attempts in the store (only `tool` when given)."""
    cards: dict[str, ReportCard] = {}
    for batch in store.tool_responses(tool=tool):
        for tool_name, capability, execution_id, step_id, n, status, headers, body in batch:
            name = tool_name or "(unknown tool)"
            card = cards.setdefault(name, ReportCard(name))
            card.add(capability, (execution_id, step_id, n, status),
                     grade_response(status, _headers(headers), body))  # fmt: skip
    return [cards[name] for name in sorted(cards)]


@functools.cache
def _by_id(checks: tuple[Check, ...]) -> Mapping[str, Check]:
    return {check.id: check for check in checks}


def _headers(text: str | None) -> dict[str, str]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
