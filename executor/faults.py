"""The fault matrix of seed 003: failure class → recovery action, and a one-line user-facing impact.

Seed 003: "The fault matrix covers schema, permission, missing resource, rate limit, timeout, server
error, result parsing, and cancellation. Every cell specifies modify, wait, query status, request
authorization, stop, or escalate", and "The user sees impact, a concrete recovery action, and
relevant evidence." Quota is a class of its own ("Rephrasing cannot fix account quota").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Recovery(StrEnum):
    """The six recovery actions of seed 003's fault matrix."""

    MODIFY = "modify"
    WAIT = "wait"
    QUERY_STATUS = "query status"
    REQUEST_AUTHORIZATION = "request authorization"
    STOP = "stop"
    ESCALATE = "escalate"


class FailureClass(StrEnum):
    """Where a failure comes from, which says who can repair it (seed 003)."""

    SCHEMA = "schema"
    PERMISSION = "permission"
    MISSING_RESOURCE = "missing resource"
    RATE_LIMIT = "rate limit"
    TIMEOUT = "timeout"
    SERVER_ERROR = "server error"
    RESULT_PARSING = "result parsing"
    CANCELLATION = "cancellation"
    QUOTA = "quota"
    BUDGET = "budget"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class FaultCell:
    """One row of the matrix: the recovery for a class and what the user is told happened."""

    failure_class: FailureClass
    recovery: Recovery
    cause: str
    advice: str


# seed 003 "Classify by failure location": the class names who can repair the problem.
FAULT_MATRIX: dict[FailureClass, FaultCell] = {
    cell.failure_class: cell
    for cell in (
        FaultCell(FailureClass.SCHEMA, Recovery.MODIFY,
                  "the tool rejected the parameters",
                  "correct the parameters (or the plan), then rerun the step"),
        FaultCell(FailureClass.PERMISSION, Recovery.REQUEST_AUTHORIZATION,
                  "the tool refused the credentials or the method",
                  "fix the API key or permissions, then rerun the step"),
        FaultCell(FailureClass.MISSING_RESOURCE, Recovery.MODIFY,
                  "the tool found nothing for these parameters",
                  "correct the identifier the step asks for, then rerun the step"),
        FaultCell(FailureClass.RATE_LIMIT, Recovery.WAIT,
                  "the tool is rate limiting",
                  "wait for the limit to reset, then rerun the step"),
        FaultCell(FailureClass.TIMEOUT, Recovery.WAIT,
                  "the request timed out",
                  "wait and rerun the step, or raise the timeout"),
        FaultCell(FailureClass.SERVER_ERROR, Recovery.WAIT,
                  "the tool or its upstream is failing",
                  "wait for the service to recover, then rerun the step"),
        FaultCell(FailureClass.RESULT_PARSING, Recovery.ESCALATE,
                  "the tool answered 2xx with a body that is not a JSON object",
                  "report the tool's broken response contract to its owner"),
        FaultCell(FailureClass.CANCELLATION, Recovery.STOP,
                  "the run was cancelled",
                  "nothing to repair; rerun when wanted"),
        FaultCell(FailureClass.QUOTA, Recovery.ESCALATE,
                  "the account's quota or payment is exhausted",
                  "ask the account owner to restore the quota; rephrasing cannot fix it"),
        FaultCell(FailureClass.BUDGET, Recovery.STOP,
                  "a task budget was reached",
                  "raise the budget in the plan's config if the cost is acceptable, then rerun"),
        FaultCell(FailureClass.UNKNOWN, Recovery.ESCALATE,
                  "the tool answered with a status no rule routes",
                  "check the tool's response contract"),
    )
}


def classify_failure(
    status: int | None, transport_error: str | None, *, dispatched: bool
) -> FailureClass:
    """The failure class of one attempt's outcome (before any budget or override)."""
    if not dispatched:
        return FailureClass.SCHEMA
    if transport_error == "cancelled":
        return FailureClass.CANCELLATION
    if status == 0:
        return FailureClass.TIMEOUT if transport_error in {"timeout", "deadline"} else (
            FailureClass.SERVER_ERROR
        )
    code = status or 0
    if 200 <= code < 300:
        return FailureClass.RESULT_PARSING
    if code == 402:
        return FailureClass.QUOTA
    if code in (401, 403, 405):
        return FailureClass.PERMISSION
    if code == 429:
        return FailureClass.RATE_LIMIT
    if code == 408:
        return FailureClass.TIMEOUT
    if code in (404, 410):
        return FailureClass.MISSING_RESOURCE
    if 400 <= code < 500:
        return FailureClass.SCHEMA
    if 500 <= code < 600:
        return FailureClass.SERVER_ERROR
    return FailureClass.UNKNOWN
