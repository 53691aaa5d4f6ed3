"""Executor config: defaults, TRUVAG3_* env tables (reference notes §10.3, §10.4), precedence."""

from __future__ import annotations

import dataclasses
import json

import pytest

from executor.backoff import BackoffConfig
from executor.config import (
    CONFIG_FIELDS,
    CONFIG_MAXIMA,
    ConfigError,
    ExecutorConfig,
    env_warnings,
    parse_go_duration,
    resolve_config,
)

EXPECTED_DEFAULTS = {
    "max_attempts": 3,
    "initial_delay_ms": 500.0,
    "max_delay_ms": 10000.0,
    "backoff_factor": 2.0,
    "jitter": True,
    "max_validation_retries": 2,
    "max_semantic_retries": 2,
    "semantic_retry_enabled": True,
    "semantic_retry_independent_steps": True,
    "validation_feedback_enabled": True,
    "error_analyzer_enabled": True,
    "timeout_s": 1200.0,
    "max_response_body_bytes": 67108864,
    "max_concurrency": 5,
    "max_total_tokens": None,
    "max_llm_calls": None,
    "max_wall_clock_s": None,
    "max_repeated_errors": None,
    "retry_after_max_ms": 60000,
    "max_retries_per_tool": None,
    "circuit_breaker_enabled": False,
    "llm_debug_enabled": True,
}


def test_defaults_and_field_set() -> None:
    assert ExecutorConfig().to_dict() == EXPECTED_DEFAULTS
    assert set(EXPECTED_DEFAULTS) == CONFIG_FIELDS
    assert [field.name for field in dataclasses.fields(ExecutorConfig)] == list(EXPECTED_DEFAULTS)


def test_resolve_with_nothing_gives_defaults_from_default() -> None:
    config, sources = resolve_config(None, env={})
    assert config == ExecutorConfig()
    assert sources == dict.fromkeys(CONFIG_FIELDS, "default")


def test_backoff_from_config() -> None:
    config = ExecutorConfig(
        initial_delay_ms=750, max_delay_ms=30_000, backoff_factor=3, jitter=False
    )
    assert config.backoff() == BackoffConfig(750_000_000, 30_000_000_000, 3.0, False)
    assert ExecutorConfig().backoff() == BackoffConfig()


# ---------------------------------------------------------------------------------------------
# Environment tables. `None` as the env value means unset; the expected value is the field's.
# ---------------------------------------------------------------------------------------------

