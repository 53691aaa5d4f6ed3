"""The routing policy as data: a first-match rule table and a pure `decide()` that explains itself.

`decide()` never sleeps, sends or logs. It reads a frozen `DecisionInputs` and returns a frozen
`Decision` naming the action, the rule that fired, a one-line reason, the inputs it read, and why
each earlier rule did not match. When a correction layer has to be consulted, the decision is an
intermediate `ask_*` action; the step loop asks the layer, adds its verdict to the inputs and
calls `decide()` again. Rule ids are stable and listed in docs/rules.md.

The package: `inputs` (what a decision reads), `decision` (what it returns), `conditions`
(shared wording and tests), `rules_dispatch` and `rules_response` (the two rule tables),
`layers` (why-not notes, judging corrections), `impact` (seed 003's fault-matrix cell),
`table` (`decide()`), `redecide` (recorded inputs under changed config), `redecide_key` (what
a re-decision reads, to decide identical recorded inputs once).
"""

from executor.policy.decision import (
    INTERMEDIATE_ACTIONS,
    RETRY_ACTIONS,
    TASK_BUDGET_RULE_IDS,
    TASK_STOP_RULE_IDS,
    Action,
    Decision,
    LayerNote,
    Outcome,
    Rule,
    RuleMiss,
)
from executor.policy.inputs import DecisionInputs, Layer, LayerVerdict
from executor.policy.layers import assess_correction, with_verdict
from executor.policy.redecide import REDECIDE_KEYS, redecide, redecider
from executor.policy.rules_dispatch import PREDISPATCH_RULES
from executor.policy.rules_response import RESPONSE_RULES, UNAVAILABLE_RULE_IDS
from executor.policy.table import ALL_RULES, decide

__all__ = [
    "ALL_RULES",
    "INTERMEDIATE_ACTIONS",
    "PREDISPATCH_RULES",
    "REDECIDE_KEYS",
    "RESPONSE_RULES",
    "RETRY_ACTIONS",
    "TASK_BUDGET_RULE_IDS",
    "TASK_STOP_RULE_IDS",
    "UNAVAILABLE_RULE_IDS",
    "Action",
    "Decision",
    "DecisionInputs",
    "Layer",
    "LayerNote",
    "LayerVerdict",
    "Outcome",
    "Rule",
    "RuleMiss",
    "assess_correction",
    "decide",
    "redecide",
    "redecider",
    "with_verdict",
]
