"""Circuit breaker and retry executor, a port of TruvaG3's standalone `resilience` module.

This is the piece for code that calls tools directly (seed 000 §7); the plan executor has its own
retry loop and does not use it. Numbers, state machine and sleep sequence follow reference notes §9.
Clocks and sleeps are injected so tests never wait. A breaker is not thread-safe: use it from one
event loop (its methods never await, so they are atomic there).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

T = TypeVar("T")

_NANOSECONDS_PER_SECOND = 1_000_000_000

# reference §9.2: a failed half-open probe grows the sleep window by 1.5, up to five minutes.
SLEEP_WINDOW_GROWTH = 1.5
MAX_SLEEP_WINDOW_S = 300.0

# reference §9.2: a half-open admission older than this counts as orphaned in `metrics()`.
ORPHANED_AFTER_S = 30.0

# reference §9.2: configuration, not-found and state errors are the caller's fault, not the tool's.
UNCOUNTED_ERROR_KINDS = frozenset({"configuration", "not_found", "state"})


class CircuitState(StrEnum):
    """The three circuit states, spelled as the reference's `String()` does."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


class CircuitOpenError(Exception):
    """The breaker refused a call because it is open (or half-open with no probe slot left)."""

    def __init__(self, breaker: str) -> None:
        super().__init__(f"circuit breaker '{breaker}' is open")
        self.breaker = breaker


class MaxRetriesExceeded(Exception):
    """Every attempt failed; `__cause__` and `last_error` hold the final attempt's error."""

    def __init__(self, operation: str, max_attempts: int, last_error: BaseException) -> None:
        super().__init__(
            f"max retry attempts ({max_attempts}) exceeded for {operation}: "
            f"{_describe_error(last_error)}"
        )
        self.operation = operation
        self.max_attempts = max_attempts
        self.last_error = last_error


def _describe_error(error: BaseException) -> str:
    return str(error) or type(error).__name__


def is_countable_error(error: BaseException | None) -> bool:
    """Whether `error` counts toward the breaker's thresholds (reference §9.2 classifier).

    Not counted: None, `asyncio.CancelledError` (the caller gave up), and errors whose
    `error_kind` attribute is "configuration", "not_found" or "state". The explicit cause chain
    (`raise ... from e`) is followed, like Go's `errors.Is`. Everything else counts, timeouts too.
    """
    seen: set[int] = set()
    current = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, asyncio.CancelledError):
            return False
        if getattr(current, "error_kind", None) in UNCOUNTED_ERROR_KINDS:
            return False
        current = current.__cause__
    return error is not None


