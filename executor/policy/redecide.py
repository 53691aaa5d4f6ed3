"""Re-deciding recorded inputs under changed config: the base of a policy what-if.

A recorded decision is the last of its attempt's routing: its inputs carry the verdict of
every layer the step loop asked. Re-deciding walks that routing again, as the step loop does:
`decide()` without the verdicts, and each recorded verdict added only when the table asks its
layer, with the task's counters as they were when it was asked (`LayerVerdict.*_before`). A
layer the new config does not run contributes nothing; an ask whose answer is not recorded is
the re-decision (`ask_analyzer`, ...: the layer's answer cannot be known).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from executor.backoff import BackoffConfig
from executor.config import CONFIG_FIELDS, ExecutorConfig
from executor.policy.decision import Action, Decision
from executor.policy.inputs import DecisionInputs, LayerVerdict
from executor.policy.table import decide

# Config keys (the plan's `config` block) that `decide()` reads through a same-named input.
_CONFIG_INPUT_FIELDS = (
    "max_attempts", "max_validation_retries", "max_semantic_retries", "semantic_retry_enabled",
    "semantic_retry_independent_steps", "validation_feedback_enabled", "error_analyzer_enabled",
    "max_total_tokens", "max_llm_calls", "max_wall_clock_s", "max_repeated_errors",
    "retry_after_max_ms", "max_retries_per_tool",
)
# Config keys that `decide()` reads through the `backoff` input.
_CONFIG_BACKOFF_FIELDS = ("initial_delay_ms", "max_delay_ms", "backoff_factor", "jitter")
# The backoff keys, which `decide()` reads through the one `backoff` input.
REDECIDE_BACKOFF_KEYS = frozenset(_CONFIG_BACKOFF_FIELDS)
REDECIDE_KEYS = _CONFIG_INPUT_FIELDS + _CONFIG_BACKOFF_FIELDS
# The verdict slots in the order the table asks their layers (legacy only without layer 3).
_VERDICT_SLOTS = ("analyzer", "resolver", "legacy")
_SLOT_ASKED = {
    Action.ASK_ANALYZER: "analyzer", Action.ASK_RESOLVER: "resolver", Action.ASK_LEGACY: "legacy",
}
# Budget, the task counter it limits, and the verdict's record of that counter when asked.
_COUNTERS = (
    ("max_llm_calls", "llm_calls_used", "llm_calls_used_before"),
    ("max_total_tokens", "llm_tokens_used", "llm_tokens_used_before"),
    ("max_wall_clock_s", "elapsed_s", "elapsed_s_before"),
)


class IncompleteInputs(ValueError):
    """The recorded inputs lack what this re-decision reads (`missing`: their names)."""

    def __init__(self, missing: tuple[str, ...]):
        self.missing = missing
        super().__init__(f"the recorded inputs lack {', '.join(missing)}")


def route_again(inputs: DecisionInputs, *, explain: bool = True) -> Decision:
    """The decision the step loop reaches from a recorded attempt's `inputs` (config already
    changed): `decide()` before any layer was asked, then each recorded verdict added when the
    table asks its layer. Stops at an ask whose layer has no recorded verdict, or at the first
    decision that asks no layer. Raises IncompleteInputs when a budget set in `inputs` reads a
    counter the verdict did not record (decisions recorded by an older version)."""
    asked = [
        (slot, verdict) for slot in _VERDICT_SLOTS
        if (verdict := getattr(inputs, slot)) is not None
    ]
    if not asked:
        return decide(inputs, explain=explain)
    stage = replace(
        inputs, analyzer=None, resolver=None, legacy=None, cancelled=False,
        **_counters_when_asked(inputs, *asked[0]),
    )
    decision = decide(stage, explain=explain)
    for index, (slot, verdict) in enumerate(asked):
        if _SLOT_ASKED.get(decision.action) != slot:
            return decision
        if index + 1 < len(asked):
            after = _counters_when_asked(inputs, *asked[index + 1])
        else:  # the recorded inputs are those after the last layer answered
            after = {name: getattr(inputs, name) for _, name, _ in _COUNTERS}
            after["cancelled"] = inputs.cancelled
        stage = replace(stage, **{slot: verdict}, **after)
        decision = decide(stage, explain=explain)
    return decision


def _counters_when_asked(
    inputs: DecisionInputs, slot: str, verdict: LayerVerdict
) -> dict[str, Any]:
    """The task counters when `verdict`'s layer was asked; a counter no budget reads (its
    budget unset) keeps the recorded value."""
    counters: dict[str, Any] = {}
    missing: list[str] = []
    for budget, name, recorded_as in _COUNTERS:
        value = getattr(verdict, recorded_as)
        if value is None:
            if getattr(inputs, budget) is not None:
                missing.append(f"{slot}.{recorded_as}")
            value = getattr(inputs, name)
        counters[name] = value
    if missing:
        raise IncompleteInputs(tuple(missing))
    return counters


def redecide(inputs: Mapping[str, Any], overrides: Mapping[str, Any]) -> Decision:
    """`decide()` on recorded inputs (`DecisionInputs.to_dict()` form) with config overridden.

    `overrides` maps plan `config` keys (`max_attempts`, `initial_delay_ms`, ...) to new values,
    validated as a plan's config is; the layers are asked again as the step loop asks them
    (`route_again`). Raises IncompleteInputs for inputs recorded without what the new config
    makes it read, and ValueError naming an unknown key, a config key
    `decide()` does not read (`timeout_s`), a bad value, or a bad recorded input.
    """
    return redecider(overrides)(inputs)


def redecider(
    overrides: Mapping[str, Any], *, explain: bool = True
) -> Callable[[Mapping[str, Any]], Decision]:
    """`redecide` with `overrides` checked once: a function of the recorded inputs alone, for
    re-deciding a whole store. Raises ValueError (or ConfigError) for a bad override.
    `explain=False` returns Decisions without inputs, fault cell or layer notes (`decide`)."""
    for key in overrides:
        if key in REDECIDE_KEYS:
            continue
        if key in CONFIG_FIELDS:
            raise ValueError(
                f"config key {key!r} does not change a decision (decide() reads only: "
                f"{', '.join(REDECIDE_KEYS)})"
            )
        raise ValueError(
            f"unknown config key {key!r} (expected one of: {', '.join(REDECIDE_KEYS)})"
        )
    config = ExecutorConfig(**dict(overrides))  # validates each value; ConfigError names it
    updates: dict[str, Any] = {
        key: getattr(config, key) for key in _CONFIG_INPUT_FIELDS if key in overrides
    }
    backoff_overrides = {
        key: getattr(config, key) for key in _CONFIG_BACKOFF_FIELDS if key in overrides
    }

    def apply(inputs: Mapping[str, Any]) -> Decision:
        recorded = DecisionInputs.from_dict(inputs)
        if not updates and not backoff_overrides:
            return route_again(recorded, explain=explain)
        changed = dict(updates)
        if backoff_overrides:
            backoff = recorded.backoff
            current = {
                "initial_delay_ms": backoff.initial_delay_ns / 1_000_000,
                "max_delay_ms": backoff.max_delay_ns / 1_000_000,
                "backoff_factor": backoff.backoff_factor,
                "jitter": backoff.jitter_enabled,
                **backoff_overrides,
            }
            changed["backoff"] = BackoffConfig.from_ms(
                current["initial_delay_ms"], current["max_delay_ms"], current["backoff_factor"],
                current["jitter"],
            )
        return route_again(replace(recorded, **changed), explain=explain)

    return apply
