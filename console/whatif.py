"""Policy what-if over the store: every recorded decision re-decided under changed config.

`what_if(store, filters, overrides)` reads the inputs each recorded decision was made from
(`attempts.decision.inputs`, every field of `DecisionInputs`), runs the current `decide()` on
them with the config keys in `overrides` changed, and reports which decisions come out
differently. With no overrides it is a regression check of the policy code itself: every
decision the installed version would take differently from the one that recorded it.

Only decisions the change can alter are re-run: a decision whose rule, and every rule before
it in its table, reads none of the changed inputs (`executor.rule_reads`) keeps its action and
rule under the change, so it is counted as examined and unchanged (`not_rerun`). Without
overrides every decision is re-run. Re-run decisions with the same key (the inputs a
re-decision reads, `executor.policy.redecide_key`) are decided once; `what_if_row_by_row`
decides each from its own inputs and gives the same report.

What it cannot know, and says: the tool's answer to an attempt that was never made (a stop that
becomes a retry), and what follows a changed decision in the same step (the recorded attempts
after it would not have happened as recorded). `replay` answers those. Decisions
recorded before every input was kept (older versions) are counted, not re-decided.
Headless: no Textual.
"""

from __future__ import annotations

import difflib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from console.replay.edits import ReplayError, parse_config_override
from executor.config import CONFIG_FIELDS, ConfigError
from executor.policy import (
    INTERMEDIATE_ACTIONS,
    PREDISPATCH_RULES,
    RESPONSE_RULES,
    Action,
    Decision,
    DecisionInputs,
    redecider,
)
from executor.policy.conditions import wait_text
from executor.policy.redecide import REDECIDE_BACKOFF_KEYS, REDECIDE_KEYS, IncompleteInputs
from executor.policy.redecide_key import redecide_key
from executor.rule_reads import RULE_READS
from store.decision_keys import KeyScan, stored_key_serves
from store.queries import ExecutionFilter, Store

# Executions read per store session, so a writer waiting for the file gets its turns.
EXECUTIONS_PER_BATCH = 2_000
# Executions per batch of the keyed path (the demo's mix: about 60,000 decisions, an Arrow
# table of a few MB), and at most this many decisions: executions are batched until the next
# would pass it, and an execution with more is read a range of its steps at a time.
FAST_EXECUTIONS_PER_BATCH = 20_000
DECISIONS_PER_BATCH = 50_000
# The keyed path's batches share one store session until it has been held this long (wall
# seconds); then the next batch opens a new one, so a writer waiting for the file (a recorder
# in another process, another thread of the TUI) gets its turn in between.
SESSION_SLICE_S = 1.0
INPUT_FIELDS = frozenset(item.name for item in fields(DecisionInputs))

# `progress(executions_done, report)`, called after each batch (see `what_if`).
Progress = Callable[[int, "WhatIfReport"], None]

_ASKS = {
    Action.ASK_ANALYZER: "the error analyzer (layer 3)",
    Action.ASK_RESOLVER: "the re-resolver (layer 4)",
    Action.ASK_LEGACY: "the legacy correction callback",
}


# The budgets counted across the steps of an execution (the executor keeps their counters for
# the whole task), with the recorded input that counts each.
CROSS_STEP_BUDGETS = {
    "max_retries_per_tool": "tool_retries_used",
    "max_total_tokens": "llm_tokens_used",
    "max_llm_calls": "llm_calls_used",
    "max_wall_clock_s": "elapsed_s",
    "max_repeated_errors": "repeated_error_count",
}
CANNOT_KNOW = (
    "What this cannot know: the tool's answer to an attempt that was never made, an LLM "
    "layer's answer to a question never asked, and what follows a changed decision in the "
    "same step (later recorded attempts were made under the old decision)."
)


def cannot_know(overrides: Mapping[str, Any]) -> str:
    """What a what-if under `overrides` cannot know, as sentences; it names each overridden
    budget that is counted across steps, whose recorded counters a change would have moved."""
    budgets = [key for key in CROSS_STEP_BUDGETS if key in overrides]
    if not budgets:
        return CANNOT_KNOW
    names = " and ".join(", ".join(budgets).rsplit(", ", 1))
    counters = ", ".join(CROSS_STEP_BUDGETS[key] for key in budgets)
    kind = "budgets" if len(budgets) > 1 else "a budget"
    return (
        f"{CANNOT_KNOW} {names} {'are' if len(budgets) > 1 else 'is'} {kind} counted across "
        f"the steps of an execution: each decision is re-decided from the counters recorded "
        f"under the old config ({counters}), but a change in one step would have moved the "
        "counters the later steps saw."
    )


