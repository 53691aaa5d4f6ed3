"""Exponential backoff with deterministic sine jitter, exactly as TruvaG3's `core.BackoffConfig`."""

from __future__ import annotations

import math
from dataclasses import dataclass

_INT64_LIMIT = float(1 << 63)


def _trunc_to_int64(value: float) -> int:
    """Go's float64 → time.Duration conversion: truncate toward zero."""
    return int(value)


@dataclass(frozen=True, slots=True)
class BackoffConfig:
    """Backoff parameters in integer nanoseconds; `delay_ns(n)` is the wait after attempt n."""

    initial_delay_ns: int = 500_000_000
    max_delay_ns: int = 10_000_000_000
    backoff_factor: float = 2.0
    jitter_enabled: bool = True

    @classmethod
    def from_ms(
        cls,
        initial_delay_ms: float,
        max_delay_ms: float,
        backoff_factor: float,
        jitter_enabled: bool,
    ) -> BackoffConfig:
        """Build from millisecond values (rounded to the nearest nanosecond)."""
        return cls(
            initial_delay_ns=round(initial_delay_ms * 1_000_000),
            max_delay_ns=round(max_delay_ms * 1_000_000),
            backoff_factor=float(backoff_factor),
            jitter_enabled=jitter_enabled,
        )

    def delay_ns(self, attempt: int) -> int:
        """Delay in nanoseconds after the 1-indexed `attempt` failed (reference notes §1.6).

        attempt <= 0 counts as 1; the base is multiplied step by step with truncation and capped
        at max_delay_ns before jitter (the loop stops at the cap); jitter adds
        trunc(delay * 0.1 * sin(attempt)); a final cap applies.
        """
        if attempt <= 0:
            attempt = 1
        delay = self.initial_delay_ns
        for _ in range(1, attempt):
            product = float(delay) * self.backoff_factor
            # A product beyond int64 is above any int64 cap; Go's conversion would be undefined.
            if not abs(product) < _INT64_LIMIT or _trunc_to_int64(product) > self.max_delay_ns:
                delay = self.max_delay_ns
                break
            next_delay = _trunc_to_int64(product)
            if next_delay == delay:
                break  # A fixed point: the remaining iterations would not change it.
            delay = next_delay
        if self.jitter_enabled:
            delay += _trunc_to_int64(float(delay) * 0.1 * math.sin(float(attempt)))
        if delay > self.max_delay_ns:
            delay = self.max_delay_ns
        return delay

    def delay_ms(self, attempt: int) -> float:
        """Delay in milliseconds after the 1-indexed `attempt` failed."""
        return self.delay_ns(attempt) / 1e6
