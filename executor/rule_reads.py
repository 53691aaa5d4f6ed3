"""Which `DecisionInputs` fields each routing rule reads: one table, checked against the rules.

The console highlights these inputs under a decision. `tests/unit/test_rule_reads.py` traces
every rule's check over a corpus of inputs and fails when a rule reads a field not listed here.
"""

from __future__ import annotations

# The status text of a reason reads the transport error when the status is 0.
_STATUS = ("status", "transport_error")
_WALL_CLOCK = ("max_wall_clock_s", "ended_by_deadline", "elapsed_s")
_RESEND_DUE = (*_STATUS, "attempt_number", "max_attempts")
_DELAY = ("retry_after_ms", "retry_after_source", "backoff")
_ANALYZER_ON = ("validation_feedback_enabled", "llm_configured", "error_analyzer_enabled")
_RESOLVER_WANTED = (
    "analyzer", "validation_feedback_enabled", "llm_configured", "semantic_retry_enabled",
    "has_dependencies", "semantic_retry_independent_steps",
)
_LEGACY_WANTED = (
    *_ANALYZER_ON, "legacy_callback_set", "legacy_pattern", "retry_policy",
)
_LLM_CALL_DUE = (
    *_STATUS, *_ANALYZER_ON, *_RESOLVER_WANTED, *_LEGACY_WANTED, "resolver", "legacy",
    "validation_retries", "max_semantic_retries",
)

RULE_READS: dict[str, tuple[str, ...]] = {
    "cancel.before_dispatch": ("cancelled",),
    "budget.wall_clock.before_dispatch": _WALL_CLOCK,
    "circuit.open": ("circuit_open",),
    "guard.reject_predispatch": ("guard_violations",),
    "predispatch.dispatch": (),
    "success.2xx": (*_STATUS, "body_is_json_object"),
    "result.not_json_object": _STATUS,
    "cancel.in_flight": ("cancelled", "transport_error"),
    "refused.explicit_false": ("retry_policy", *_STATUS),
    "terminal.auth_or_method": _STATUS,
    "terminal.quota": _STATUS,
    "orchestrator.single_dispatch": ("orchestrator", *_STATUS),
    "budget.wall_clock": _WALL_CLOCK,
    "budget.repeated_error": ("max_repeated_errors", "repeated_error_count"),
    "side_effects.unsafe_resend": ("side_effects", *_STATUS, "retry_after_ms"),
    "budget.retries_per_tool": (
        "max_retries_per_tool", *_RESEND_DUE, "tool", "tool_retries_used",
    ),
    "budget.retry_after_max": (
        "retry_after_max_ms", "retry_after_ms", "retry_after_source", *_RESEND_DUE,
    ),
    "budget.wall_clock.wait": ("max_wall_clock_s", "elapsed_s", *_RESEND_DUE, *_DELAY),
    "transient.retry_same": (*_RESEND_DUE, *_DELAY),
    "budget.attempts": (*_STATUS, "max_attempts"),
    "protected.no_mutable_inputs": (*_STATUS, "protected_keys", "parameter_keys"),
    "budget.corrections": (*_STATUS, "validation_retries", "max_validation_retries"),
    "budget.total_tokens": ("max_total_tokens", "llm_tokens_used", *_LLM_CALL_DUE),
    "budget.llm_calls": ("max_llm_calls", "llm_calls_used", *_LLM_CALL_DUE),
    "analyzer.ask": (*_STATUS, *_ANALYZER_ON, "analyzer"),
    "analyzer.unavailable": (*_STATUS, "analyzer"),
    "analyzer.protected": (*_STATUS, "analyzer"),
    "analyzer.accept": (*_STATUS, "analyzer"),
    "re_resolution.budget_exhausted": (
        *_STATUS, *_RESOLVER_WANTED, "validation_retries", "max_semantic_retries",
    ),
    "re_resolution.ask": (*_STATUS, *_RESOLVER_WANTED, "resolver"),
    "re_resolution.unavailable": (*_STATUS, "resolver"),
    "re_resolution.protected": (*_STATUS, "resolver"),
    "re_resolution.accept": (*_STATUS, "resolver"),
    "legacy.ask": (*_STATUS, *_LEGACY_WANTED, "legacy"),
    "legacy.unavailable": (*_STATUS, "legacy"),
    "legacy.protected": (*_STATUS, "legacy"),
    "legacy.accept": (*_STATUS, "legacy"),
    "no_correction.stop": (
        *_STATUS, *_LEGACY_WANTED, "analyzer", "resolver", "legacy",
    ),
    "default.unrouted": _STATUS,
}


def rule_reads(rule_id: str | None) -> tuple[str, ...]:
    """The input fields `rule_id` reads, each once, in table order; () for an unknown rule."""
    return tuple(dict.fromkeys(RULE_READS.get(rule_id or "", ())))