def parse_overrides(words: Sequence[str]) -> dict[str, Any]:
    """`--config KEY=VALUE` words → the overrides `what_if` re-decides under (CLI and TUI).

    Only the keys `decide()` reads (`executor.policy.redecide.REDECIDE_KEYS`) are accepted; an
    unknown or unused key, a bad value, or a key given twice raises ReplayError, one line naming
    the word as typed.
    """
    overrides: dict[str, Any] = {}
    typed: dict[str, str] = {}
    for word in words:
        key, separator, _ = word.partition("=")
        key = key.strip()
        if separator and key and key not in REDECIDE_KEYS:
            raise ReplayError(f"--config {word}: {_refused_key(key)}")
        key, value = parse_config_override(word)
        if key in typed:
            raise ReplayError(f"--config {word}: {key} is already given by --config {typed[key]}")
        overrides[key] = value
        typed[key] = word
    try:
        redecider(overrides, explain=False)
    except ConfigError as error:
        word = typed.get(error.field, " ".join(words))
        raise ReplayError(
            f"--config {word}: expected {error.expected}, got {error.received}"
        ) from error
    except ValueError as error:
        raise ReplayError(f"--config {' '.join(words)}: {error}") from error
    return overrides


def _refused_key(key: str) -> str:
    accepted = ", ".join(REDECIDE_KEYS)
    if key in CONFIG_FIELDS:
        return f"config key {key!r} does not change a decision (whatif accepts: {accepted})"
    close = difflib.get_close_matches(key, REDECIDE_KEYS, n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown config key {key!r} ({guess}whatif accepts: {accepted})"


@dataclass(frozen=True, slots=True)
class Verdict:
    """An action, the rule that chose it, and the wait before a resend (None: no wait)."""

    action: str
    rule_id: str
    delay_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.delay_ms is None:
            return {"action": self.action, "rule_id": self.rule_id}
        return {"action": self.action, "rule_id": self.rule_id, "delay_ms": self.delay_ms}

    def __str__(self) -> str:
        wait = "" if self.delay_ms is None else f" after {wait_text(self.delay_ms)}"
        return f"{self.action} [{self.rule_id}]{wait}"


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
            "cannot_know": cannot_know(self.overrides),
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

    Decisions with the same key (`executor.policy.redecide_key`: the inputs a re-decision can
    read) are decided once; the report is the one `what_if_row_by_row` gives.
    `progress(executions_done, report)` is called after each batch of executions (the TUI's
    count; an exception it raises stops the run). Raises ValueError (or
    executor.config.ConfigError) for an override `decide()` cannot use.
    """
    decide_again = redecider(overrides, explain=False)
    key = redecide_key(overrides)
    stored = stored_key_serves(overrides)
    report = WhatIfReport(overrides=dict(overrides))
    unaffected = sorted(unaffected_rule_ids(overrides))
    # The outcome of each key of the overrides, and of each row key (stored or that key).
    outcomes: dict[str, _Outcome] = {}
    by_row_key: dict[str, _Outcome] = {}
    known: list[pa.Array] = []
    step_changed: set[tuple[str, str]] = set()
    ids = store.matching_execution_ids(filters)
    report.executions = len(ids)
    with ExitStack() as held:
        scan: KeyScan | None = None
        held_since = 0.0

        def current_scan() -> KeyScan:
            nonlocal scan, held_since
            if scan is None or time.monotonic() - held_since > SESSION_SLICE_S:
                held.close()
                scan = KeyScan(held.enter_context(store.session()))
                held_since = time.monotonic()
            return scan

        counts: dict[str, int] = {}
        counted_to = index = 0
        while index < len(ids):
            batch_scan = current_scan()
            if index >= counted_to:
                counted_to = index + FAST_EXECUTIONS_PER_BATCH
                counts = batch_scan.decision_counts(ids[index:counted_to])
            batch_ids, index = _next_batch(ids, index, min(counted_to, len(ids)), counts)
            if batch_ids:
                parts: list[tuple[list[str], tuple[str, str] | None]] = [(batch_ids, None)]
            else:  # one execution too big for a batch: a range of its steps at a time
                ranges = _step_ranges(batch_scan.step_decision_counts(ids[index]))
                parts = [([ids[index]], steps) for steps in ranges]
                index += 1
            for number, (part_ids, steps) in enumerate(parts, start=1):
                keyed = (batch_scan if number == 1 else current_scan()).batch(
                    part_ids, key, stored=stored, skip_rules=unaffected,
                    known=pa.concat_arrays(known) if known else None, decided=outcomes,
                    steps=steps,
                )
                report.decisions += keyed.skipped
                report.not_rerun += keyed.skipped
                for decide_key, inputs_text in keyed.inputs_by_key.items():
                    outcomes[decide_key] = _decide_once(inputs_text, decide_again)
                for row_key, decide_key in keyed.decide_keys.items():
                    by_row_key[row_key] = outcomes[decide_key]
                known.append(pa.array(list(keyed.decide_keys), pa.string()))
                _count_batch(keyed.table, by_row_key, report, step_changed)
                if progress is not None:
                    progress(index if number == len(parts) else index - 1, report)
    return report


def _next_batch(
    ids: Sequence[str], index: int, counted_to: int, counts: Mapping[str, int]
) -> tuple[list[str], int]:
    """The next batch of whole executions from `ids[index:counted_to]` and the index after
    it: at most FAST_EXECUTIONS_PER_BATCH executions and DECISIONS_PER_BATCH decisions
    (`counts`). Empty when `ids[index]` alone has more: it is read a range of steps at a time."""
    decisions = 0
    end = index
    while end < counted_to:
        count = counts.get(ids[end], 0)
        if decisions + count > DECISIONS_PER_BATCH:
            break
        decisions += count
        end += 1
    return list(ids[index:end]), end


def _step_ranges(step_counts: list[tuple[str, int]]) -> list[tuple[str, str]]:
    """(first, last) step ids of consecutive steps with at most DECISIONS_PER_BATCH decisions
    together (a step with more is a range of its own)."""
    ranges: list[tuple[str, str]] = []
    first: str | None = None
    last = ""
    decisions = 0
    for step_id, count in step_counts:
        if first is not None and decisions + count > DECISIONS_PER_BATCH:
            ranges.append((first, last))
            first, decisions = None, 0
        if first is None:
            first = step_id
        last = step_id
        decisions += count
    if first is not None:
        ranges.append((first, last))
    return ranges


def what_if_row_by_row(
    store: Store, filters: ExecutionFilter | None, overrides: Mapping[str, Any]
) -> WhatIfReport:
    """`what_if` deciding every recorded decision on its own, from its full recorded inputs:
    the reference the keyed path is tested and measured against."""
    decide_again = redecider(overrides)
    report = WhatIfReport(overrides=dict(overrides))
    unaffected = unaffected_rule_ids(overrides)
    step_changed: set[tuple[str, str]] = set()
    for row in _recorded_decisions(store, filters, report, unaffected):
        _redecide_row(row, decide_again, report, step_changed)
    return report


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What re-deciding one key gave: a decision, or why there is none."""

    decision: Decision | None = None
    after: Verdict | None = None
    missing: frozenset[str] = frozenset()
    error: str | None = None


def _decide_once(
    inputs_text: str | None, decide_again: Callable[[Mapping[str, Any]], Decision]
) -> _Outcome:
    try:
        inputs = json.loads(inputs_text) if inputs_text else None
        if not isinstance(inputs, dict):
            raise ValueError("no recorded inputs")
        missing = INPUT_FIELDS.difference(inputs)
        if missing:
            return _Outcome(missing=frozenset(missing))
        decision = decide_again(inputs)
    except IncompleteInputs as error:
        return _Outcome(missing=frozenset(error.missing))
    except ValueError as error:
        return _Outcome(error=str(error))
    return _Outcome(decision, _verdict_of(decision))


def _verdict_of(decision: Decision) -> Verdict:
    return Verdict(decision.action.value, decision.rule_id, decision.delay_ms)


def _recorded_verdict(action: str | None, rule_id: str | None, delay_ms: float | None) -> Verdict:
    return Verdict(str(action), str(rule_id), delay_ms)


def _count_batch(
    table: pa.Table, outcomes: Mapping[str, _Outcome], report: WhatIfReport,
    step_changed: set[tuple[str, str]],
) -> None:
    """Count one batch's rows; only the rows that change or were not re-decided are visited
    one by one, in order."""
    report.decisions += table.num_rows
    if not table.num_rows:
        return
    keys = table.column("key").combine_chunks().dictionary_encode()
    unique = keys.dictionary.to_pylist()
    after_action = pa.array(
        [o.after.action if (o := outcomes[k]).after else None for k in unique], pa.string()
    ).take(keys.indices)
    after_rule = pa.array(
        [o.after.rule_id if (o := outcomes[k]).after else None for k in unique], pa.string()
    ).take(keys.indices)
    after_delay = pa.array(
        [o.after.delay_ms if (o := outcomes[k]).after else None for k in unique], pa.float64()
    ).take(keys.indices)
    same = pc.and_(
        pc.equal(table.column("action"), after_action),
        pc.equal(pc.fill_null(table.column("rule_id"), "None"), after_rule),
    )
    # A wait differs only where both are known (`_delay_changed`).
    delay_changed = pc.fill_null(pc.not_equal(table.column("delay_ms"), after_delay), False)
    visit = pc.or_(pc.invert(pc.fill_null(same, False)), delay_changed)
    rows = table.filter(visit)
    for execution_id, step_id, n, action, rule_id, delay_ms, row_key in zip(
        *(rows.column(name).to_pylist() for name in
          ("execution_id", "step_id", "n", "action", "rule_id", "delay_ms", "key")),
        strict=True,
    ):
        outcome = outcomes[row_key]
        if outcome.error is not None:
            report.unreadable += 1
            report.first_unreadable = report.first_unreadable or (
                f"{execution_id} {step_id} #{n}: {outcome.error}"
            )
        elif outcome.decision is None:
            report.incomplete += 1
            report.missing_inputs.update(outcome.missing)
        else:
            _count_change(execution_id, step_id, n,
                          _recorded_verdict(action, rule_id, delay_ms), outcome.decision,
                          report, step_changed)


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
    unaffected: frozenset[str],
) -> Iterator[tuple[str, str, int, str | None, str | None, str | None]]:
    ids = store.matching_execution_ids(filters)
    report.executions = len(ids)
    for start in range(0, len(ids), EXECUTIONS_PER_BATCH):
        batch = ids[start : start + EXECUTIONS_PER_BATCH]
        rows, skipped = store.recorded_decisions(batch, skip_rules=sorted(unaffected))
        report.decisions += skipped
        report.not_rerun += skipped
        yield from rows


