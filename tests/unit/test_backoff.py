"""BackoffConfig.delay: the exact algorithm and table of reference notes §1.6 and SPEC §2.3."""

from __future__ import annotations

import pytest

from executor.backoff import BackoffConfig

DEFAULTS = BackoffConfig()
NO_JITTER = BackoffConfig(jitter_enabled=False)

# attempt → delay in ms with the defaults (500 ms, 10 s, 2.0, jitter on).
DEFAULT_TABLE = [
    (1, 542.0735),
    (2, 1090.9297),
    (3, 2028.2240),
    (4, 3697.2790),
    (5, 7232.8606),
    (6, 9720.5845),
    (7, 10000.0),
    (8, 10000.0),
    (9, 10000.0),
    (10, 9455.9789),
]


@pytest.mark.parametrize(
    ("attempt", "expected_ms"),
    DEFAULT_TABLE,
    ids=[f"attempt_{attempt}" for attempt, _ in DEFAULT_TABLE],
)
def test_default_table(attempt: int, expected_ms: float) -> None:
    assert DEFAULTS.delay_ms(attempt) == pytest.approx(expected_ms, abs=0.0001)


def test_default_table_is_nanosecond_exact() -> None:
    assert [DEFAULTS.delay_ns(attempt) for attempt in range(1, 11)] == [
        542_073_549,
        1_090_929_742,
        2_028_224_001,
        3_697_279_002,
        7_232_860_581,
        9_720_584_502,
        10_000_000_000,
        10_000_000_000,
        10_000_000_000,
        9_455_978_890,
    ]


EDGE_CASES = [
    ("attempt_0_is_attempt_1", DEFAULTS, 0, 542_073_549),
    ("negative_attempt_is_attempt_1", DEFAULTS, -5, 542_073_549),
    ("no_jitter_attempt_0", NO_JITTER, 0, 500_000_000),
    ("no_jitter_attempt_minus_5", NO_JITTER, -5, 500_000_000),
    ("no_jitter_attempt_3", NO_JITTER, 3, 2_000_000_000),
    ("no_jitter_attempt_100", NO_JITTER, 100, 10_000_000_000),
    # 10 s + trunc(10 s × 0.1 × sin(100)) = 10 s − 506_365_641 ns.
    ("jitter_attempt_100_capped_before_jitter", DEFAULTS, 100, 9_493_634_359),
    ("initial_0_attempt_1", BackoffConfig(initial_delay_ns=0), 1, 0),
    ("initial_0_attempt_5", BackoffConfig(initial_delay_ns=0), 5, 0),
    # Factor 0 zeroes every delay after the first; attempt 1 is never multiplied.
    ("factor_0_attempt_1", BackoffConfig(backoff_factor=0.0), 1, 542_073_549),
    ("factor_0_attempt_2", BackoffConfig(backoff_factor=0.0), 2, 0),
    ("factor_0_attempt_9", BackoffConfig(backoff_factor=0.0), 9, 0),
    ("max_0_attempt_1", BackoffConfig(max_delay_ns=0), 1, 0),
    ("max_0_attempt_4", BackoffConfig(max_delay_ns=0), 4, 0),
    ("factor_1_constant", BackoffConfig(backoff_factor=1.0, jitter_enabled=False), 50, 500_000_000),
    # 1.5 × 333 ns = 499.5 ns: each step truncates toward zero like Go's Duration(float64).
    ("truncates_each_step", BackoffConfig(333, 10**9, 1.5, False), 3, 748),
    ("huge_factor_caps", BackoffConfig(backoff_factor=1e300, jitter_enabled=False), 3, 10**10),
    ("huge_attempt", BackoffConfig(jitter_enabled=False), 10**9, 10**10),
]


@pytest.mark.parametrize(
    ("config", "attempt", "expected_ns"),
    [case[1:] for case in EDGE_CASES],
    ids=[case[0] for case in EDGE_CASES],
)
def test_edge_cases(config: BackoffConfig, attempt: int, expected_ns: int) -> None:
    assert config.delay_ns(attempt) == expected_ns


def test_jitter_stays_within_ten_percent_of_base() -> None:
    for attempt in range(1, 200):
        base = NO_JITTER.delay_ns(attempt)
        jittered = DEFAULTS.delay_ns(attempt)
        assert base * 0.9 <= jittered <= min(base * 1.1, DEFAULTS.max_delay_ns)


def test_from_ms() -> None:
    config = BackoffConfig.from_ms(750, 30_000, 3.0, False)
    assert config == BackoffConfig(750_000_000, 30_000_000_000, 3.0, False)
    assert BackoffConfig.from_ms(0.1, 1.1, 2, True).initial_delay_ns == 100_000
    assert BackoffConfig.from_ms(0.1, 1.1, 2, True).max_delay_ns == 1_100_000


def test_delay_ms_is_ns_over_a_million() -> None:
    assert DEFAULTS.delay_ms(4) == 3_697_279_002 / 1e6
