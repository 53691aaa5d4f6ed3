"""The pre-dispatch rules: evaluated before every HTTP call, first match wins."""

from __future__ import annotations

from executor.policy.decision import Action, Outcome, Rule, hit, miss
from executor.policy.inputs import DecisionInputs


def _check_cancel_before(inputs: DecisionInputs) -> Outcome:
    if inputs.cancelled:
        return hit("the run was cancelled before this dispatch")
    return miss("not cancelled")


def check_wall_clock(inputs: DecisionInputs) -> Outcome:
    limit = inputs.max_wall_clock_s
    if limit is not None and inputs.ended_by_deadline:
        return hit(
            f"the task wall-clock budget ({limit:g}s) ended the request in flight "
            f"at {inputs.elapsed_s:.3f}s; it is not resent"
        )
    if limit is not None and inputs.elapsed_s >= limit:
        return hit(f"task wall-clock budget used up: {inputs.elapsed_s:.3f}s of {limit:g}s")
    if limit is None:
        return miss("no wall-clock budget set")
    return miss(f"wall clock {inputs.elapsed_s:.3f}s is within {limit:g}s")


def _check_circuit(inputs: DecisionInputs) -> Outcome:
    if inputs.circuit_open:
        return hit("the tool's circuit breaker is open; the request is not sent")
    return miss("circuit closed or not enabled")


def _check_guard(inputs: DecisionInputs) -> Outcome:
    if inputs.guard_violations:
        return hit("pre-dispatch guard: " + "; ".join(inputs.guard_violations))
    return miss("parameters pass the pre-dispatch guard")


def _check_dispatch(inputs: DecisionInputs) -> Outcome:
    return hit("no pre-dispatch rule blocks the request")


PREDISPATCH_RULES: tuple[Rule, ...] = (
    # seed 000 §7 "Context-Aware Waiting": a cancelled context stops the step at once.
    Rule("cancel.before_dispatch", Action.STOP_CANCELLED, "12", "seed 000 §7",
         "context cancelled before the request", _check_cancel_before),
    # seed 003 "Termination conditions": every task limits wall-clock time.
    Rule("budget.wall_clock.before_dispatch", Action.STOP_BUDGET, "13", "seed 003",
         "task wall-clock budget used up", check_wall_clock),
    # SPEC §3.2: an open circuit refuses the call without sending it.
    Rule("circuit.open", Action.STOP_CIRCUIT_OPEN, "—", "seed 000 §7; SPEC §3.2",
         "per-tool circuit breaker is open", _check_circuit),
    # seed 000 §12: references, required keys, enums and container shapes before every dispatch.
    Rule("guard.reject_predispatch", Action.REJECT_PREDISPATCH, "0", "seed 000 §12",
         "unresolved binding, missing required key, enum or shape mismatch", _check_guard),
    Rule("predispatch.dispatch", Action.DISPATCH, "—", "seed 000 §4",
         "default: send the request", _check_dispatch),
)