def _require_int(owner: str, field_name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{owner}.{field_name}: expected an integer >= {minimum}, got {value!r}")


def _require_number(
    owner: str, field_name: str, value: object, minimum: float, maximum: float | None = None
) -> None:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    in_range = is_number and math.isfinite(value) and value >= minimum  # type: ignore[arg-type]
    if in_range and maximum is not None:
        in_range = value <= maximum  # type: ignore[operator]
    if not in_range:
        expected = f"in [{minimum:g}, {maximum:g}]" if maximum is not None else f">= {minimum:g}"
        raise ValueError(f"{owner}.{field_name}: expected a number {expected}, got {value!r}")


@dataclass(frozen=True, slots=True)
class CircuitBreakerConfig:
    """Breaker thresholds; defaults are the reference's `DefaultConfig()` (reference §9.2).

    As in the reference, `window_size_s == 0` means 60 s and `success_threshold == 0` means 0.6.
    `failure_threshold > 0` turns on the legacy mode: open after that many counted failures.
    """

    error_threshold: float = 0.5
    volume_threshold: int = 10
    sleep_window_s: float = 30.0
    half_open_requests: int = 5
    success_threshold: float = 0.6
    window_size_s: float = 60.0
    bucket_count: int = 10
    failure_threshold: int = 0

    def __post_init__(self) -> None:
        owner = "CircuitBreakerConfig"
        _require_number(owner, "error_threshold", self.error_threshold, 0.0, 1.0)
        _require_int(owner, "volume_threshold", self.volume_threshold, 0)
        _require_number(owner, "success_threshold", self.success_threshold, 0.0, 1.0)
        _require_int(owner, "half_open_requests", self.half_open_requests, 1)
        _require_number(owner, "sleep_window_s", self.sleep_window_s, 0.0)
        _require_number(owner, "window_size_s", self.window_size_s, 0.0)
        _require_int(owner, "bucket_count", self.bucket_count, 1)
        _require_int(owner, "failure_threshold", self.failure_threshold, 0)
        if self.window_size_s == 0:
            object.__setattr__(self, "window_size_s", 60.0)
        if self.success_threshold == 0:
            object.__setattr__(self, "success_threshold", 0.6)


@dataclass(frozen=True, slots=True)
class StateChange:
    """One breaker transition; `at` is the breaker's clock reading when it happened."""

    breaker: str
    from_state: CircuitState
    to_state: CircuitState
    reason: str
    at: float


@dataclass(slots=True)
class _Bucket:
    started_at: float
    successes: int = 0
    failures: int = 0


class _SlidingWindow:
    """Success and failure counts over the last `window_size_s`, in `bucket_count` buckets."""

    def __init__(self, window_size_s: float, bucket_count: int, now: float) -> None:
        self._window_size_s = window_size_s
        self._bucket_size_s = window_size_s / bucket_count
        self._buckets = [_Bucket(started_at=now) for _ in range(bucket_count)]
        self._current_index = 0
        self._last_rotation = now

    def _rotate(self, now: float) -> None:
        elapsed = now - self._last_rotation
        if elapsed < 0:
            # reference §9.2: a clock that went backwards clears the window.
            self._buckets = [_Bucket(started_at=now) for _ in self._buckets]
            self._current_index = 0
            self._last_rotation = now
            return
        if elapsed >= self._bucket_size_s:
            buckets_to_rotate = min(int(elapsed // self._bucket_size_s), len(self._buckets))
            for _ in range(buckets_to_rotate):
                self._current_index = (self._current_index + 1) % len(self._buckets)
                self._buckets[self._current_index] = _Bucket(started_at=now)
            self._last_rotation = now

    def record(self, succeeded: bool, now: float) -> None:
        self._rotate(now)
        bucket = self._buckets[self._current_index]
        if succeeded:
            bucket.successes += 1
        else:
            bucket.failures += 1

    def counts(self, now: float) -> tuple[int, int]:
        """(successes, failures) in buckets started after `now - window_size_s`."""
        cutoff = now - self._window_size_s
        live = [bucket for bucket in self._buckets if bucket.started_at > cutoff]
        return sum(b.successes for b in live), sum(b.failures for b in live)


class CircuitBreaker:
    """A CLOSED/OPEN/HALF_OPEN circuit breaker over a sliding window (reference §9.2).

    Call `can_execute()` before each call and `record_success()` / `record_failure(error)` after
    it. Closed opens on the legacy failure count or on volume and error rate; open moves to
    half-open on the first request after the sleep window; half-open admits at most
    `half_open_requests` probes and then closes or reopens on their success rate.

    The reference grows the sleep window by mutating its config; here the grown value lives in
    `sleep_window_s` (the config stays as given), persists across closes and is restored by
    `reset()`. Unlike the reference's `CanExecute`/`RecordSuccess` pair, admission here reserves a
    half-open probe slot and recording counts the probe, so half-open can actually close; an
    uncounted error (e.g. cancellation) frees its slot instead of leaving half-open stuck.
    """

    def __init__(
        self,
        name: str,
        config: CircuitBreakerConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_state_change: Callable[[StateChange], None] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"CircuitBreaker.name: expected a non-empty string, got {name!r}")
        self.name = name
        self.config = config if config is not None else CircuitBreakerConfig()
        self._clock = clock
        self._on_state_change = on_state_change
        self._force_open = False
        self._force_closed = False
        self._generation = 0
        self._total_executions = 0
        self._rejected_executions = 0
        self._clear_counters(self._clock())

    def _clear_counters(self, now: float) -> None:
        self._state = CircuitState.CLOSED
        self._state_changed_at = now
        self._sleep_window_s = self.config.sleep_window_s
        self._window = _SlidingWindow(self.config.window_size_s, self.config.bucket_count, now)
        self._legacy_failure_count = 0
        self._executions_in_flight = 0
        self._reset_half_open()

    def _reset_half_open(self) -> None:
        self._half_open_admitted = 0
        self._half_open_successes = 0
        self._half_open_failures = 0
        self._half_open_admission_times: deque[float] = deque()

    @property
    def state(self) -> CircuitState:
        """The current state; an open breaker past its sleep window reads open until asked."""
        return self._state

    @property
    def sleep_window_s(self) -> float:
        """The current sleep window: the configured one, grown 1.5× per failed half-open round."""
        return self._sleep_window_s

    def _transition(self, to_state: CircuitState, reason: str, now: float) -> None:
        from_state = self._state
        if from_state == to_state:
            return
        self._state = to_state
        self._state_changed_at = now
        self._generation += 1
        if to_state == CircuitState.HALF_OPEN:
            self._reset_half_open()
        if self._on_state_change is not None:
            self._on_state_change(StateChange(self.name, from_state, to_state, reason, now))

    def can_execute(self) -> bool:
        """Whether a call may go ahead now; an admitted call must be followed by a record_*."""
        admitted = self._admit()
        if admitted:
            self._total_executions += 1
            self._executions_in_flight += 1
        else:
            self._rejected_executions += 1
        return admitted

    def _admit(self) -> bool:
        if self._force_closed:
            return True
        if self._force_open:
            return False
        now = self._clock()
        if self._state == CircuitState.OPEN:
            open_for_s = now - self._state_changed_at
            if not open_for_s > self._sleep_window_s:
                return False
            reason = f"open for {open_for_s:g}s, past the sleep window of {self._sleep_window_s:g}s"
            self._transition(CircuitState.HALF_OPEN, reason, now)
        if self._state == CircuitState.HALF_OPEN:
            if self._half_open_admitted >= self.config.half_open_requests:
                return False
            self._half_open_admitted += 1
            self._half_open_admission_times.append(now)
        return True

    def record_success(self) -> None:
        """Record that an admitted call succeeded."""
        self._record(succeeded=True, counted=True)

    def record_failure(self, error: BaseException | None = None) -> None:
        """Record that an admitted call failed; `is_countable_error(error)` decides if it counts.

        `error=None` means an unspecified failure, which counts.
        """
        self._record(succeeded=False, counted=error is None or is_countable_error(error))

    def _record(self, *, succeeded: bool, counted: bool) -> None:
        self._executions_in_flight = max(0, self._executions_in_flight - 1)
        if self._force_open or self._force_closed:
            return
        now = self._clock()
        in_half_open = self._state == CircuitState.HALF_OPEN
        if in_half_open and self._half_open_admission_times:
            self._half_open_admission_times.popleft()
        if not counted:
            if in_half_open:
                self._half_open_admitted = max(0, self._half_open_admitted - 1)
            return
        self._window.record(succeeded, now)
        if not succeeded:
            self._legacy_failure_count += 1
        if in_half_open:
            if succeeded:
                self._half_open_successes += 1
            else:
                self._half_open_failures += 1
        self._evaluate(now)

    def _evaluate(self, now: float) -> None:
        config = self.config
        if self._state == CircuitState.CLOSED:
            if 0 < config.failure_threshold <= self._legacy_failure_count:
                reason = (
                    f"{self._legacy_failure_count} failures reached the failure threshold of "
                    f"{config.failure_threshold}"
                )
                self._transition(CircuitState.OPEN, reason, now)
                return
            successes, failures = self._window.counts(now)
            total = successes + failures
            error_rate = failures / total if total else 0.0
            if (
                config.volume_threshold > 0
                and total >= config.volume_threshold
                and error_rate >= config.error_threshold
            ):
                reason = (
                    f"error rate {error_rate:.2f} >= {config.error_threshold:g} over {total} "
                    f"requests (volume threshold {config.volume_threshold})"
                )
                self._transition(CircuitState.OPEN, reason, now)
        elif self._state == CircuitState.HALF_OPEN:
            probes = self._half_open_successes + self._half_open_failures
            if probes < config.half_open_requests:
                return
            success_rate = self._half_open_successes / probes
            tally = f"{self._half_open_successes}/{probes} probes succeeded"
            if success_rate >= config.success_threshold:
                self._legacy_failure_count = 0
                reason = f"{tally}, success rate {success_rate:.2f} >= {config.success_threshold:g}"
                self._transition(CircuitState.CLOSED, reason, now)
            else:
                self._sleep_window_s = min(
                    self._sleep_window_s * SLEEP_WINDOW_GROWTH, MAX_SLEEP_WINDOW_S
                )
                reason = (
                    f"{tally}, success rate {success_rate:.2f} < {config.success_threshold:g}; "
                    f"sleep window now {self._sleep_window_s:g}s"
                )
                self._transition(CircuitState.OPEN, reason, now)

    def force_open(self) -> None:
        """Reject every call until `clear_force()` or `reset()`; results go unrecorded meanwhile."""
        self._force_open, self._force_closed = True, False
        self._transition(CircuitState.OPEN, "forced open", self._clock())

    def force_closed(self) -> None:
        """Admit every call until `clear_force()` or `reset()`; results go unrecorded meanwhile."""
        self._force_closed, self._force_open = True, False
        self._transition(CircuitState.CLOSED, "forced closed", self._clock())

    def clear_force(self) -> None:
        """Remove a manual override; the state it left stays and evolves normally from there."""
        self._force_open = self._force_closed = False

    def reset(self) -> None:
        """Close the breaker and forget its window, counters, overrides and grown sleep window."""
        now = self._clock()
        self._force_open = self._force_closed = False
        from_state = self._state
        self._clear_counters(now)
        if from_state != CircuitState.CLOSED:
            self._generation += 1
            if self._on_state_change is not None:
                self._on_state_change(
                    StateChange(self.name, from_state, CircuitState.CLOSED, "reset", now)
                )

    def metrics(self) -> dict[str, Any]:
        """A snapshot with the reference's `GetMetrics()` keys (half-open adds four more)."""
        now = self._clock()
        successes, failures = self._window.counts(now)
        total = successes + failures
        snapshot: dict[str, Any] = {
            "name": self.name,
            "state": str(self._state),
            "generation": self._generation,
            "success": successes,
            "failure": failures,
            "total": total,
            "error_rate": failures / total if total else 0.0,
            "force_open": self._force_open,
            "force_closed": self._force_closed,
            "executions_in_flight": self._executions_in_flight,
            "total_executions": self._total_executions,
            "rejected_executions": self._rejected_executions,
        }
        if self._state == CircuitState.HALF_OPEN:
            snapshot["half_open_count"] = len(self._half_open_admission_times)
            snapshot["half_open_successes"] = self._half_open_successes
            snapshot["half_open_failures"] = self._half_open_failures
            snapshot["orphaned_requests"] = sum(
                1
                for admitted_at in self._half_open_admission_times
                if now - admitted_at > ORPHANED_AFTER_S
            )
        return snapshot


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """Retry parameters; defaults are the reference's `DefaultRetryConfig()` (reference §9.1)."""

    max_attempts: int = 3
    initial_delay_s: float = 0.1
    max_delay_s: float = 5.0
    backoff_factor: float = 2.0
    jitter: bool = True

    def __post_init__(self) -> None:
        owner = "RetryConfig"
        _require_int(owner, "max_attempts", self.max_attempts, 1)
        _require_number(owner, "initial_delay_s", self.initial_delay_s, 0.0)
        _require_number(owner, "max_delay_s", self.max_delay_s, 0.0)
        _require_number(owner, "backoff_factor", self.backoff_factor, 0.0)
        if not isinstance(self.jitter, bool):
            raise ValueError(f"{owner}.jitter: expected a boolean, got {self.jitter!r}")


def _delays_ns(config: RetryConfig, count: int) -> list[int]:
    """The sleeps after failed attempts 1..count, in integer nanoseconds (reference §9.1).

    From the second failure on the previous delay is multiplied (truncated) and capped; jitter is
    then added and kept, so it compounds, and nothing caps the jittered value.
    """
    max_delay_ns = round(config.max_delay_s * _NANOSECONDS_PER_SECOND)
    delay_ns = round(config.initial_delay_s * _NANOSECONDS_PER_SECOND)
    delays: list[int] = []
    for attempt in range(1, count + 1):
        if attempt > 1:
            delay_ns = min(int(delay_ns * config.backoff_factor), max_delay_ns)
        if config.jitter:
            delay_ns += int(delay_ns * 0.1 * math.sin(attempt))
        delays.append(delay_ns)
    return delays


class RetryExecutor:
    """Runs an async operation up to `max_attempts` times with the reference's backoff (§9.1)."""

    def __init__(
        self,
        config: RetryConfig | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config if config is not None else RetryConfig()
        self._sleep = sleep

    def planned_delays(self, count: int) -> list[float]:
        """Seconds slept after each of the first `count` failures; none after the last attempt."""
        sleeps = min(count, self.config.max_attempts - 1)
        return [delay_ns / _NANOSECONDS_PER_SECOND for delay_ns in _delays_ns(self.config, sleeps)]

    async def execute(self, operation: str, fn: Callable[[], Awaitable[T]]) -> T:
        """Await `fn()` until it returns, sleeping between failures; raise MaxRetriesExceeded.

        Any `Exception` from `fn` is retried; cancellation (also during a sleep) propagates at
        once without further attempts.
        """
        delays = iter(self.planned_delays(self.config.max_attempts))
        last_error: Exception | None = None
        for _ in range(self.config.max_attempts):
            if last_error is not None:
                await self._sleep(next(delays))
            try:
                return await fn()
            except Exception as error:
                last_error = error
        assert last_error is not None
        raise MaxRetriesExceeded(operation, self.config.max_attempts, last_error) from last_error


async def retry_with_circuit_breaker(
    config: RetryConfig | None,
    breaker: CircuitBreaker,
    fn: Callable[[], Awaitable[T]],
    *,
    operation: str | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Retry `fn` as `RetryExecutor` does, asking `breaker` before every try (reference §9.1).

    A refused try fails with CircuitOpenError, which is retried like any other failure; an
    admitted try records its success or failure on the breaker. `operation` defaults to the
    breaker's name.
    """

    async def guarded_call() -> T:
        if not breaker.can_execute():
            raise CircuitOpenError(breaker.name)
        try:
            result = await fn()
        except BaseException as error:
            breaker.record_failure(error)
            raise
        breaker.record_success()
        return result

    executor = RetryExecutor(config, sleep=sleep)
    return await executor.execute(operation or breaker.name, guarded_call)
