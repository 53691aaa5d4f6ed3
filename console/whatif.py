"""Policy what-if over the store: every recorded decision re-decided under changed config.

`what_if(store, filters, overrides)` reads the inputs each recorded decision was made from
(`attempts.decision.inputs`, every field of `DecisionInputs`), runs the current `decide()` on
them with the config keys in `overrides` changed, and reports which decisions come out
differently. With no overrides it is a regression check of the policy code itself: every
decision the installed version would take differently from the one that recorded it.

Only decisions the change can alter are re-run: a decision whose rule, and every rule before
it in its table, reads none of the changed inputs (`executor.rule_reads`) keeps its action and
rule under the change, so it is counted as examined and unchanged (`not_rerun`). Without
overrides every decision is re-run.

What it cannot know, and says: the tool's answer to an attempt that was never made (a stop that
becomes a retry), and what follows a changed decision in the same step (the recorded attempts
after it would not have happened as recorded). `replay` answers those. Decisions
recorded before every input was kept (older versions) are counted, not re-decided.
Headless: no Textual.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from executor.policy import (
    INTERMEDIATE_ACTIONS,
    PREDISPATCH_RULES,
    RESPONSE_RULES,
    Action,
    Decision,
    DecisionInputs,
    redecider,
)
from executor.policy.redecide import REDECIDE_BACKOFF_KEYS
from executor.rule_reads import RULE_READS
from store.queries import ExecutionFilter, Store

# Executions read per store session, so a writer waiting for the file gets its turns.
EXECUTIONS_PER_BATCH = 2_000
INPUT_FIELDS = frozenset(item.name for item in fields(DecisionInputs))

# `progress(executions_done, report)`, called after each batch (see `what_if`).
Progress = Callable[[int, "WhatIfReport"], None]

_ASKS = {
    Action.ASK_ANALYZER: "the error analyzer (layer 3)",
    Action.ASK_RESOLVER: "the re-resolver (layer 4)",
    Action.ASK_LEGACY: "the legacy correction callback",
}


@dataclass(frozen=True, slots=True)
class Verdict:
    """An action and the rule that chose it."""

    action: str
    rule_id: str

    def to_dict(self) -> dict[str, str]:
        return {"action": self.action, "rule_id": self.rule_id}

    def __str__(self) -> str:
        return f"{self.action} [{self.rule_id}]"


@dataclass(frozen=True, slots=True)
class Change:
    """The first decision of a step that comes out differently, and what that would mean."""

    execution_id: str
    step_id: str
    n: int
    before: Verdict
    after: Verdict
    reason: str
    consequence: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "execution_id": self.execution_id,
            "step_id": self.step_id,
            "n": self.n,
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
            "reason": self.reason,
            "consequence": self.consequence,
        }


@dataclass(slots=True)
class WhatIfReport:
    """What re-deciding the matching decisions found."""

    overrides: dict[str, Any]
    executions: int = 0
    decisions: int = 0
    changed: int = 0
    # Before → after of the first changed decision of each step (later ones follow from it).
    by_transition: Counter[tuple[Verdict, Verdict]] = field(default_factory=Counter)
    changes: list[Change] = field(default_factory=list)
    incomplete: int = 0
    missing_inputs: set[str] = field(default_factory=set)
    unreadable: int = 0
    first_unreadable: str | None = None
    not_rerun: int = 0

    @property
    def changed_steps(self) -> int:
        return len(self.changes)

    @property
    def after_earlier_change(self) -> int:
        """Changed decisions that follow an earlier changed decision of the same step."""
        return self.changed - self.changed_steps

    def to_dict(self) -> dict[str, Any]:
        return {
            "overrides": self.overrides,
            "executions": self.executions,
            "decisions": self.decisions,
            "changed": self.changed,
            "changed_steps": self.changed_steps,
            "after_earlier_change": self.after_earlier_change,
            "by_transition": [
                {"before": before.to_dict(), "after": after.to_dict(), "count": count}
                for (before, after), count in self.transitions()
            ],
            "changes": [change.to_dict() for change in self.changes],
            "not_redecided": {
                "incomplete_inputs": self.incomplete,
                "missing_inputs": sorted(self.missing_inputs),
                "unreadable": self.unreadable,
            },
            "not_rerun": self.not_rerun,
        }

    def transitions(self) -> list[tuple[tuple[Verdict, Verdict], int]]:
        """Before → after pairs, most frequent first, then by name."""
        return sorted(
            self.by_transition.items(),
            key=lambda item: (-item[1], str(item[0][0]), str(item[0][1])),
        )


def what_if(
    store: Store, filters: ExecutionFilter | None, overrides: Mapping[str, Any],
    *, progress: Progress | None = None,
) -> WhatIfReport:
    """Re-decide every recorded decision of the executions `filters` match (as `ls` lists them).

    `progress(executions_done, report)` is called after each batch of executions (the TUI's
    count; an exception it raises stops the run). Raises ValueError (or
    executor.config.ConfigError) for an override `decide()` cannot use.
    """
    decide_again = redecider(overrides)
    report = WhatIfReport(overrides=dict(overrides))
    unaffected = unaffected_rule_ids(overrides)
    step_changed: set[tuple[str, str]] = set()
    for row in _recorded_decisions(store, filters, report, unaffected, progress):
        _redecide_row(row, decide_again, report, step_changed)
    return report


def unaffected_rule_ids(overrides: Mapping[str, Any]) -> frozenset[str]:
    """Rule ids whose decisions `overrides` cannot change: neither the rule nor any rule before
    it in its table reads an input the overrides change. Empty without overrides (everything
    is re-run), and from the first rule `executor.rule_reads` does not list, onwards."""
    if not overrides:
        return frozenset()
    changed = {"backoff" if key in REDECIDE_BACKOFF_KEYS else key for key in overrides}
    unaffected: set[str] = set()
    for table in (PREDISPATCH_RULES, RESPONSE_RULES):
        for rule in table:
            reads = RULE_READS.get(rule.rule_id)
            if reads is None or changed.intersection(reads):
                break
            unaffected.add(rule.rule_id)
    return frozenset(unaffected)


def _recorded_decisions(
    store: Store, filters: ExecutionFilter | None, report: WhatIfReport,
    unaffected: frozenset[str], progress: Progress | None = None,
) -> Iterator[tuple[str, str, int, str | None, str | None, str | None]]:
    ids = store.matching_execution_ids(filters)
    report.executions = len(ids)
    for start in range(0, len(ids), EXECUTIONS_PER_BATCH):
        batch = ids[start : start + EXECUTIONS_PER_BATCH]
        rows, skipped = store.recorded_decisions(batch, skip_rules=sorted(unaffected))
        report.decisions += skipped
        report.not_rerun += skipped
        yield from rows
        if progress is not None:
            progress(start + len(batch), report)


def _redecide_row(
    row: tuple[str, str, int, str | None, str | None, str | None],
    decide_again: Callable[[Mapping[str, Any]], Decision],
    report: WhatIfReport,
    step_changed: set[tuple[str, str]],
) -> None:
    execution_id, step_id, n, action, rule_id, inputs_text = row
    report.decisions += 1
    try:
        inputs = json.loads(inputs_text) if inputs_text else None
        if not isinstance(inputs, dict):
            raise ValueError("no recorded inputs")
        missing = INPUT_FIELDS.difference(inputs)
        if missing:
            report.incomplete += 1
            report.missing_inputs.update(missing)
            return
        decision = decide_again(inputs)
    except ValueError as error:
        report.unreadable += 1
        report.first_unreadable = report.first_unreadable or (
            f"{execution_id} {step_id} #{n}: {error}"
        )
        return
    before = Verdict(str(action), str(rule_id))
    after = Verdict(decision.action.value, decision.rule_id)
    if before == after:
        return
    report.changed += 1
    if (execution_id, step_id) in step_changed:
        return
    step_changed.add((execution_id, step_id))
    report.by_transition[(before, after)] += 1
    report.changes.append(
        Change(execution_id, step_id, n, before, after, decision.reason,
               consequence(decision, n))
    )


def consequence(decision: Decision, n: int) -> str:
    """What the changed decision would have led to, and what the record cannot say."""
    action = decision.action
    if action in _ASKS:
        return (f"would have asked {_ASKS[action]}; its answer is not recorded "
                f"(replay with --llm live to ask a model)")
    if action in INTERMEDIATE_ACTIONS:
        return "would have sent the attempt; the tool's answer is not recorded (use replay)"
    if action == Action.RETRY_SAME:
        wait = f" after {decision.delay_ms:.1f} ms" if decision.delay_ms is not None else ""
        return (f"would have resent the same payload{wait}; the tool's answer to attempt "
                f"#{n + 1} is not recorded (use replay)")
    if action == Action.RETRY_CORRECTED:
        return (f"would have sent the corrected parameters; the tool's answer to attempt "
                f"#{n + 1} is not recorded (use replay)")
    if action == Action.SUCCESS:
        return "would have ended the step as a success"
    return (f"would have ended the step here ({action.value}); the later recorded attempts "
            "would not have been made")
