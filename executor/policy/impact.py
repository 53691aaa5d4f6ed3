"""Seed 003's fault-matrix cell of a final decision: failure class, recovery and impact.

seed 003: "The user sees impact, a concrete recovery action, and relevant evidence."
"""

from __future__ import annotations

import re

from executor.faults import FAULT_MATRIX, FailureClass, Recovery, classify_failure
from executor.policy.conditions import counted, source_text, status_text
from executor.policy.decision import TASK_BUDGET_RULE_IDS, Action, Outcome, Rule
from executor.policy.inputs import DecisionInputs
from executor.policy.rules_response import UNAVAILABLE_RULE_IDS

# Who corrected a `retry_corrected` resend, in words (was the layer's id: "corrected by the
# re_resolution", "by the legacy").
_CORRECTORS = {
    "analyzer": "the analyzer",
    "re_resolution": "the layer 4 re-resolver",
    "legacy": "the legacy correction callback",
}

# Actions whose recovery does not follow from the failure class alone: (recovery, consequence,
# advice); None keeps the class's own.
_ACTION_RECOVERY: dict[Action, tuple[Recovery, str, str | None]] = {
    Action.STOP_UNSAFE_RESEND: (
        Recovery.QUERY_STATUS,
        "the step stopped without resending, because the unsafe request may have been accepted",
        "ask the tool whether the request took effect before running it again",
    ),
    Action.STOP_SINGLE_DISPATCH: (
        Recovery.QUERY_STATUS,
        "the step stopped: a delegated orchestrator gets one dispatch and may have done part "
        "of the work",
        "check its status before running it again",
    ),
    Action.STOP_PROTECTED: (
        Recovery.REQUEST_AUTHORIZATION,
        "the step stopped: the correction would change HITL-approved or exact-bound inputs",
        "approve the change, or fix the step the binding reads from, then rerun",
    ),
    Action.STOP_CIRCUIT_OPEN: (
        Recovery.WAIT,
        "nothing was sent: the tool's circuit breaker is open after repeated failures",
        "wait for the breaker to half-open, then rerun the step",
    ),
    Action.REJECT_PREDISPATCH: (
        Recovery.MODIFY,
        "nothing was sent: the parameters fail the pre-dispatch guard",
        "correct the parameters (or the binding that produced them), then rerun the step",
    ),
}


def fault_cell(
    rule: Rule, inputs: DecisionInputs, outcome: Outcome
) -> tuple[FailureClass | None, Recovery | None, str]:
    """The fault-matrix class, recovery action and one-line impact of a final decision."""
    if rule.action is Action.SUCCESS:
        return None, None, f"the step succeeded ({status_text(inputs)})"
    evidence = status_text(inputs) if inputs.dispatched else "before dispatch"
    if rule.rule_id in TASK_BUDGET_RULE_IDS:
        failure_class = FailureClass.BUDGET
    elif rule.action is Action.STOP_CANCELLED:
        failure_class = FailureClass.CANCELLATION
    else:
        failure_class = classify_failure(
            inputs.status, inputs.transport_error, dispatched=inputs.dispatched
        )
    cell = FAULT_MATRIX[failure_class]
    cause = rule.summary if failure_class is FailureClass.BUDGET else cell.cause
    if inputs.transport_error == "connect" and failure_class is FailureClass.SERVER_ERROR:
        cause = "the tool could not be reached"
    recovery, consequence, advice = cell.recovery, "the step failed", cell.advice
    if rule.action is Action.RETRY_SAME:
        recovery, advice = Recovery.WAIT, None
        consequence = (
            f"the executor resends the same payload after {outcome.delay_ms or 0.0:.1f} ms "
            f"({source_text(outcome.delay_source or 'backoff')})"
        )
    elif rule.action is Action.RETRY_CORRECTED:
        recovery, advice = Recovery.MODIFY, None
        corrector = _CORRECTORS.get(outcome.layer or "", outcome.layer)
        consequence = f"the executor resends with parameters corrected by {corrector}"
    elif rule.action in _ACTION_RECOVERY:
        recovery, consequence, override = _ACTION_RECOVERY[rule.action]
        advice = override or advice
    elif rule.rule_id in UNAVAILABLE_RULE_IDS and (refused := _refusal(inputs, rule.rule_id)):
        consequence = (f"the step failed: the LLM endpoint refused the call ({refused}), so no "
                       "correction ran")
        advice = (f"{advice} (or fix the LLM credential, llm.api_key or OPENAI_API_KEY, and "
                  "rerun it)") if advice else None
    elif rule.rule_id in UNAVAILABLE_RULE_IDS:
        consequence = "the step failed: the LLM endpoint was unavailable, so no correction ran"
        advice = f"{advice} (or rerun it once the LLM endpoint answers)" if advice else None
    elif rule.rule_id == "budget.attempts":
        consequence = f"the step failed after {counted(inputs.max_attempts, 'attempt')}"
    elif rule.rule_id == "budget.corrections":
        consequence = "the step failed: its correction budget is used up"
    elif rule.rule_id == "budget.retry_after_max":
        consequence = "the step stopped rather than resend before the requested wait"
    elif rule.action is Action.STOP_REFUSED:
        consequence = "the step failed: the tool declared the error not retryable"
    elif failure_class is FailureClass.BUDGET:
        consequence = "the step stopped"
    impact = f"{cause} ({evidence}): {consequence}" + (f"; {advice}" if advice else "")
    return failure_class, recovery, impact


# `_layer_call`'s words when the endpoint's last answer was a refused credential: a 401/403 is
# never retried, so it is the last failure of that consultation.
_REFUSAL = re.compile(r"; not retried: (HTTP 40[13]) is not transient$")


def _refusal(inputs: DecisionInputs, rule_id: str) -> str | None:
    """`HTTP 401` when the layer's LLM endpoint refused its credential: no wait mends that."""
    layer = rule_id.split(".", 1)[0]
    verdict = {"analyzer": inputs.analyzer, "re_resolution": inputs.resolver,
               "legacy": inputs.legacy}[layer]  # fmt: skip
    failures = verdict.unavailable if verdict is not None else None
    found = _REFUSAL.search(failures) if failures is not None else None
    return found.group(1) if found else None
