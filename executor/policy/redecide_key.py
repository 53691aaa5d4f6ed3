"""Which recorded inputs can change a re-decision: the key that groups identical re-decisions.

Re-deciding a whole store decides once per distinct key and counts the rest. The key carries
every `DecisionInputs` field by value, except fields whose value cannot change the outcome the
what-if reports (action, rule id, reason, delay): those are carried by JSON type only, which is
all `DecisionInputs.from_dict` checks of them, so a key also decides whether the inputs are
readable. A field is carried by type when no rule reads it (`executor.rule_reads`), when the
overrides replace it, or when the budget that gates it is unset (`GATED_BY`).
`tests/unit/test_redecide_key.py` traces the rules to check both tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from executor.config import ExecutorConfig
from executor.policy.inputs import DecisionInputs
from executor.policy.redecide import REDECIDE_BACKOFF_KEYS
from executor.rule_reads import RULE_READS

INPUT_FIELD_NAMES: tuple[str, ...] = tuple(item.name for item in fields(DecisionInputs))
# `decide()` itself reads `dispatched` to choose the table.
_READ_BY_SOME_RULE = frozenset({"dispatched"}).union(*RULE_READS.values())
# Fields no rule reads: only their JSON type matters (to from_dict).
NEVER_READ = tuple(name for name in INPUT_FIELD_NAMES if name not in _READ_BY_SOME_RULE)
# Budget → the fields only its rules read, and only when it is set (not None).
GATED_BY: dict[str, tuple[str, ...]] = {
    "max_wall_clock_s": ("elapsed_s", "ended_by_deadline"),
    "max_total_tokens": ("llm_tokens_used",),
    "max_llm_calls": ("llm_calls_used",),
    "max_repeated_errors": ("repeated_error_count",),
    "max_retries_per_tool": ("tool_retries_used", "tool"),
}


@dataclass(frozen=True, slots=True)
class RedecideKey:
    """How to key recorded inputs under one set of overrides.

    `by_value` fields always count by value; `by_type` fields by JSON type only; each
    `gated` entry (budget, fields) counts the fields by value when the recorded budget is set
    and by type when it is null.
    """

    by_value: tuple[str, ...]
    by_type: tuple[str, ...]
    gated: tuple[tuple[str, tuple[str, ...]], ...]


def redecide_key(overrides: Mapping[str, Any]) -> RedecideKey:
    """The key for re-deciding under `overrides` (plan `config` keys, already checked by
    `redecider`). A budget the overrides set decides its gated fields for every decision."""
    config = ExecutorConfig(**dict(overrides))
    replaced = {key for key in overrides if key not in REDECIDE_BACKOFF_KEYS}
    by_type = set(NEVER_READ) | replaced
    gated: list[tuple[str, tuple[str, ...]]] = []
    for budget, gated_fields in GATED_BY.items():
        if budget in overrides:
            if getattr(config, budget) is None:
                by_type.update(gated_fields)
        else:
            gated.append((budget, gated_fields))
    in_gates = {name for _, names in gated for name in names}
    by_value = tuple(
        name for name in INPUT_FIELD_NAMES if name not in by_type and name not in in_gates
    )
    return RedecideKey(
        by_value=by_value,
        by_type=tuple(name for name in INPUT_FIELD_NAMES if name in by_type),
        gated=tuple(gated),
    )
