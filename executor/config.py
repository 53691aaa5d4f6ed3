"""Executor configuration: defaults, `TRUVAG3_*` environment overrides and explicit plan values."""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from executor.backoff import BackoffConfig
from executor.durations import (
    NANOSECONDS_PER_MILLISECOND,
    NANOSECONDS_PER_SECOND,
    parse_go_duration,
)

__all__ = [
    "CONFIG_FIELDS",
    "ConfigError",
    "ExecutorConfig",
    "env_warnings",
    "parse_go_duration",
    "resolve_config",
]


class ConfigError(ValueError):
    """An explicit config value has the wrong type or range; str() names the field."""

    def __init__(self, field: str, expected: str, received: str) -> None:
        self.field = field
        self.expected = expected
        self.received = received
        super().__init__(f"config.{field}: expected {expected}, got {received}")


def _describe(value: Any) -> str:
    """A value as the user wrote it in JSON (`0`, `"3"`, `null`), for error messages."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


# ---------------------------------------------------------------------------------------------
# Field validators: (expected description, accepts value) → normalised value or ConfigError
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FieldRule:
    """How one config field is validated: its description for errors and its check."""

    expected: str
    normalise: Callable[[Any], Any | None]
    optional: bool = False


def _integer_at_least(minimum: int) -> Callable[[Any], int | None]:
    def check(value: Any) -> int | None:
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            return value
        return None

    return check


def _number_at_least(minimum: float, *, inclusive: bool = True) -> Callable[[Any], float | None]:
    def check(value: Any) -> float | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        number = float(value)
        if not math.isfinite(number):
            return None
        if number > minimum or (inclusive and number == minimum):
            return number
        return None

    return check


def _boolean(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


_FIELD_RULES: dict[str, _FieldRule] = {
    "max_attempts": _FieldRule("an integer >= 1", _integer_at_least(1)),
    "initial_delay_ms": _FieldRule("a number of milliseconds >= 0", _number_at_least(0)),
    "max_delay_ms": _FieldRule("a number of milliseconds >= 0", _number_at_least(0)),
    "backoff_factor": _FieldRule("a number >= 0", _number_at_least(0)),
    "jitter": _FieldRule("true or false", _boolean),
    "max_validation_retries": _FieldRule("an integer >= 0", _integer_at_least(0)),
    "max_semantic_retries": _FieldRule("an integer >= 0", _integer_at_least(0)),
    "semantic_retry_enabled": _FieldRule("true or false", _boolean),
    "semantic_retry_independent_steps": _FieldRule("true or false", _boolean),
    "validation_feedback_enabled": _FieldRule("true or false", _boolean),
    "error_analyzer_enabled": _FieldRule("true or false", _boolean),
    "timeout_s": _FieldRule("a number of seconds > 0", _number_at_least(0, inclusive=False)),
    "max_concurrency": _FieldRule("an integer >= 1", _integer_at_least(1)),
    "max_total_tokens": _FieldRule("an integer >= 0 or null", _integer_at_least(0), True),
    "max_llm_calls": _FieldRule("an integer >= 0 or null", _integer_at_least(0), True),
    "max_wall_clock_s": _FieldRule(
        "a number of seconds > 0 or null", _number_at_least(0, inclusive=False), True
    ),
    "max_repeated_errors": _FieldRule("an integer >= 1 or null", _integer_at_least(1), True),
    "retry_after_max_ms": _FieldRule(
        "a number of milliseconds >= 0 or null", _number_at_least(0), True
    ),
    "max_retries_per_tool": _FieldRule("an integer >= 0 or null", _integer_at_least(0), True),
    "circuit_breaker_enabled": _FieldRule("true or false", _boolean),
    "llm_debug_enabled": _FieldRule("true or false", _boolean),
}


def _validated(field: str, value: Any) -> Any:
    """`value` normalised for `field` (ints stay int, numbers become float), or ConfigError."""
    rule = _FIELD_RULES[field]
    if value is None and rule.optional:
        return None
    normalised = None if value is None else rule.normalise(value)
    if normalised is None:
        raise ConfigError(field, rule.expected, _describe(value))
    return normalised


@dataclass(frozen=True, slots=True)
class ExecutorConfig:
    """Resolved executor settings: the plan file's `config` keys (SPEC §3.1) plus task budgets.

    Defaults follow seed 000 §9 and seed 001. `timeout_s` is the per-HTTP-call timeout;
    `retry_after_max_ms` is the longest Retry-After wait honoured (a longer one stops the step
    with `stop_budget`; None: no limit but the wall clock); `max_delay_ms` caps only the
    computed backoff; `max_retries_per_tool` None means unlimited;
    `llm_debug_enabled` defaults to true here (TruvaG3 defaults it to false) because recording
    LLM prompts and responses is what this tool is for. Values are validated on construction.
    """

    max_attempts: int = 3
    initial_delay_ms: float = 500
    max_delay_ms: float = 10000
    backoff_factor: float = 2.0
    jitter: bool = True
    max_validation_retries: int = 2
    max_semantic_retries: int = 2
    semantic_retry_enabled: bool = True
    semantic_retry_independent_steps: bool = True
    validation_feedback_enabled: bool = True
    error_analyzer_enabled: bool = True
    timeout_s: float = 1200
    max_concurrency: int = 5
    max_total_tokens: int | None = None
    max_llm_calls: int | None = None
    max_wall_clock_s: float | None = None
    max_repeated_errors: int | None = None
    retry_after_max_ms: float | None = 60000
    max_retries_per_tool: int | None = None
    circuit_breaker_enabled: bool = False
    llm_debug_enabled: bool = True

    def __post_init__(self) -> None:
        for field in _FIELD_RULES:
            object.__setattr__(self, field, _validated(field, getattr(self, field)))

    def backoff(self) -> BackoffConfig:
        """The step-retry backoff these settings describe."""
        return BackoffConfig.from_ms(
            self.initial_delay_ms, self.max_delay_ms, self.backoff_factor, self.jitter
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field by name, JSON-ready."""
        return dataclasses.asdict(self)