ENV_CASES = [
    # Reference notes §10.3: TestSmartExecutor_EnvVar_StepRetryInitialDelay.
    ("initial_delay_2s", "TRUVAG3_STEP_RETRY_INITIAL_DELAY", "2s", "initial_delay_ms", 2000.0),
    ("initial_delay_750ms", "TRUVAG3_STEP_RETRY_INITIAL_DELAY", "750ms", "initial_delay_ms", 750.0),
    (
        "initial_delay_invalid",
        "TRUVAG3_STEP_RETRY_INITIAL_DELAY",
        "not-a-duration",
        "initial_delay_ms",
        500.0,
    ),
    ("initial_delay_empty", "TRUVAG3_STEP_RETRY_INITIAL_DELAY", "", "initial_delay_ms", 500.0),
    ("initial_delay_zero", "TRUVAG3_STEP_RETRY_INITIAL_DELAY", "0s", "initial_delay_ms", 0.0),
    (
        "initial_delay_negative",
        "TRUVAG3_STEP_RETRY_INITIAL_DELAY",
        "-1s",
        "initial_delay_ms",
        500.0,
    ),
    ("initial_delay_no_unit", "TRUVAG3_STEP_RETRY_INITIAL_DELAY", "2", "initial_delay_ms", 500.0),
    ("initial_delay_micro", "TRUVAG3_STEP_RETRY_INITIAL_DELAY", "300us", "initial_delay_ms", 0.3),
    # Reference notes §10.3: MAX_DELAY.
    ("max_delay_30s", "TRUVAG3_STEP_RETRY_MAX_DELAY", "30s", "max_delay_ms", 30000.0),
    ("max_delay_1m", "TRUVAG3_STEP_RETRY_MAX_DELAY", "1m", "max_delay_ms", 60000.0),
    ("max_delay_xyz", "TRUVAG3_STEP_RETRY_MAX_DELAY", "xyz", "max_delay_ms", 10000.0),
    ("max_delay_compound", "TRUVAG3_STEP_RETRY_MAX_DELAY", "1m30.5s", "max_delay_ms", 90500.0),
    # Reference notes §10.3: MAX_ATTEMPTS.
    ("max_attempts_5", "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", "5", "max_attempts", 5),
    ("max_attempts_1", "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", "1", "max_attempts", 1),
    ("max_attempts_0", "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", "0", "max_attempts", 3),
    ("max_attempts_minus_1", "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", "-1", "max_attempts", 3),
    ("max_attempts_many", "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", "many", "max_attempts", 3),
    ("max_attempts_empty", "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", "", "max_attempts", 3),
    ("max_attempts_padded", "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", " 5", "max_attempts", 3),
    ("max_attempts_decimal", "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", "2.0", "max_attempts", 3),
    ("max_attempts_plus_sign", "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", "+4", "max_attempts", 4),
    # Reference notes §10.4: semantic_retry_independent_test.go.
    (
        "independent_TRUE",
        "TRUVAG3_SEMANTIC_RETRY_INDEPENDENT_STEPS",
        "TRUE",
        "semantic_retry_independent_steps",
        True,
    ),
    (
        "independent_True",
        "TRUVAG3_SEMANTIC_RETRY_INDEPENDENT_STEPS",
        "True",
        "semantic_retry_independent_steps",
        True,
    ),
    (
        "independent_true",
        "TRUVAG3_SEMANTIC_RETRY_INDEPENDENT_STEPS",
        "true",
        "semantic_retry_independent_steps",
        True,
    ),
    (
        "independent_FALSE",
        "TRUVAG3_SEMANTIC_RETRY_INDEPENDENT_STEPS",
        "FALSE",
        "semantic_retry_independent_steps",
        False,
    ),
    (
        "independent_False",
        "TRUVAG3_SEMANTIC_RETRY_INDEPENDENT_STEPS",
        "False",
        "semantic_retry_independent_steps",
        False,
    ),
    (
        "independent_false",
        "TRUVAG3_SEMANTIC_RETRY_INDEPENDENT_STEPS",
        "false",
        "semantic_retry_independent_steps",
        False,
    ),
    (
        "independent_invalid",
        "TRUVAG3_SEMANTIC_RETRY_INDEPENDENT_STEPS",
        "invalid",
        "semantic_retry_independent_steps",
        False,
    ),
    (
        "independent_1",
        "TRUVAG3_SEMANTIC_RETRY_INDEPENDENT_STEPS",
        "1",
        "semantic_retry_independent_steps",
        False,
    ),
    (
        "independent_unset",
        "TRUVAG3_SEMANTIC_RETRY_INDEPENDENT_STEPS",
        None,
        "semantic_retry_independent_steps",
        True,
    ),
    (
        "semantic_enabled_true",
        "TRUVAG3_SEMANTIC_RETRY_ENABLED",
        "tRuE",
        "semantic_retry_enabled",
        True,
    ),
    (
        "semantic_enabled_false",
        "TRUVAG3_SEMANTIC_RETRY_ENABLED",
        "false",
        "semantic_retry_enabled",
        False,
    ),
    (
        "semantic_enabled_yes",
        "TRUVAG3_SEMANTIC_RETRY_ENABLED",
        "yes",
        "semantic_retry_enabled",
        False,
    ),
    (
        "semantic_enabled_unset",
        "TRUVAG3_SEMANTIC_RETRY_ENABLED",
        None,
        "semantic_retry_enabled",
        True,
    ),
    ("semantic_max_0", "TRUVAG3_SEMANTIC_RETRY_MAX_ATTEMPTS", "0", "max_semantic_retries", 0),
    ("semantic_max_4", "TRUVAG3_SEMANTIC_RETRY_MAX_ATTEMPTS", "4", "max_semantic_retries", 4),
    (
        "semantic_max_minus_1",
        "TRUVAG3_SEMANTIC_RETRY_MAX_ATTEMPTS",
        "-1",
        "max_semantic_retries",
        2,
    ),
    ("semantic_max_word", "TRUVAG3_SEMANTIC_RETRY_MAX_ATTEMPTS", "two", "max_semantic_retries", 2),
    # Seed 000 §9: orchestration timeout, default 20m.
    ("timeout_20m", "TRUVAG3_ORCHESTRATION_TIMEOUT", "20m", "timeout_s", 1200.0),
    ("timeout_90s", "TRUVAG3_ORCHESTRATION_TIMEOUT", "90s", "timeout_s", 90.0),
    ("timeout_zero", "TRUVAG3_ORCHESTRATION_TIMEOUT", "0s", "timeout_s", 1200.0),
    ("timeout_bad", "TRUVAG3_ORCHESTRATION_TIMEOUT", "ten minutes", "timeout_s", 1200.0),
    ("timeout_unset", "TRUVAG3_ORCHESTRATION_TIMEOUT", None, "timeout_s", 1200.0),
    ("concurrency_10", "TRUVAG3_EXECUTION_MAX_CONCURRENCY", "10", "max_concurrency", 10),
    ("concurrency_0", "TRUVAG3_EXECUTION_MAX_CONCURRENCY", "0", "max_concurrency", 5),
    ("llm_debug_false", "TRUVAG3_LLM_DEBUG_ENABLED", "false", "llm_debug_enabled", False),
    ("llm_debug_TRUE", "TRUVAG3_LLM_DEBUG_ENABLED", "TRUE", "llm_debug_enabled", True),
    ("llm_debug_0", "TRUVAG3_LLM_DEBUG_ENABLED", "0", "llm_debug_enabled", False),
    ("llm_debug_unset", "TRUVAG3_LLM_DEBUG_ENABLED", None, "llm_debug_enabled", True),
]


