"""Re-deciding recorded inputs under changed config: the base of a policy what-if."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from executor.backoff import BackoffConfig
from executor.config import CONFIG_FIELDS, ExecutorConfig
from executor.policy.decision import Decision
from executor.policy.inputs import DecisionInputs
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


def redecide(inputs: Mapping[str, Any], overrides: Mapping[str, Any]) -> Decision:
    """`decide()` on recorded inputs (`DecisionInputs.to_dict()` form) with config overridden.

    `overrides` maps plan `config` keys (`max_attempts`, `initial_delay_ms`, ...) to new values,
    validated as a plan's config is. Raises ValueError naming an unknown key, a config key
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
            return decide(recorded, explain=explain)
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
        return decide(replace(recorded, **changed), explain=explain)

    return apply
