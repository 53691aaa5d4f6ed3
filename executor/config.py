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
    "CONFIG_MAXIMA",
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
    if isinstance(value, int) and value.bit_length() > 14_000:  # str() refuses > 4300 digits
        return "an integer of more than 4000 digits"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    if isinstance(value, int) and len(text) > 40:
        return f"{text[:12]}… (an integer of {len(text.lstrip('-'))} digits)"
    return text


# ---------------------------------------------------------------------------------------------
# Field validators: (expected description, accepts value) → normalised value or ConfigError
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FieldRule:
    """How one config field is validated: its description for errors, its check and its
    documented maximum (None for booleans)."""

    expected: str
    normalise: Callable[[Any], Any | None]
    optional: bool = False
    maximum: int | None = None
    unit: str = ""


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
        try:
            number = float(value)
        except OverflowError:  # an int beyond float range
            return math.inf
        if not math.isfinite(number):
            return None
        if number > minimum or (inclusive and number == minimum):
            return number
        return None

    return check


def _boolean(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _integer(minimum: int, maximum: int, *, optional: bool = False) -> _FieldRule:
    expected = f"an integer >= {minimum}" + (" or null" if optional else "")
    return _FieldRule(expected, _integer_at_least(minimum), optional, maximum, "an integer")


def _number(
    unit: str, minimum: float, maximum: int, *, inclusive: bool = True, optional: bool = False
) -> _FieldRule:
    noun = f"a number of {unit}" if unit else "a number"
    expected = f"{noun} {'>=' if inclusive else '>'} {minimum:g}" + (" or null" if optional else "")
    return _FieldRule(
        expected, _number_at_least(minimum, inclusive=inclusive), optional, maximum, noun
    )


_BOOLEAN = _FieldRule("true or false", _boolean)

# Documented maxima (docs/plan-file.md): far above any sensible value, low enough that a typo
# such as 10**30 attempts cannot make a run that never ends.
_FIELD_RULES: dict[str, _FieldRule] = {
    "max_attempts": _integer(1, 100),
    "initial_delay_ms": _number("milliseconds", 0, 3_600_000),
    "max_delay_ms": _number("milliseconds", 0, 3_600_000),
    "backoff_factor": _number("", 0, 100),
    "jitter": _BOOLEAN,
    "max_validation_retries": _integer(0, 100),
    "max_semantic_retries": _integer(0, 100),
    "semantic_retry_enabled": _BOOLEAN,
    "semantic_retry_independent_steps": _BOOLEAN,
    "validation_feedback_enabled": _BOOLEAN,
    "error_analyzer_enabled": _BOOLEAN,
    "timeout_s": _number("seconds", 0, 86_400, inclusive=False),
    "max_response_body_bytes": _integer(1, 1 << 30),
    "max_concurrency": _integer(1, 1_000),
    "max_total_tokens": _integer(0, 1_000_000_000_000, optional=True),
    "max_llm_calls": _integer(0, 1_000_000, optional=True),
    "max_wall_clock_s": _number("seconds", 0, 604_800, inclusive=False, optional=True),
    "max_repeated_errors": _integer(1, 1_000_000, optional=True),
    "retry_after_max_ms": _number("milliseconds", 0, 86_400_000, optional=True),
    "max_retries_per_tool": _integer(0, 1_000_000, optional=True),
    "circuit_breaker_enabled": _BOOLEAN,
    "llm_debug_enabled": _BOOLEAN,
}

CONFIG_MAXIMA: dict[str, int] = {
    name: rule.maximum for name, rule in _FIELD_RULES.items() if rule.maximum is not None
}


def _validated(field: str, value: Any) -> Any:
    """`value` normalised for `field` (ints stay int, numbers become float), or ConfigError."""
    rule = _FIELD_RULES[field]
    if value is None and rule.optional:
        return None
    normalised = None if value is None else rule.normalise(value)
    if normalised is None:
        raise ConfigError(field, rule.expected, _describe(value))
    if rule.maximum is not None and normalised > rule.maximum:
        expected = f"{rule.unit} <= {rule.maximum} (the documented maximum)"
        raise ConfigError(field, expected, _describe(value))
    return normalised


@dataclass(frozen=True, slots=True)
class ExecutorConfig:
    """Resolved executor settings: the plan file's `config` keys (SPEC §3.1) plus task budgets.

    Defaults follow seed 000 §9 and seed 001. `timeout_s` is the per-HTTP-call timeout;
    `max_response_body_bytes` bounds a tool's response body once decoded (a longer one is a
    failed request, `ResponseTooLarge`);
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
    max_response_body_bytes: int = 64 << 20
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
    """Read one non-empty variable the way TruvaG3 does; invalid text is ignored, not an error,
    and so is a value above the field's documented maximum."""
    reading = _read_env_text(setting, text)
    maximum = _FIELD_RULES[setting.field].maximum
    if reading.ignored_because is None and maximum is not None and reading.value > maximum:
        shown = f"{maximum} ms" if setting.kind == "duration_ms" else (
            f"{maximum} s" if setting.kind == "duration_s" else str(maximum)
        )
        return _EnvReading(ignored_because=f"above the documented maximum {shown}")
    return reading


def _read_env_text(setting: _EnvSetting, text: str) -> _EnvReading:
    """The reading of one variable's text, before the maximum is applied."""
    if setting.kind == "bool":
        # Only "true" in any case is true; any other value is false (reference notes §10.4).
        enabled = text.lower() == "true"
        if not enabled and text.lower() != "false":
            return _EnvReading(False, note="read as false: only 'true' (any case) enables it")
        return _EnvReading(enabled)
    if setting.kind == "int":
        if not _GO_INTEGER.fullmatch(text):
            return _EnvReading(ignored_because=f"expected an integer >= {setting.minimum}")
        if len(text.lstrip("+-").lstrip("0")) > 19:  # beyond Go's int64 (and int()'s limit)
            return _EnvReading(ignored_because="expected an integer that fits in 64 bits")
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
    bad explicit value raises ConfigError; a bad or out-of-range environment value is ignored
    (see `env_warnings`) and its field's source says so:
    `default (TRUVAG3_STEP_RETRY_MAX_ATTEMPTS='1000' ignored: above the documented maximum 100)`.
    """
    explicit = explicit or {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = dict.fromkeys(sorted(CONFIG_FIELDS), "default")
    for setting, text, reading in _env_readings(env):
        if reading.ignored_because is None:
            values[setting.field] = reading.value
            sources[setting.field] = "env"
        else:
            sources[setting.field] = (
                f"default ({setting.variable}={text!r} ignored: {reading.ignored_because})"
            )
    for field, value in explicit.items():
        if field not in CONFIG_FIELDS:
            raise ConfigError(str(field), _known_key_hint(str(field)), "an unknown key")
        values[field] = _validated(field, value)
        sources[field] = "explicit"
    return ExecutorConfig(**values), sources
