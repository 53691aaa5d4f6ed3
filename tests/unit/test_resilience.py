"""Circuit breaker state machine and retry executor (reference notes §9), on a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from executor.resilience import (
    CircuitBreaker,
    CircuitBreakerConfig,
    CircuitOpenError,
    CircuitState,
    MaxRetriesExceeded,
    RetryConfig,
    RetryExecutor,
    StateChange,
    is_countable_error,
    retry_with_circuit_breaker,
)


class FakeClock:
    """A settable monotonic clock."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingSleep:
    """An async sleep that records the requested delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class ToolDown(Exception):
    """A countable tool failure."""


class KindedError(Exception):
    def __init__(self, kind: str) -> None:
        super().__init__(f"{kind} error")
        self.error_kind = kind


def make_breaker(
    clock: FakeClock, changes: list[StateChange] | None = None, **config: object
) -> CircuitBreaker:
    return CircuitBreaker(
        "weather",
        CircuitBreakerConfig(**config),  # type: ignore[arg-type]
        clock=clock,
        on_state_change=None if changes is None else changes.append,
    )


def run_calls(breaker: CircuitBreaker, outcomes: str) -> None:
    """Admit and record one call per character: "s" success, "f" countable failure."""
    for outcome in outcomes:
        assert breaker.can_execute(), f"call refused in state {breaker.state}"
        if outcome == "s":
            breaker.record_success()
        else:
            breaker.record_failure(ToolDown("503"))


def open_breaker(clock: FakeClock, changes: list[StateChange] | None = None, **config: object):
    breaker = make_breaker(clock, changes, **config)
    run_calls(breaker, "f" * 10)
    assert breaker.state == CircuitState.OPEN
    return breaker


# ---------------------------------------------------------------- configuration


def test_breaker_config_defaults_are_the_reference_defaults() -> None:
    config = CircuitBreakerConfig()
    assert (
        config.error_threshold,
        config.volume_threshold,
        config.sleep_window_s,
        config.half_open_requests,
        config.success_threshold,
        config.window_size_s,
        config.bucket_count,
        config.failure_threshold,
    ) == (0.5, 10, 30.0, 5, 0.6, 60.0, 10, 0)


INVALID_BREAKER_CONFIGS = [
    ("error_threshold_above_one", {"error_threshold": 1.5}, "error_threshold"),
    ("error_threshold_negative", {"error_threshold": -0.1}, "error_threshold"),
    ("volume_threshold_negative", {"volume_threshold": -1}, "volume_threshold"),
    ("volume_threshold_bool", {"volume_threshold": True}, "volume_threshold"),
    ("success_threshold_above_one", {"success_threshold": 2}, "success_threshold"),
    ("half_open_requests_zero", {"half_open_requests": 0}, "half_open_requests"),
    ("sleep_window_negative", {"sleep_window_s": -1}, "sleep_window_s"),
    ("window_size_negative", {"window_size_s": -60}, "window_size_s"),
    ("bucket_count_zero", {"bucket_count": 0}, "bucket_count"),
    ("failure_threshold_negative", {"failure_threshold": -2}, "failure_threshold"),
    ("error_threshold_nan", {"error_threshold": float("nan")}, "error_threshold"),
]


@pytest.mark.parametrize(
    ("overrides", "field_name"),
    [case[1:] for case in INVALID_BREAKER_CONFIGS],
    ids=[case[0] for case in INVALID_BREAKER_CONFIGS],
)
def test_breaker_config_rejects_out_of_range_values(overrides: dict, field_name: str) -> None:
    with pytest.raises(ValueError, match=rf"^CircuitBreakerConfig\.{field_name}: expected"):
        CircuitBreakerConfig(**overrides)


def test_breaker_config_zero_window_and_success_threshold_mean_the_defaults() -> None:
    config = CircuitBreakerConfig(window_size_s=0, success_threshold=0)
    assert (config.window_size_s, config.success_threshold) == (60.0, 0.6)


def test_breaker_name_is_required() -> None:
    with pytest.raises(ValueError, match=r"^CircuitBreaker\.name: expected a non-empty string"):
        CircuitBreaker("", CircuitBreakerConfig())


INVALID_RETRY_CONFIGS = [
    ("max_attempts_zero", {"max_attempts": 0}, "max_attempts"),
    ("max_attempts_float", {"max_attempts": 2.0}, "max_attempts"),
    ("initial_delay_negative", {"initial_delay_s": -0.1}, "initial_delay_s"),
    ("max_delay_infinite", {"max_delay_s": float("inf")}, "max_delay_s"),
    ("backoff_factor_negative", {"backoff_factor": -2}, "backoff_factor"),
    ("jitter_not_bool", {"jitter": "yes"}, "jitter"),
]


@pytest.mark.parametrize(
    ("overrides", "field_name"),
    [case[1:] for case in INVALID_RETRY_CONFIGS],
    ids=[case[0] for case in INVALID_RETRY_CONFIGS],
)
def test_retry_config_rejects_bad_values(overrides: dict, field_name: str) -> None:
    with pytest.raises(ValueError, match=rf"^RetryConfig\.{field_name}: expected"):
        RetryConfig(**overrides)


# ---------------------------------------------------------------- closed -> open


OPENING_CASES = [
    # (name, config overrides, outcomes, expected state after the last call)
    ("nine_failures_below_volume", {}, "f" * 9, CircuitState.CLOSED),
    ("ten_failures_reach_volume", {}, "f" * 10, CircuitState.OPEN),
    ("half_errors_at_volume_open", {}, "s" * 5 + "f" * 5, CircuitState.OPEN),
    ("four_in_ten_stays_closed", {}, "s" * 6 + "f" * 4, CircuitState.CLOSED),
    ("error_rate_reached_after_volume", {}, "s" * 6 + "f" * 6, CircuitState.OPEN),
    ("volume_zero_disables_rate", {"volume_threshold": 0}, "f" * 30, CircuitState.CLOSED),
    ("legacy_threshold_opens", {"failure_threshold": 3}, "ff", CircuitState.CLOSED),
    ("legacy_threshold_reached", {"failure_threshold": 3}, "fsfsf", CircuitState.OPEN),
    ("successes_do_not_reset_legacy", {"failure_threshold": 2}, "fssssf", CircuitState.OPEN),
]


@pytest.mark.parametrize(
    ("overrides", "outcomes", "expected_state"),
    [case[1:] for case in OPENING_CASES],
    ids=[case[0] for case in OPENING_CASES],
)
def test_closed_breaker_opens_on_volume_and_error_rate_or_legacy_count(
    overrides: dict, outcomes: str, expected_state: CircuitState
) -> None:
    breaker = make_breaker(FakeClock(), **overrides)
    run_calls(breaker, outcomes)
    assert breaker.state == expected_state


def test_opening_reason_names_the_rate_and_volume() -> None:
    changes: list[StateChange] = []
    open_breaker(FakeClock(), changes)
    assert [(c.from_state, c.to_state) for c in changes] == [
        (CircuitState.CLOSED, CircuitState.OPEN)
    ]
    assert changes[0].reason == "error rate 1.00 >= 0.5 over 10 requests (volume threshold 10)"


def test_legacy_opening_reason_names_the_failure_threshold() -> None:
    changes: list[StateChange] = []
    breaker = make_breaker(FakeClock(), changes, failure_threshold=2)
    run_calls(breaker, "ff")
    assert changes[0].reason == "2 failures reached the failure threshold of 2"


def test_failures_older_than_the_window_fall_out() -> None:
    clock = FakeClock()
    breaker = make_breaker(clock)
    run_calls(breaker, "f" * 9)
    clock.advance(61)
    run_calls(breaker, "f")
    assert breaker.state == CircuitState.CLOSED
    assert breaker.metrics()["total"] == 1


def test_window_keeps_buckets_younger_than_the_window() -> None:
    clock = FakeClock()
    breaker = make_breaker(clock)
    run_calls(breaker, "f" * 5)
    clock.advance(30)
    run_calls(breaker, "f" * 5)
    assert breaker.state == CircuitState.OPEN


def test_clock_going_backwards_clears_the_window() -> None:
    clock = FakeClock()
    breaker = make_breaker(clock)
    run_calls(breaker, "f" * 9)
    clock.advance(-5)
    run_calls(breaker, "f")
    assert breaker.state == CircuitState.CLOSED
    assert breaker.metrics()["failure"] == 1


# ---------------------------------------------------------------- open


def test_open_breaker_rejects_until_the_sleep_window_has_passed() -> None:
    clock = FakeClock()
    breaker = open_breaker(clock)
    assert not breaker.can_execute()
    clock.advance(30)
    assert not breaker.can_execute(), "exactly the sleep window is not longer than it"
    assert breaker.state == CircuitState.OPEN
    clock.advance(0.001)
    assert breaker.can_execute()
    assert breaker.state == CircuitState.HALF_OPEN


def test_rejections_are_counted() -> None:
    breaker = open_breaker(FakeClock())
    for _ in range(3):
        breaker.can_execute()
    metrics = breaker.metrics()
    assert (metrics["rejected_executions"], metrics["total_executions"]) == (3, 10)


# ---------------------------------------------------------------- half-open


def half_open_breaker(clock: FakeClock, changes: list[StateChange] | None = None, **config):
    breaker = open_breaker(clock, changes, **config)
    clock.advance(breaker.sleep_window_s + 1)
    return breaker


def test_half_open_admits_at_most_half_open_requests() -> None:
    clock = FakeClock()
    breaker = half_open_breaker(clock)
    admissions = [breaker.can_execute() for _ in range(7)]
    assert admissions == [True] * 5 + [False] * 2
    assert breaker.state == CircuitState.HALF_OPEN
    assert breaker.metrics()["half_open_count"] == 5


HALF_OPEN_CASES = [
    # (name, probe outcomes, state after, sleep window after)
    ("all_probes_succeed_closes", "sssss", CircuitState.CLOSED, 30.0),
    ("three_of_five_is_the_threshold", "ssffs", CircuitState.CLOSED, 30.0),
    ("two_of_five_reopens", "sffsf", CircuitState.OPEN, 45.0),
    ("all_probes_fail_reopens", "fffff", CircuitState.OPEN, 45.0),
    ("four_probes_decide_nothing", "ffff", CircuitState.HALF_OPEN, 30.0),
]


@pytest.mark.parametrize(
    ("outcomes", "expected_state", "expected_sleep_window_s"),
    [case[1:] for case in HALF_OPEN_CASES],
    ids=[case[0] for case in HALF_OPEN_CASES],
)
def test_half_open_decides_on_the_probe_success_rate(
    outcomes: str, expected_state: CircuitState, expected_sleep_window_s: float
) -> None:
    breaker = half_open_breaker(FakeClock())
    run_calls(breaker, outcomes)
    assert breaker.state == expected_state
    assert breaker.sleep_window_s == expected_sleep_window_s


def test_failed_half_open_rounds_grow_the_sleep_window_to_five_minutes() -> None:
    clock = FakeClock()
    breaker = open_breaker(clock)
    windows = []
    for _ in range(7):
        clock.advance(breaker.sleep_window_s + 1)
        run_calls(breaker, "fffff")
        windows.append(breaker.sleep_window_s)
    assert windows == [45.0, 67.5, 101.25, 151.875, 227.8125, 300.0, 300.0]
    assert breaker.config.sleep_window_s == 30.0, "the config is not mutated"


def test_grown_sleep_window_is_what_the_open_state_waits_for() -> None:
    clock = FakeClock()
    breaker = half_open_breaker(clock)
    run_calls(breaker, "fffff")
    clock.advance(40)
    assert not breaker.can_execute()
    clock.advance(6)
    assert breaker.can_execute()


def test_reset_restores_the_configured_sleep_window_and_closes() -> None:
    clock = FakeClock()
    changes: list[StateChange] = []
    breaker = half_open_breaker(clock, changes)
    run_calls(breaker, "fffff")
    breaker.reset()
    assert (breaker.state, breaker.sleep_window_s) == (CircuitState.CLOSED, 30.0)
    assert changes[-1].reason == "reset"
    assert breaker.metrics()["total"] == 0


def test_state_changes_are_reported_in_order_with_reasons_and_times() -> None:
    clock = FakeClock(now=100.0)
    changes: list[StateChange] = []
    breaker = open_breaker(clock, changes)
    clock.advance(31)
    run_calls(breaker, "fffff")
    clock.advance(46)
    run_calls(breaker, "sssss")
    assert [(c.from_state, c.to_state, c.at) for c in changes] == [
        (CircuitState.CLOSED, CircuitState.OPEN, 100.0),
        (CircuitState.OPEN, CircuitState.HALF_OPEN, 131.0),
        (CircuitState.HALF_OPEN, CircuitState.OPEN, 131.0),
        (CircuitState.OPEN, CircuitState.HALF_OPEN, 177.0),
        (CircuitState.HALF_OPEN, CircuitState.CLOSED, 177.0),
    ]
    assert {c.breaker for c in changes} == {"weather"}
    assert changes[1].reason == "open for 31s, past the sleep window of 30s"
    assert changes[2].reason == (
        "0/5 probes succeeded, success rate 0.00 < 0.6; sleep window now 45s"
    )
    assert changes[4].reason == "5/5 probes succeeded, success rate 1.00 >= 0.6"
    assert breaker.metrics()["generation"] == 5


# ---------------------------------------------------------------- error classification


class ConfigurationProblem(Exception):
    error_kind = "configuration"


def _cancelled_cause() -> Exception:
    try:
        try:
            raise asyncio.CancelledError
        except asyncio.CancelledError as cancelled:
            raise RuntimeError("wrapped") from cancelled
    except RuntimeError as wrapped:
        return wrapped


CLASSIFIER_CASES = [
    ("none", None, False),
    ("cancelled", asyncio.CancelledError(), False),
    ("configuration_kind", ConfigurationProblem("bad base_url"), False),
    ("not_found_kind", KindedError("not_found"), False),
    ("state_kind", KindedError("state"), False),
    ("cancelled_in_cause_chain", _cancelled_cause(), False),
    ("timeout_counts", TimeoutError("deadline exceeded"), True),
    ("connection_error_counts", ConnectionResetError("reset"), True),
    ("other_kind_counts", KindedError("rate_limit"), True),
    ("plain_exception_counts", ToolDown("503"), True),
]


@pytest.mark.parametrize(
    ("error", "countable"),
    [case[1:] for case in CLASSIFIER_CASES],
    ids=[case[0] for case in CLASSIFIER_CASES],
)
def test_default_error_classifier(error: BaseException | None, countable: bool) -> None:
    assert is_countable_error(error) is countable


def test_cancelled_errors_do_not_count_toward_opening() -> None:
    breaker = make_breaker(FakeClock())
    for _ in range(20):
        assert breaker.can_execute()
        breaker.record_failure(asyncio.CancelledError())
    assert breaker.state == CircuitState.CLOSED
    assert breaker.metrics()["total"] == 0


def test_uncounted_error_frees_its_half_open_slot() -> None:
    breaker = half_open_breaker(FakeClock(), half_open_requests=1)
    assert breaker.can_execute()
    assert not breaker.can_execute()
    breaker.record_failure(asyncio.CancelledError())
    assert breaker.state == CircuitState.HALF_OPEN
    assert breaker.can_execute()
    breaker.record_success()
    assert breaker.state == CircuitState.CLOSED


def test_record_failure_without_an_error_counts() -> None:
    breaker = make_breaker(FakeClock(), failure_threshold=1)
    assert breaker.can_execute()
    breaker.record_failure()
    assert breaker.state == CircuitState.OPEN


# ---------------------------------------------------------------- manual control and metrics


def test_force_open_rejects_and_clear_force_lets_the_sleep_window_run() -> None:
    clock = FakeClock()
    changes: list[StateChange] = []
    breaker = make_breaker(clock, changes)
    breaker.force_open()
    assert breaker.state == CircuitState.OPEN and not breaker.can_execute()
    clock.advance(100)
    assert not breaker.can_execute(), "forced open ignores the sleep window"
    breaker.clear_force()
    assert breaker.can_execute()
    assert breaker.state == CircuitState.HALF_OPEN
    assert changes[0].reason == "forced open"


def test_force_closed_admits_and_does_not_record() -> None:
    breaker = open_breaker(FakeClock())
    breaker.force_closed()
    assert breaker.state == CircuitState.CLOSED
    run_calls(breaker, "f" * 20)
    assert breaker.state == CircuitState.CLOSED
    assert breaker.metrics()["force_closed"] is True


BASE_METRIC_KEYS = {
    "name",
    "state",
    "generation",
    "success",
    "failure",
    "total",
    "error_rate",
    "force_open",
    "force_closed",
    "executions_in_flight",
    "total_executions",
    "rejected_executions",
}
HALF_OPEN_METRIC_KEYS = {
    "half_open_count",
    "half_open_successes",
    "half_open_failures",
    "orphaned_requests",
}


def test_metrics_keys_and_values_when_closed() -> None:
    breaker = make_breaker(FakeClock())
    run_calls(breaker, "ssf")
    assert breaker.can_execute()
    metrics = breaker.metrics()
    assert set(metrics) == BASE_METRIC_KEYS
    assert metrics["error_rate"] == pytest.approx(1 / 3)
    assert (metrics["name"], metrics["state"], metrics["total"]) == ("weather", "closed", 3)
    assert metrics["executions_in_flight"] == 1


def test_metrics_in_half_open_add_probe_counts_and_orphans() -> None:
    clock = FakeClock()
    breaker = half_open_breaker(clock)
    run_calls(breaker, "sf")
    assert breaker.can_execute()
    clock.advance(31)
    metrics = breaker.metrics()
    assert set(metrics) == BASE_METRIC_KEYS | HALF_OPEN_METRIC_KEYS
    assert metrics["state"] == "half-open"
    assert (metrics["half_open_successes"], metrics["half_open_failures"]) == (1, 1)
    assert (metrics["half_open_count"], metrics["orphaned_requests"]) == (1, 1)


# ---------------------------------------------------------------- retry executor


REFERENCE_SLEEPS_MS = [108.41, 236.55, 479.77, 886.92, 1603.74, 3117.85, 5328.49]


def test_planned_delays_match_the_reference_sequence() -> None:
    executor = RetryExecutor(RetryConfig(max_attempts=8))
    planned_ms = [delay * 1000 for delay in executor.planned_delays(7)]
    assert planned_ms == pytest.approx(REFERENCE_SLEEPS_MS, abs=0.005)
    assert planned_ms[-1] > 5000, "no cap after jitter"


PLANNED_DELAY_CASES = [
    ("default_config_sleeps_twice", RetryConfig(), 10, [108.414709, 236.545661]),
    ("single_attempt_never_sleeps", RetryConfig(max_attempts=1), 5, []),
    ("no_jitter_doubles", RetryConfig(max_attempts=4, jitter=False), 3, [100, 200, 400]),
    (
        "no_jitter_caps_at_max_delay",
        RetryConfig(max_attempts=5, jitter=False, max_delay_s=0.25),
        4,
        [100, 200, 250, 250],
    ),
    ("zero_initial_delay", RetryConfig(initial_delay_s=0, max_attempts=3), 2, [0, 0]),
]


@pytest.mark.parametrize(
    ("config", "count", "expected_ms"),
    [case[1:] for case in PLANNED_DELAY_CASES],
    ids=[case[0] for case in PLANNED_DELAY_CASES],
)
def test_planned_delays(config: RetryConfig, count: int, expected_ms: list[float]) -> None:
    planned_ms = [delay * 1000 for delay in RetryExecutor(config).planned_delays(count)]
    assert planned_ms == pytest.approx(expected_ms, abs=1e-6)


def failing_then(successes_after: int, result: str = "ok"):
    """An async operation that fails `successes_after` times, then returns `result`."""
    calls: list[int] = []

    async def operation() -> str:
        calls.append(len(calls) + 1)
        if len(calls) <= successes_after:
            raise ToolDown(f"503 on call {len(calls)}")
        return result

    return operation, calls


async def test_execute_returns_the_first_success_after_sleeping_the_planned_delays() -> None:
    sleep = RecordingSleep()
    executor = RetryExecutor(RetryConfig(max_attempts=5), sleep=sleep)
    operation, calls = failing_then(2)
    assert await executor.execute("get-forecast", operation) == "ok"
    assert calls == [1, 2, 3]
    assert sleep.delays == executor.planned_delays(2)


async def test_execute_raises_max_retries_exceeded_chained_to_the_last_error() -> None:
    sleep = RecordingSleep()
    executor = RetryExecutor(RetryConfig(), sleep=sleep)
    operation, calls = failing_then(99)
    with pytest.raises(MaxRetriesExceeded) as raised:
        await executor.execute("get-forecast", operation)
    assert str(raised.value) == "max retry attempts (3) exceeded for get-forecast: 503 on call 3"
    assert isinstance(raised.value.__cause__, ToolDown)
    assert raised.value.last_error is raised.value.__cause__
    assert calls == [1, 2, 3]
    assert len(sleep.delays) == 2, "no sleep after the last attempt"


async def test_error_without_a_message_is_named_by_its_type() -> None:
    async def operation() -> None:
        raise ToolDown

    executor = RetryExecutor(RetryConfig(max_attempts=1), sleep=RecordingSleep())
    with pytest.raises(MaxRetriesExceeded, match=r"exceeded for op: ToolDown$"):
        await executor.execute("op", operation)


async def test_cancellation_during_the_backoff_sleep_propagates_without_another_attempt() -> None:
    sleep_started = asyncio.Event()

    async def blocking_sleep(seconds: float) -> None:
        sleep_started.set()
        await asyncio.Event().wait()

    operation, calls = failing_then(99)
    executor = RetryExecutor(RetryConfig(), sleep=blocking_sleep)
    task = asyncio.create_task(executor.execute("op", operation))
    await sleep_started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert calls == [1]


async def test_cancellation_raised_by_the_operation_is_not_retried() -> None:
    calls: list[int] = []

    async def operation() -> None:
        calls.append(1)
        raise asyncio.CancelledError

    executor = RetryExecutor(RetryConfig(), sleep=RecordingSleep())
    with pytest.raises(asyncio.CancelledError):
        await executor.execute("op", operation)
    assert calls == [1]


# ---------------------------------------------------------------- retry with circuit breaker


async def test_retry_with_circuit_breaker_records_each_attempt() -> None:
    breaker = make_breaker(FakeClock())
    operation, calls = failing_then(2, result="forecast")
    result = await retry_with_circuit_breaker(
        RetryConfig(), breaker, operation, sleep=RecordingSleep()
    )
    assert (result, calls) == ("forecast", [1, 2, 3])
    metrics = breaker.metrics()
    assert (metrics["success"], metrics["failure"], metrics["executions_in_flight"]) == (1, 2, 0)


async def test_retry_with_open_circuit_fails_every_try_without_calling() -> None:
    breaker = open_breaker(FakeClock())
    operation, calls = failing_then(0)
    sleep = RecordingSleep()
    with pytest.raises(MaxRetriesExceeded) as raised:
        await retry_with_circuit_breaker(RetryConfig(), breaker, operation, sleep=sleep)
    assert str(raised.value) == (
        "max retry attempts (3) exceeded for weather: circuit breaker 'weather' is open"
    )
    assert isinstance(raised.value.__cause__, CircuitOpenError)
    assert calls == []
    assert len(sleep.delays) == 2


async def test_retry_with_circuit_breaker_stops_calling_once_the_circuit_opens() -> None:
    breaker = make_breaker(FakeClock(), failure_threshold=2)
    operation, calls = failing_then(99)
    with pytest.raises(MaxRetriesExceeded) as raised:
        await retry_with_circuit_breaker(
            RetryConfig(max_attempts=4), breaker, operation, sleep=RecordingSleep()
        )
    assert calls == [1, 2]
    assert isinstance(raised.value.__cause__, CircuitOpenError)


async def test_retry_with_circuit_breaker_releases_a_cancelled_half_open_probe() -> None:
    clock = FakeClock()
    breaker = half_open_breaker(clock, half_open_requests=1)

    async def cancelled_call() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await retry_with_circuit_breaker(
            RetryConfig(), breaker, cancelled_call, sleep=RecordingSleep()
        )
    assert breaker.state == CircuitState.HALF_OPEN
    assert breaker.can_execute(), "the cancelled probe's slot was freed"