# Cases where the variable is unset, empty or invalid, so the default stays and is the source.
ENV_DEFAULT_KEPT = frozenset(
    {
        "initial_delay_invalid",
        "initial_delay_empty",
        "initial_delay_negative",
        "initial_delay_no_unit",
        "max_delay_xyz",
        "max_attempts_0",
        "max_attempts_minus_1",
        "max_attempts_many",
        "max_attempts_empty",
        "max_attempts_padded",
        "max_attempts_decimal",
        "independent_unset",
        "semantic_enabled_unset",
        "semantic_max_minus_1",
        "semantic_max_word",
        "timeout_zero",
        "timeout_bad",
        "timeout_unset",
        "concurrency_0",
        "llm_debug_unset",
    }
)


@pytest.mark.parametrize(
    ("case_name", "variable", "text", "field", "expected"),
    ENV_CASES,
    ids=[case[0] for case in ENV_CASES],
)
def test_env_table(
    case_name: str, variable: str, text: str | None, field: str, expected: object
) -> None:
    env = {} if text is None else {variable: text}
    config, sources = resolve_config(None, env=env)
    assert getattr(config, field) == expected
    if case_name in ENV_DEFAULT_KEPT:
        # An ignored value is named in the source; unset and empty variables are plain defaults.
        expected_source = (
            "default" if not text else f"default ({variable}={text!r} ignored: "
        )
        assert sources[field].startswith(expected_source)
        assert (sources[field] == "default") == (not text)
        assert expected == getattr(ExecutorConfig(), field)
    else:
        assert sources[field] == "env"
    assert all(source == "default" for name, source in sources.items() if name != field)


def test_unrelated_env_is_ignored() -> None:
    config, sources = resolve_config(None, env={"TRUVAG3_OTHER": "1", "PATH": "/bin"})
    assert config == ExecutorConfig()
    assert set(sources.values()) == {"default"}


def test_env_none_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUVAG3_STEP_RETRY_MAX_ATTEMPTS", "7")
    monkeypatch.setenv("TRUVAG3_STEP_RETRY_MAX_DELAY", "bogus")
    config, sources = resolve_config(None)
    assert (config.max_attempts, sources["max_attempts"]) == (7, "env")
    assert any("TRUVAG3_STEP_RETRY_MAX_DELAY='bogus' ignored" in line for line in env_warnings())


# ---------------------------------------------------------------------------------------------
# Precedence and sources
# ---------------------------------------------------------------------------------------------