CONFIG_FIELDS: frozenset[str] = frozenset(f.name for f in dataclasses.fields(ExecutorConfig))
_DEFAULTS = ExecutorConfig()


# ---------------------------------------------------------------------------------------------
# Environment variables (seed 000 §9, seed 001, reference notes §3.6, §10.3, §10.4)
# ---------------------------------------------------------------------------------------------

_GO_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)


@dataclass(frozen=True, slots=True)
class _EnvSetting:
    """One environment variable: the field it sets and how its text is read."""

    variable: str
    field: str
    kind: str  # "duration_ms", "duration_s", "int", "bool"
    minimum: int = 0


_ENV_SETTINGS: tuple[_EnvSetting, ...] = (
    _EnvSetting("TRUVAG3_STEP_RETRY_INITIAL_DELAY", "initial_delay_ms", "duration_ms"),
    _EnvSetting("TRUVAG3_STEP_RETRY_MAX_DELAY", "max_delay_ms", "duration_ms"),
    _EnvSetting("TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", "max_attempts", "int", minimum=1),
    _EnvSetting("TRUVAG3_SEMANTIC_RETRY_ENABLED", "semantic_retry_enabled", "bool"),
    _EnvSetting("TRUVAG3_SEMANTIC_RETRY_MAX_ATTEMPTS", "max_semantic_retries", "int", minimum=0),
    _EnvSetting(
        "TRUVAG3_SEMANTIC_RETRY_INDEPENDENT_STEPS", "semantic_retry_independent_steps", "bool"
    ),
    _EnvSetting("TRUVAG3_ORCHESTRATION_TIMEOUT", "timeout_s", "duration_s"),
    _EnvSetting("TRUVAG3_EXECUTION_MAX_CONCURRENCY", "max_concurrency", "int", minimum=1),
    _EnvSetting("TRUVAG3_LLM_DEBUG_ENABLED", "llm_debug_enabled", "bool"),
    # Not a TruvaG3 variable: the twin of the plan's max_retries_per_tool (seed 003).
    _EnvSetting("TRUVAG3_STEP_RETRY_MAX_PER_TOOL", "max_retries_per_tool", "int", minimum=0),
)

