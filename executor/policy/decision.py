"""What `decide()` returns: actions, the frozen `Decision` and the rule-table row types."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from executor.faults import FailureClass, Recovery
from executor.jsonform import JsonRecord
from executor.policy.inputs import DecisionInputs, Layer


class Action(StrEnum):
    """Decision actions; the names are the product contract (SPEC §2.2, §3.2)."""

    REJECT_PREDISPATCH = "reject_predispatch"
    SUCCESS = "success"
    STOP_REFUSED = "stop_refused"
    STOP_TERMINAL = "stop_terminal"
    STOP_SINGLE_DISPATCH = "stop_single_dispatch"
    RETRY_SAME = "retry_same"
    STOP_BUDGET = "stop_budget"
    STOP_PROTECTED = "stop_protected"
    RETRY_CORRECTED = "retry_corrected"
    STOP_NO_CORRECTION = "stop_no_correction"
    STOP_CANCELLED = "stop_cancelled"
    STOP_UNSAFE_RESEND = "stop_unsafe_resend"
    STOP_CIRCUIT_OPEN = "stop_circuit_open"
    # Intermediate actions: the loop acts (dispatches, or asks a layer) and is not finished.
    DISPATCH = "dispatch"
    ASK_ANALYZER = "ask_analyzer"
    ASK_RESOLVER = "ask_resolver"
    ASK_LEGACY = "ask_legacy"


INTERMEDIATE_ACTIONS = frozenset(
    {Action.DISPATCH, Action.ASK_ANALYZER, Action.ASK_RESOLVER, Action.ASK_LEGACY}
)
RETRY_ACTIONS = frozenset({Action.RETRY_SAME, Action.RETRY_CORRECTED})


@dataclass(frozen=True, slots=True)
class RuleMiss:
    """A rule evaluated before the one that fired, and why it did not match."""

    rule_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class LayerNote(JsonRecord):
    """Whether one correction layer was consulted for a decision: its verdict, or why not."""

    layer: Layer
    consulted: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Decision(JsonRecord):
    """The outcome of `decide()`: what to do, which rule said so, and why.

    Final decisions also carry seed 003's fault-matrix cell (`failure_class`, `recovery`, a
    one-line user-facing `impact`) and, for a dispatched failure, a note per correction layer.
    """

    action: Action
    rule_id: str
    reason: str
    inputs: Mapping[str, Any]
    not_matched: tuple[RuleMiss, ...] = ()
    delay_ms: float | None = None
    delay_source: str | None = None
    layer: Layer | None = None
    corrected_parameters: Mapping[str, Any] | None = None
    failure_class: FailureClass | None = None
    recovery: Recovery | None = None
    impact: str | None = None
    layers: tuple[LayerNote, ...] = ()
    budgets: Mapping[str, int | None] = field(default_factory=dict)

    @property
    def final(self) -> bool:
        """False for intermediate actions (dispatch, ask a layer)."""
        return self.action not in INTERMEDIATE_ACTIONS


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a rule's check returns: matched or not, and the one-line reason either way."""

    matched: bool
    reason: str
    delay_ms: float | None = None
    delay_source: str | None = None
    layer: Layer | None = None
    corrected_parameters: Mapping[str, Any] | None = None


def hit(reason: str, **extra: Any) -> Outcome:
    """A matching outcome."""
    return Outcome(True, reason, **extra)


def miss(reason: str) -> Outcome:
    """A non-matching outcome."""
    return Outcome(False, reason)


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the policy table. `source` names the seed section it comes from."""

    rule_id: str
    action: Action
    row: str
    source: str
    summary: str
    check: Callable[[DecisionInputs], Outcome]


# Task budget stops that end the whole task: steps not yet started are skipped.
TASK_STOP_RULE_IDS = frozenset(
    {"budget.wall_clock", "budget.wall_clock.before_dispatch", "budget.total_tokens",
     "budget.llm_calls", "budget.repeated_error"}
)
# Stops that end the step because a task-level budget (not the tool) says so; a wait that
# would outlast the wall clock, or one tool's resend budget, ends only that step.
TASK_BUDGET_RULE_IDS = TASK_STOP_RULE_IDS | {"budget.wall_clock.wait", "budget.retries_per_tool"}
