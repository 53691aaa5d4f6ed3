"""Tool-contract warnings of recorded attempts, steps and executions (executor.contract)."""

from __future__ import annotations

from functools import lru_cache

from executor.contract import ContractWarning, response_warnings
from store.queries import AttemptRecord, ExecutionDetail, StepRecord

BADGE = "⚠"

# An execution screen asks for the warnings of each attempt more than once (the step table's
# badges, the summary, the attempt table); answers for small bodies are kept.
_CACHED_BODY_BYTES = 16 * 1024


def attempt_warnings(attempt: AttemptRecord) -> tuple[ContractWarning, ...]:
    """The warnings of one attempt's recorded response."""
    if attempt.transport_error:
        return ()
    body, dispatched = attempt.response_body, bool(attempt.dispatched)
    if body is None or len(body) <= _CACHED_BODY_BYTES:
        return _small_response_warnings(attempt.status, body, dispatched)
    return response_warnings(attempt.status, body, dispatched=dispatched)


@lru_cache(maxsize=4096)
def _small_response_warnings(
    status: int | None, body: bytes | None, dispatched: bool
) -> tuple[ContractWarning, ...]:
    return response_warnings(status, body, dispatched=dispatched)


def step_warning_count(step: StepRecord) -> int:
    """How many of the step's attempts got a response that breaks the tool contract."""
    return sum(1 for attempt in step.attempts if attempt_warnings(attempt))


def execution_warnings(detail: ExecutionDetail) -> list[tuple[str, int, ContractWarning]]:
    """Every warning of the execution as (step id, attempt n, warning)."""
    return [(step.step_id, attempt.n, warning) for step in detail.steps
            for attempt in step.attempts for warning in attempt_warnings(attempt)]  # fmt: skip


def badge(count: int) -> str:
    """` ⚠2` for two warnings; empty for none."""
    return f" {BADGE}{count}" if count else ""