ENV_VARIABLES: tuple[str, ...] = tuple(setting.variable for setting in _ENV_SETTINGS)


@dataclass(frozen=True, slots=True)
class _EnvReading:
    """What one set environment variable gives: a value, or why it was ignored."""

    value: Any = None
    ignored_because: str | None = None
    note: str | None = None


def _read_env(setting: _EnvSetting, text: str) -> _EnvReading:
    """Read one non-empty variable the way TruvaG3 does; invalid text is ignored, not an error."""
    if setting.kind == "bool":
        # Only "true" in any case is true; any other value is false (reference notes §10.4).
        enabled = text.lower() == "true"
        if not enabled and text.lower() != "false":
            return _EnvReading(False, note="read as false: only 'true' (any case) enables it")
        return _EnvReading(enabled)
    if setting.kind == "int":
        if not _GO_INTEGER.fullmatch(text):
            return _EnvReading(ignored_because=f"expected an integer >= {setting.minimum}")
        number = int(text)
        if number < setting.minimum:
            return _EnvReading(ignored_because=f"expected an integer >= {setting.minimum}")
        return _EnvReading(number)
    try:
        duration_ns = parse_go_duration(text)
    except ValueError:
        return _EnvReading(ignored_because="expected a Go duration such as 500ms, 2s or 1m")
    if setting.kind == "duration_ms":
        if duration_ns < 0:
            return _EnvReading(ignored_because="expected a duration >= 0")
        return _EnvReading(duration_ns / NANOSECONDS_PER_MILLISECOND)
    if duration_ns <= 0:
        return _EnvReading(ignored_because="expected a duration > 0")
    return _EnvReading(duration_ns / NANOSECONDS_PER_SECOND)


def _env_readings(env: Mapping[str, str] | None) -> list[tuple[_EnvSetting, str, _EnvReading]]:
    """Each set, non-empty TruvaG3 variable with its text and reading (empty counts as unset)."""
    source = os.environ if env is None else env
    readings = []
    for setting in _ENV_SETTINGS:
        text = source.get(setting.variable, "")
        if text:
            readings.append((setting, text, _read_env(setting, text)))
    return readings


def env_warnings(env: Mapping[str, str] | None = None) -> list[str]:
    """One line per environment value that was ignored or read differently than it may look."""
    warnings = []
    for setting, text, reading in _env_readings(env):
        if reading.ignored_because is not None:
            default = getattr(_DEFAULTS, setting.field)
            warnings.append(
                f"{setting.variable}={text!r} ignored: {reading.ignored_because}; "
                f"keeping the default {setting.field}={_describe(default)}"
            )
        elif reading.note is not None:
            warnings.append(f"{setting.variable}={text!r} {reading.note}")
    return warnings


def _known_key_hint(field: str) -> str:
    close = difflib.get_close_matches(field, sorted(CONFIG_FIELDS), n=1)
    if close:
        return f"a known config key (did you mean {close[0]!r}?)"
    return f"one of {', '.join(sorted(CONFIG_FIELDS))}"


def resolve_config(
    explicit: Mapping[str, Any] | None, env: Mapping[str, str] | None = None
) -> tuple[ExecutorConfig, dict[str, str]]:
    """The config for a run and, per field, where its value came from.

    Precedence is explicit (the plan's `config` block) > environment > default; sources are
    "explicit", "env" or "default". `env` None reads `os.environ`. An explicit unknown key or a
    bad explicit value raises ConfigError; a bad environment value is ignored (see
    `env_warnings`).
    """
    explicit = explicit or {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = dict.fromkeys(sorted(CONFIG_FIELDS), "default")
    for setting, _text, reading in _env_readings(env):
        if reading.ignored_because is None:
            values[setting.field] = reading.value
            sources[setting.field] = "env"
    for field, value in explicit.items():
        if field not in CONFIG_FIELDS:
            raise ConfigError(str(field), _known_key_hint(str(field)), "an unknown key")
        values[field] = _validated(field, value)
        sources[field] = "explicit"
    return ExecutorConfig(**values), sources
