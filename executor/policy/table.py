"""The whole rule table and `decide()`: the pure, first-match evaluation that explains itself."""

from __future__ import annotations

from executor.policy.decision import INTERMEDIATE_ACTIONS, Decision, Rule, RuleMiss
from executor.policy.impact import fault_cell
from executor.policy.inputs import DecisionInputs
from executor.policy.layers import layer_notes
from executor.policy.rules_dispatch import PREDISPATCH_RULES
from executor.policy.rules_response import RESPONSE_RULES

ALL_RULES: tuple[Rule, ...] = PREDISPATCH_RULES + RESPONSE_RULES


def decide(inputs: DecisionInputs, *, explain: bool = True) -> Decision:
    """Evaluate the rule table for `inputs` first-match and explain the outcome.

    With `explain=False` the Decision carries only the action, rule, reason, delay, layer,
    corrected parameters and the rules not matched: no inputs, fault cell, layer notes or
    budgets (for re-deciding a store, which reports only those).
    """
    rules = RESPONSE_RULES if inputs.dispatched else PREDISPATCH_RULES
    misses: list[RuleMiss] = []
    for rule in rules:
        outcome = rule.check(inputs)
        if outcome.matched:
            if not explain:
                return Decision(
                    action=rule.action, rule_id=rule.rule_id, reason=outcome.reason, inputs={},
                    not_matched=tuple(misses), delay_ms=outcome.delay_ms,
                    delay_source=outcome.delay_source, layer=outcome.layer,
                    corrected_parameters=outcome.corrected_parameters,
                )
            final = rule.action not in INTERMEDIATE_ACTIONS
            failure_class, recovery, impact = (
                fault_cell(rule, inputs, outcome) if final else (None, None, None)
            )
            return Decision(
                action=rule.action,
                rule_id=rule.rule_id,
                reason=outcome.reason,
                inputs=inputs.to_dict(),
                not_matched=tuple(misses),
                delay_ms=outcome.delay_ms,
                delay_source=outcome.delay_source,
                layer=outcome.layer,
                corrected_parameters=outcome.corrected_parameters,
                failure_class=failure_class,
                recovery=recovery,
                impact=impact,
                layers=layer_notes(rule, inputs, outcome) if final else (),
                budgets={
                    "step_retries_left": inputs.step_retries_left,
                    "tool_retries_left": inputs.tool_retries_left,
                    "corrections_left": max(
                        0, inputs.max_validation_retries - inputs.validation_retries
                    ),
                },
            )
        misses.append(RuleMiss(rule.rule_id, outcome.reason))
    raise AssertionError("the rule table ends in a default rule that always matches")
