"""Where to look first in an execution: its failing step, the decisive attempt, failed attempts."""

from __future__ import annotations

from store.queries import AttemptRecord, ExecutionDetail, ExecutionRow, StepRecord

# A step that ended without a result because of its own attempts (skipped steps only follow one).
FAILING_STEP_STATUSES = frozenset({"failed", "rejected", "interrupted"})


def attempt_failed(attempt: AttemptRecord) -> bool:
    """True when the attempt's decision was anything but success (a resend, a stop, a rejection)."""
    return attempt.action is not None and attempt.action != "success"


def decisive_attempt(step: StepRecord) -> AttemptRecord | None:
    """The attempt whose decision ended the step: the last one decided by the step's final rule."""
    if not step.attempts:
        return None
    decided = [a for a in step.attempts if step.final_rule_id and a.rule_id == step.final_rule_id]
    return decided[-1] if decided else step.attempts[-1]


def opening_position(detail: ExecutionDetail) -> tuple[str | None, int | None]:
    """(step id, attempt n) an execution opens on: its first failing step at the decisive attempt.

    With no failing step, the first step and its first attempt.
    """
    failing = next((s for s in detail.steps if s.status in FAILING_STEP_STATUSES), None)
    if failing is not None:
        attempt = decisive_attempt(failing)
        return failing.step_id, None if attempt is None else attempt.n
    if not detail.steps:
        return None, None
    first = detail.steps[0]
    return first.step_id, first.attempts[0].n if first.attempts else None


def failed_positions(detail: ExecutionDetail) -> list[tuple[str, int]]:
    """Every failed attempt as (step id, n), in step order then attempt order."""
    return [(step.step_id, attempt.n) for step in detail.steps
            for attempt in step.attempts if attempt_failed(attempt)]  # fmt: skip


def next_failed(
    detail: ExecutionDetail, step_id: str | None, n: int | None, *, backwards: bool = False
) -> tuple[str, int] | None:
    """The failed attempt after (or before) (step_id, n), wrapping around; None if none."""
    positions = failed_positions(detail)
    if not positions:
        return None
    order = {step.step_id: index for index, step in enumerate(detail.steps)}
    here = (order.get(step_id or "", -1), -1 if n is None else n)
    keyed = [((order[s], a), (s, a)) for s, a in positions]
    if backwards:
        earlier = [position for key, position in keyed if key < here]
        return earlier[-1] if earlier else positions[-1]
    later = [position for key, position in keyed if key > here]
    return later[0] if later else positions[0]


def execution_failed(row: ExecutionRow) -> bool:
    """True for an execution with a failed or rejected step, or one that did not succeed."""
    return (row.steps_failed + row.steps_rejected) > 0 or row.status in {
        "failed", "partial", "cancelled", "interrupted"
    }


def next_failed_execution(
    rows: tuple[ExecutionRow, ...], current: str | None
) -> str | None:
    """The id of the next failed execution below `current` in the list, wrapping; None if none."""
    ids = [row.execution_id for row in rows]
    start = ids.index(current) + 1 if current in ids else 0
    for row in rows[start:] + rows[:start]:
        if execution_failed(row):
            return row.execution_id
    return None