def _redecide_row(
    row: tuple[str, str, int, str | None, str | None, str | None, float | None],
    decide_again: Callable[[Mapping[str, Any]], Decision],
    report: WhatIfReport,
    step_changed: set[tuple[str, str]],
) -> None:
    execution_id, step_id, n, action, rule_id, inputs_text, delay_ms = row
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
    except IncompleteInputs as error:
        report.incomplete += 1
        report.missing_inputs.update(error.missing)
        return
    except ValueError as error:
        report.unreadable += 1
        report.first_unreadable = report.first_unreadable or (
            f"{execution_id} {step_id} #{n}: {error}"
        )
        return
    _count_change(execution_id, step_id, n, _recorded_verdict(action, rule_id, delay_ms),
                  decision, report, step_changed)


def _count_change(
    execution_id: str, step_id: str, n: int, before: Verdict, decision: Decision,
    report: WhatIfReport, step_changed: set[tuple[str, str]],
) -> None:
    after = _verdict_of(decision)
    if (before.action, before.rule_id) == (after.action, after.rule_id) and not _delay_changed(
        before, after
    ):
        return
    report.changed += 1
    if (execution_id, step_id) in step_changed:
        return
    step_changed.add((execution_id, step_id))
    report.by_transition[(before, after)] += 1
    report.changes.append(
        Change(execution_id, step_id, n, before, after, decision.reason,
               consequence(decision, n, before))
    )


def _delay_changed(before: Verdict, after: Verdict) -> bool:
    """The wait before the resend differs: both known and not equal (a decision recorded
    without its wait is not counted as changed for it)."""
    return (before.delay_ms is not None and after.delay_ms is not None
            and before.delay_ms != after.delay_ms)


def consequence(decision: Decision, n: int, before: Verdict | None = None) -> str:
    """What the changed decision would have led to, and what the record cannot say."""
    action = decision.action
    if (before is not None and (before.action, before.rule_id) == (action.value, decision.rule_id)
            and before.delay_ms is not None and decision.delay_ms is not None):
        return (f"would have waited {wait_text(decision.delay_ms)} instead of "
                f"{wait_text(before.delay_ms)} before the same resend; the tool's answer after "
                "that wait is not recorded (the recorded one came after the old wait)")
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
