"""Conditions and wording shared by several rules (status classes, budgets, layer eligibility)."""

from __future__ import annotations

from executor.policy.inputs import DecisionInputs
from executor.wire import RetryPolicy, is_terminal_status, is_transient_status

QUOTA_STATUS = 402


def counted(number: int, noun: str) -> str:
    """`1 attempt`, `3 attempts`: a count with its noun in the right number."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def status_text(inputs: DecisionInputs) -> str:
    if inputs.status == 0:
        return f"transport failure ({inputs.transport_error or 'unknown'})"
    if inputs.status is None:
        return "no response (not dispatched)"
    return f"HTTP {inputs.status}"


def is_correctable_4xx(inputs: DecisionInputs) -> bool:
    status = inputs.status or 0
    if is_terminal_status(status) or is_transient_status(status) or status == QUOTA_STATUS:
        return False
    return 400 <= status < 500


def not_correctable_reason(inputs: DecisionInputs) -> str:
    return f"{status_text(inputs)} is not a correctable 4xx (4xx but 401/402/403/405/408/429)"


def within_correction_budget(inputs: DecisionInputs) -> bool:
    return inputs.validation_retries < inputs.max_validation_retries


def wants_resolver(inputs: DecisionInputs) -> tuple[bool, str]:
    """Whether layer 4 is eligible by configuration and the analyzer's answer (budget aside)."""
    verdict = inputs.analyzer
    if verdict is None:
        return False, "layer 3 was not consulted; layer 4 runs only after layer 3 says cannot fix"
    if not verdict.answered:
        return False, f"layer 3 gave no usable answer ({verdict.failure}); layer 4 is not consulted"
    if verdict.should_retry:
        return False, "layer 3 did not say 'cannot fix' (should_retry=true)"
    if not inputs.resolver_available:
        return False, f"layer 4 is off: {layer_off_reason(inputs, 'semantic retry is disabled')}"
    if not inputs.has_dependencies and not inputs.semantic_retry_independent_steps:
        return False, "step has no dependencies and semantic retry for independent steps is off"
    return True, "layer 3 said cannot fix and layer 4 is enabled"


FEEDBACK_OFF = (
    "correction is off: validation_feedback_enabled is false (layers 1 and 2 only, seed 001)"
)


def wants_legacy(inputs: DecisionInputs) -> tuple[bool, str]:
    """Whether the legacy correction callback is eligible (budget aside)."""
    if not inputs.validation_feedback_enabled:
        return False, FEEDBACK_OFF
    if inputs.analyzer_available:
        return False, "the error analyzer is enabled, so the legacy callback is not used"
    if not inputs.legacy_callback_set:
        why = "no LLM is configured" if not inputs.llm_configured else "no callback is set"
        return False, f"no legacy correction callback ({why})"
    if inputs.legacy_pattern is None and inputs.retry_policy is not RetryPolicy.EXPLICIT_TRUE:
        return False, "error text matches no type/validation pattern and retryable is not true"
    trigger = (
        f"error matches {inputs.legacy_pattern!r}"
        if inputs.legacy_pattern is not None
        else "retryable is explicitly true"
    )
    return True, trigger


def layer_off_reason(inputs: DecisionInputs, disabled: str) -> str:
    """Why an LLM layer cannot run: correction off, no LLM, or the layer's own switch."""
    if not inputs.validation_feedback_enabled:
        return FEEDBACK_OFF
    if not inputs.llm_configured:
        return "no LLM is configured"
    return disabled


def transient_delay(inputs: DecisionInputs) -> tuple[float, str]:
    """The wait before an unchanged resend: a Retry-After in full, else the computed backoff.

    seed 003: honor Retry-After when the service provides it; `max_delay_ms` caps only the
    exponential backoff (inside `BackoffConfig.delay_ns`). Waits too long to honour are stopped
    by the `budget.retry_after_max` and `budget.wall_clock.wait` rules, never shortened.
    """
    if inputs.retry_after_ms is not None:
        return max(0.0, inputs.retry_after_ms), inputs.retry_after_source or "retry_after_header"
    return inputs.backoff.delay_ns(inputs.attempt_number) / 1e6, "backoff"


def wait_text(milliseconds: float) -> str:
    """A wait in ms as the reasons say it: `1090.9 ms`; past 1e13 ms (about 317 years)
    `1.798e+308 ms` (a Retry-After too long for a float is `LONGEST_WAIT_MS`, 309 digits)."""
    return f"{milliseconds:.1f} ms" if milliseconds < 1e13 else f"{milliseconds:.4g} ms"


def source_text(source: str) -> str:
    return {
        "retry_after_header": "Retry-After header",
        "retry_after_details": "error.details.retry_after",
        "backoff": "exponential backoff",
    }.get(source, source)


def resend_due(inputs: DecisionInputs) -> bool:
    """A transient failure with attempts left: a resend is next unless a budget says no."""
    return (
        is_transient_status(inputs.status or 0) and inputs.attempt_number < inputs.max_attempts
    )


def request_may_have_been_accepted(inputs: DecisionInputs) -> bool:
    """Seed 003: a refused request (429, 408, 503 + Retry-After, connect error) was not accepted."""
    status = inputs.status or 0
    if status == 0:
        return inputs.transport_error not in {"connect", "cancelled"}
    if status in (408, 429):
        return False
    return not (status == 503 and inputs.retry_after_ms is not None)