def test_precedence_explicit_over_env_over_default() -> None:
    env = {
        "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS": "7",
        "TRUVAG3_STEP_RETRY_INITIAL_DELAY": "2s",
        "TRUVAG3_SEMANTIC_RETRY_ENABLED": "false",
    }
    config, sources = resolve_config({"max_attempts": 4, "jitter": False}, env=env)
    assert config.max_attempts == 4 and sources["max_attempts"] == "explicit"
    assert config.jitter is False and sources["jitter"] == "explicit"
    assert config.initial_delay_ms == 2000.0 and sources["initial_delay_ms"] == "env"
    assert config.semantic_retry_enabled is False and sources["semantic_retry_enabled"] == "env"
    assert config.max_delay_ms == 10000.0 and sources["max_delay_ms"] == "default"
    assert set(sources) == CONFIG_FIELDS


def test_explicit_equal_to_default_is_still_explicit() -> None:
    _, sources = resolve_config({"max_attempts": 3}, env={"TRUVAG3_STEP_RETRY_MAX_ATTEMPTS": "9"})
    assert sources["max_attempts"] == "explicit"


def test_explicit_null_budget_overrides_nothing_else() -> None:
    config, sources = resolve_config({"max_total_tokens": None, "max_llm_calls": 4}, env={})
    assert config.max_total_tokens is None and sources["max_total_tokens"] == "explicit"
    assert config.max_llm_calls == 4


def test_explicit_numbers_are_normalised() -> None:
    config, _ = resolve_config({"initial_delay_ms": 250, "timeout_s": 30}, env={})
    assert config.initial_delay_ms == 250.0 and isinstance(config.initial_delay_ms, float)
    assert config.timeout_s == 30.0 and isinstance(config.timeout_s, float)


# ---------------------------------------------------------------------------------------------
# Explicit validation: ConfigError names the field, what was expected and what was received
# ---------------------------------------------------------------------------------------------

BAD_EXPLICIT = [
    (
        "max_attempts_zero",
        {"max_attempts": 0},
        "config.max_attempts: expected an integer >= 1, got 0",
    ),
    (
        "max_attempts_string",
        {"max_attempts": "3"},
        'config.max_attempts: expected an integer >= 1, got "3"',
    ),
    (
        "max_attempts_float",
        {"max_attempts": 2.5},
        "config.max_attempts: expected an integer >= 1, got 2.5",
    ),
    (
        "max_attempts_bool",
        {"max_attempts": True},
        "config.max_attempts: expected an integer >= 1, got true",
    ),
    (
        "max_attempts_null",
        {"max_attempts": None},
        "config.max_attempts: expected an integer >= 1, got null",
    ),
    (
        "initial_delay_negative",
        {"initial_delay_ms": -1},
        "config.initial_delay_ms: expected a number of milliseconds >= 0, got -1",
    ),
    (
        "max_delay_nan",
        {"max_delay_ms": float("nan")},
        "config.max_delay_ms: expected a number of milliseconds >= 0, got NaN",
    ),
    (
        "backoff_factor_negative",
        {"backoff_factor": -2},
        "config.backoff_factor: expected a number >= 0, got -2",
    ),
    ("jitter_string", {"jitter": "true"}, 'config.jitter: expected true or false, got "true"'),
    ("jitter_int", {"jitter": 1}, "config.jitter: expected true or false, got 1"),
    (
        "validation_retries_negative",
        {"max_validation_retries": -1},
        "config.max_validation_retries: expected an integer >= 0, got -1",
    ),
    ("timeout_zero", {"timeout_s": 0}, "config.timeout_s: expected a number of seconds > 0, got 0"),
    (
        "concurrency_zero",
        {"max_concurrency": 0},
        "config.max_concurrency: expected an integer >= 1, got 0",
    ),
    (
        "tokens_negative",
        {"max_total_tokens": -5},
        "config.max_total_tokens: expected an integer >= 0 or null, got -5",
    ),
    (
        "wall_clock_zero",
        {"max_wall_clock_s": 0},
        "config.max_wall_clock_s: expected a number of seconds > 0 or null, got 0",
    ),
    (
        "repeated_errors_zero",
        {"max_repeated_errors": 0},
        "config.max_repeated_errors: expected an integer >= 1 or null, got 0",
    ),
    (
        "response_body_zero",
        {"max_response_body_bytes": 0},
        "config.max_response_body_bytes: expected an integer >= 1, got 0",
    ),
    (
        "response_body_negative",
        {"max_response_body_bytes": -1},
        "config.max_response_body_bytes: expected an integer >= 1, got -1",
    ),
    (
        "response_body_string",
        {"max_response_body_bytes": "x"},
        'config.max_response_body_bytes: expected an integer >= 1, got "x"',
    ),
    (
        "response_body_float",
        {"max_response_body_bytes": 1048576.0},
        "config.max_response_body_bytes: expected an integer >= 1, got 1048576.0",
    ),
    (
        "response_body_null",
        {"max_response_body_bytes": None},
        "config.max_response_body_bytes: expected an integer >= 1, got null",
    ),
    (
        "unknown_key_close",
        {"max_attempt": 3},
        "config.max_attempt: expected a known config key (did you mean 'max_attempts'?), "
        "got an unknown key",
    ),
]


@pytest.mark.parametrize(
    ("explicit", "message"),
    [case[1:] for case in BAD_EXPLICIT],
    ids=[case[0] for case in BAD_EXPLICIT],
)
def test_bad_explicit_value_raises_config_error(explicit: dict, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_config(explicit, env={})
    assert str(raised.value) == message
    assert raised.value.field == next(iter(explicit))
    assert isinstance(raised.value, ValueError)


def test_unknown_key_without_close_match_lists_the_keys() -> None:
    with pytest.raises(ConfigError, match=r"config\.colour: expected one of backoff_factor, "):
        resolve_config({"colour": "blue"}, env={})


def test_bad_env_is_not_an_error_but_a_warning() -> None:
    env = {
        "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS": "0",
        "TRUVAG3_STEP_RETRY_INITIAL_DELAY": "2s",
        "TRUVAG3_SEMANTIC_RETRY_ENABLED": "1",
        "TRUVAG3_ORCHESTRATION_TIMEOUT": "soon",
    }
    config, _ = resolve_config(None, env=env)
    assert config.max_attempts == 3
    assert env_warnings(env) == [
        "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS='0' ignored: expected an integer >= 1; "
        "keeping the default max_attempts=3",
        "TRUVAG3_SEMANTIC_RETRY_ENABLED='1' read as false: only 'true' (any case) enables it",
        "TRUVAG3_ORCHESTRATION_TIMEOUT='soon' ignored: expected a Go duration such as 500ms, 2s "
        "or 1m; keeping the default timeout_s=1200.0",
    ]


def test_direct_construction_validates() -> None:
    with pytest.raises(ConfigError, match=r"^config\.max_concurrency: expected an integer >= 1"):
        ExecutorConfig(max_concurrency=0)


# ---------------------------------------------------------------------------------------------
# parse_go_duration (Go time.ParseDuration)
# ---------------------------------------------------------------------------------------------

SECOND = 1_000_000_000
VALID_DURATIONS = [
    ("zero_alone", "0", 0),
    ("plus_zero", "+0", 0),
    ("minus_zero", "-0", 0),
    ("zero_seconds", "0s", 0),
    ("nanoseconds", "5ns", 5),
    ("microseconds_us", "300us", 300_000),
    ("micro_sign_b5", "1\u00b5s", 1_000),
    ("greek_mu_3bc", "1\u03bcs", 1_000),
    ("milliseconds", "750ms", 750_000_000),
    ("seconds", "2s", 2 * SECOND),
    ("fraction", "1.5s", 1_500_000_000),
    ("leading_dot", ".5s", 500_000_000),
    ("trailing_dot", "1.s", SECOND),
    ("minutes", "1m", 60 * SECOND),
    ("compound", "1h2m3.5s", 3723 * SECOND + 500_000_000),
    ("repeated_unit", "1h1h", 7200 * SECOND),
    ("negative", "-1.5h", -5400 * SECOND),
    ("plus_sign", "+2s", 2 * SECOND),
    ("sub_nanosecond_truncated", "1.9ns", 1),
    ("long_fraction", "1.0000000001s", SECOND),
    ("max_int64", "9223372036854775807ns", 9_223_372_036_854_775_807),
    ("min_int64", "-9223372036854775808ns", -9_223_372_036_854_775_808),
    ("largest_hours", "2562047h", 2_562_047 * 3600 * SECOND),
]

INVALID_DURATIONS = [
    ("empty", ""),
    ("number_without_unit", "1"),
    ("double_zero_without_unit", "00"),
    ("unit_alone", "s"),
    ("dot_unit", ".s"),
    ("sign_alone", "-"),
    ("space_inside", "1 s"),
    ("leading_space", " 1s"),
    ("trailing_space", "1s "),
    ("upper_case_unit", "1S"),
    ("word_unit", "1sec"),
    ("days", "1d"),
    ("two_dots", "1.2.3s"),
    ("double_sign", "--1s"),
    ("exponent", "1e3s"),
    ("fullwidth_digit", "\uff11s"),
    ("overflow", "9223372036854775808ns"),
    ("overflow_hours", "2562048h"),
    ("trailing_number", "1s2"),
]


@pytest.mark.parametrize(
    ("text", "expected_ns"),
    [case[1:] for case in VALID_DURATIONS],
    ids=[case[0] for case in VALID_DURATIONS],
)
def test_parse_go_duration_valid(text: str, expected_ns: int) -> None:
    assert parse_go_duration(text) == expected_ns


@pytest.mark.parametrize(
    "text",
    [case[1] for case in INVALID_DURATIONS],
    ids=[case[0] for case in INVALID_DURATIONS],
)
def test_parse_go_duration_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration(text)


# ---------------------------------------------------------------------------------------------
# Documented maxima (issue 8 item 8): explicit values above one are refused, env values ignored
# ---------------------------------------------------------------------------------------------

NUMERIC_FIELDS = sorted(
    f.name for f in dataclasses.fields(ExecutorConfig) if f.type not in ("bool", bool)
)


def test_every_numeric_field_has_a_documented_maximum() -> None:
    assert sorted(CONFIG_MAXIMA) == NUMERIC_FIELDS


@pytest.mark.parametrize("field", NUMERIC_FIELDS)
def test_the_maximum_itself_is_accepted(field: str) -> None:
    config, sources = resolve_config({field: CONFIG_MAXIMA[field]}, env={})
    assert getattr(config, field) == CONFIG_MAXIMA[field]
    assert sources[field] == "explicit"


@pytest.mark.parametrize("field", NUMERIC_FIELDS)
def test_one_above_the_maximum_is_refused_naming_the_field(field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_config({field: CONFIG_MAXIMA[field] + 1}, env={})
    assert raised.value.field == field
    assert raised.value.expected.endswith(f"<= {CONFIG_MAXIMA[field]} (the documented maximum)")
    assert raised.value.received == str(CONFIG_MAXIMA[field] + 1)


# (case name, explicit config, exact message)
ABOVE_MAXIMUM = [
    (
        "max_attempts_10_to_the_30",
        {"max_attempts": 10**30},
        "config.max_attempts: expected an integer <= 100 (the documented maximum), "
        "got 1000000000000000000000000000000",
    ),
    (
        "max_attempts_10_to_the_100_is_shortened",
        {"max_attempts": 10**100},
        "config.max_attempts: expected an integer <= 100 (the documented maximum), "
        "got 100000000000… (an integer of 101 digits)",
    ),
    (
        "max_total_tokens_beyond_str_limit",
        {"max_total_tokens": 10**5000},
        "config.max_total_tokens: expected an integer <= 1000000000000 (the documented maximum), "
        "got an integer of more than 4000 digits",
    ),
    (
        "timeout_beyond_float_range",
        {"timeout_s": 10**400},
        "config.timeout_s: expected a number of seconds <= 86400 (the documented maximum), "
        "got 100000000000… (an integer of 401 digits)",
    ),
    (
        "initial_delay_float",
        {"initial_delay_ms": 3.6e6 + 0.5},
        "config.initial_delay_ms: expected a number of milliseconds <= 3600000 "
        "(the documented maximum), got 3600000.5",
    ),
    (
        "backoff_factor_huge",
        {"backoff_factor": 1e300},
        "config.backoff_factor: expected a number <= 100 (the documented maximum), got 1e+300",
    ),
    (
        "max_concurrency_large",
        {"max_concurrency": 100_000},
        "config.max_concurrency: expected an integer <= 1000 (the documented maximum), "
        "got 100000",
    ),
    (
        "max_response_body_bytes_2_gib",
        {"max_response_body_bytes": 2 << 30},
        "config.max_response_body_bytes: expected an integer <= 1073741824 "
        "(the documented maximum), got 2147483648",
    ),
]


@pytest.mark.parametrize(
    ("explicit", "message"),
    [case[1:] for case in ABOVE_MAXIMUM],
    ids=[case[0] for case in ABOVE_MAXIMUM],
)
def test_above_maximum_message(explicit: dict, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_config(explicit, env={})
    assert str(raised.value) == message


# (case name, variable, text, field, source) — the default is kept and the source says why.
ENV_ABOVE_MAXIMUM = [
    (
        "max_attempts_101",
        "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS",
        "101",
        "max_attempts",
        "default (TRUVAG3_STEP_RETRY_MAX_ATTEMPTS='101' ignored: above the documented maximum 100)",
    ),
    (
        "max_attempts_10_to_the_30",
        "TRUVAG3_STEP_RETRY_MAX_ATTEMPTS",
        "1" + "0" * 30,
        "max_attempts",
        "default (TRUVAG3_STEP_RETRY_MAX_ATTEMPTS='1" + "0" * 30
        + "' ignored: expected an integer that fits in 64 bits)",
    ),
    (
        "initial_delay_2h",
        "TRUVAG3_STEP_RETRY_INITIAL_DELAY",
        "2h",
        "initial_delay_ms",
        "default (TRUVAG3_STEP_RETRY_INITIAL_DELAY='2h' ignored: "
        "above the documented maximum 3600000 ms)",
    ),
    (
        "max_delay_61m",
        "TRUVAG3_STEP_RETRY_MAX_DELAY",
        "61m",
        "max_delay_ms",
        "default (TRUVAG3_STEP_RETRY_MAX_DELAY='61m' ignored: "
        "above the documented maximum 3600000 ms)",
    ),
    (
        "semantic_max_101",
        "TRUVAG3_SEMANTIC_RETRY_MAX_ATTEMPTS",
        "101",
        "max_semantic_retries",
        "default (TRUVAG3_SEMANTIC_RETRY_MAX_ATTEMPTS='101' ignored: "
        "above the documented maximum 100)",
    ),
    (
        "timeout_25h",
        "TRUVAG3_ORCHESTRATION_TIMEOUT",
        "25h",
        "timeout_s",
        "default (TRUVAG3_ORCHESTRATION_TIMEOUT='25h' ignored: above the documented maximum "
        "86400 s)",
    ),
    (
        "concurrency_1001",
        "TRUVAG3_EXECUTION_MAX_CONCURRENCY",
        "1001",
        "max_concurrency",
        "default (TRUVAG3_EXECUTION_MAX_CONCURRENCY='1001' ignored: "
        "above the documented maximum 1000)",
    ),
]


@pytest.mark.parametrize(
    ("variable", "text", "field", "source"),
    [case[1:] for case in ENV_ABOVE_MAXIMUM],
    ids=[case[0] for case in ENV_ABOVE_MAXIMUM],
)
def test_env_above_maximum_keeps_the_default_and_says_so(
    variable: str, text: str, field: str, source: str
) -> None:
    config, sources = resolve_config(None, env={variable: text})
    assert getattr(config, field) == getattr(ExecutorConfig(), field)
    assert sources[field] == source
    (warning,) = env_warnings({variable: text})
    assert warning.startswith(f"{variable}={text!r} ignored: ")
    assert warning.endswith(f"keeping the default {field}={json.dumps(getattr(config, field))}")


@pytest.mark.parametrize("variable", ["TRUVAG3_STEP_RETRY_MAX_ATTEMPTS"])
def test_env_at_the_maximum_is_used(variable: str) -> None:
    config, sources = resolve_config(None, env={variable: "100"})
    assert (config.max_attempts, sources["max_attempts"]) == (100, "env")
