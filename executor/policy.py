"""The routing policy as data: a first-match rule table and a pure `decide()` that explains itself.

`decide()` never sleeps, sends or logs. It reads a frozen `DecisionInputs` and returns a frozen
`Decision` naming the action, the rule that fired, a one-line reason, the inputs it read, and why
each earlier rule did not match. When a correction layer has to be consulted, the decision is an
intermediate `ask_*` action; the step loop asks the layer, adds its verdict to the inputs and
calls `decide()` again. Rule ids are stable and listed in docs/rules.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from executor.backoff import BackoffConfig
from executor.config import CONFIG_FIELDS, ExecutorConfig
from executor.faults import FAULT_MATRIX, FailureClass, Recovery, classify_failure
from executor.jsonform import from_jsonable, to_jsonable
from executor.params import coerce_parameters, guard_parameters, json_equal, value_at_path
from executor.wire import RetryPolicy, is_success_status, is_terminal_status, is_transient_status


class Action(StrEnum):
    """Decision actions; the names are the product contract (SPEC §2.2, §3.2)."""

    REJECT_PREDISPATCH = "reject_predispatch"
    SUCCESS = "success"
    STOP_REFUSED = "stop_refused"
    STOP_TERMINAL = "stop_terminal"
    STOP_SINGLE_DISPATCH = "stop_single_dispatch"
    RETRY_SAME = "retry_same"
    STOP_BUDGET = "stop_budget"
    STOP_PROTECTED = "stop_protected"
    RETRY_CORRECTED = "retry_corrected"
    STOP_NO_CORRECTION = "stop_no_correction"
    STOP_CANCELLED = "stop_cancelled"
    STOP_UNSAFE_RESEND = "stop_unsafe_resend"
    STOP_CIRCUIT_OPEN = "stop_circuit_open"
    # Intermediate actions: the loop acts (dispatches, or asks a layer) and is not finished.
    DISPATCH = "dispatch"
    ASK_ANALYZER = "ask_analyzer"
    ASK_RESOLVER = "ask_resolver"
    ASK_LEGACY = "ask_legacy"


INTERMEDIATE_ACTIONS = frozenset(
    {Action.DISPATCH, Action.ASK_ANALYZER, Action.ASK_RESOLVER, Action.ASK_LEGACY}
)
RETRY_ACTIONS = frozenset({Action.RETRY_SAME, Action.RETRY_CORRECTED})


class Layer(StrEnum):
    """Correction layers, as recorded in decisions and attempts."""

    ANALYZER = "analyzer"
    RE_RESOLUTION = "re_resolution"
    LEGACY = "legacy"


@dataclass(frozen=True, slots=True)
class LayerVerdict:
    """What one correction layer answered, assessed against the step's parameters.

    `answered` is False when the LLM failed or its answer was malformed (`failure` says how).
    `unavailable` counts the endpoint failures (`HTTP 503 ×3`) when the LLM endpoint gave no
    answer after its retries. `proposed_parameters` is the full parameter map the correction
    would send.
    """

    layer: Layer
    answered: bool
    should_retry: bool = False
    is_transient: bool = False
    explanation: str = ""
    changes: Mapping[str, Any] | None = None
    proposed_parameters: Mapping[str, Any] | None = None
    changed_keys: tuple[str, ...] = ()
    touched_protected: tuple[str, ...] = ()
    guard_violations: tuple[str, ...] = ()
    failure: str | None = None
    unchanged_after_coercion: tuple[str, ...] = ()
    unavailable: str | None = None

    @property
    def acceptable(self) -> bool:
        """True when the correction may be applied: yes, a change, and valid parameters."""
        return (
            self.answered
            and self.should_retry
            and bool(self.changed_keys)
            and not self.touched_protected
            and not self.guard_violations
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for decision records, one key per field."""
        return to_jsonable(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LayerVerdict:
        """The verdict `to_dict` wrote; raises ValueError naming a bad field."""
        return from_jsonable(cls, data)


@dataclass(frozen=True, slots=True)
class DecisionInputs:
    """Everything a routing decision may read. Built by the step loop; never mutated.

    Fields are in the order `to_dict` records them (the order `explain` prints).
    """

    dispatched: bool
    status: int | None = None
    transport_error: str | None = None
    retry_policy: RetryPolicy = RetryPolicy.UNSPECIFIED
    guard_violations: tuple[str, ...] = ()
    attempt_number: int = 1
    max_attempts: int = 3
    validation_retries: int = 0
    max_validation_retries: int = 2
    max_semantic_retries: int = 2
    orchestrator: bool = False
    side_effects: str = "none"
    protected_keys: Mapping[str, str] = field(default_factory=dict)
    has_dependencies: bool = False
    llm_configured: bool = False
    error_analyzer_enabled: bool = True
    semantic_retry_enabled: bool = True
    semantic_retry_independent_steps: bool = True
    validation_feedback_enabled: bool = True
    legacy_callback_set: bool = False
    legacy_pattern: str | None = None
    cancelled: bool = False
    circuit_open: bool = False
    retry_after_ms: float | None = None
    retry_after_source: str | None = None
    elapsed_s: float = 0.0
    max_wall_clock_s: float | None = None
    llm_tokens_used: int = 0
    max_total_tokens: int | None = None
    llm_calls_used: int = 0
    max_llm_calls: int | None = None
    repeated_error_count: int = 0
    max_repeated_errors: int | None = None
    retry_after_max_ms: float | None = None
    body_is_json_object: bool = True
    ended_by_deadline: bool = False
    tool_retries_used: int = 0
    max_retries_per_tool: int | None = None
    tool: str = ""
    error_text: str = ""
    parameter_keys: tuple[str, ...] = ()
    backoff: BackoffConfig = field(default_factory=BackoffConfig)
    analyzer: LayerVerdict | None = None
    resolver: LayerVerdict | None = None
    legacy: LayerVerdict | None = None

    @property
    def analyzer_available(self) -> bool:
        """Layer 3 runs only with validation feedback on, an LLM configured and the analyzer on."""
        return (
            self.validation_feedback_enabled and self.llm_configured
            and self.error_analyzer_enabled
        )

    @property
    def resolver_available(self) -> bool:
        """Layer 4 runs only with validation feedback on, an LLM and semantic retry enabled."""
        return (
            self.validation_feedback_enabled and self.llm_configured
            and self.semantic_retry_enabled
        )

    @property
    def mutable_keys(self) -> tuple[str, ...]:
        """Top-level parameter keys a correction may change (a key protected as a whole is not)."""
        return tuple(k for k in self.parameter_keys if k not in self.protected_keys)

    @property
    def step_retries_left(self) -> int:
        """Further attempts this step may make after the current one."""
        return max(0, self.max_attempts - self.attempt_number)

    @property
    def tool_retries_left(self) -> int | None:
        """Unchanged resends the tool may still get in this task; None when unlimited."""
        if self.max_retries_per_tool is None:
            return None
        return max(0, self.max_retries_per_tool - self.tool_retries_used)

    @property
    def remaining_wall_clock_ms(self) -> float | None:
        """Milliseconds left of the task's wall-clock budget, or None when unlimited."""
        if self.max_wall_clock_s is None:
            return None
        return max(0.0, (self.max_wall_clock_s - self.elapsed_s) * 1000.0)

    def to_dict(self) -> dict[str, Any]:
        """The inputs as recorded with a decision: every field, JSON-able."""
        return to_jsonable(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecisionInputs:
        """The inputs `to_dict` recorded (absent fields take their defaults); raises ValueError
        naming an unknown key or a value of the wrong type."""
        return from_jsonable(cls, data)


@dataclass(frozen=True, slots=True)
class RuleMiss:
    """A rule evaluated before the one that fired, and why it did not match."""

    rule_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class LayerNote:
    """Whether one correction layer was consulted for a decision: its verdict, or why not."""

    layer: Layer
    consulted: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for decision records."""
        return to_jsonable(self)


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of `decide()`: what to do, which rule said so, and why.

    Final decisions also carry seed 003's fault-matrix cell (`failure_class`, `recovery`, a
    one-line user-facing `impact`) and, for a dispatched failure, a note per correction layer.
    """

    action: Action
    rule_id: str
    reason: str
    inputs: Mapping[str, Any]
    not_matched: tuple[RuleMiss, ...] = ()
    delay_ms: float | None = None
    delay_source: str | None = None
    layer: Layer | None = None
    corrected_parameters: Mapping[str, Any] | None = None
    failure_class: FailureClass | None = None
    recovery: Recovery | None = None
    impact: str | None = None
    layers: tuple[LayerNote, ...] = ()
    budgets: Mapping[str, int | None] = field(default_factory=dict)

    @property
    def final(self) -> bool:
        """False for intermediate actions (dispatch, ask a layer)."""
        return self.action not in INTERMEDIATE_ACTIONS

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, as stored in the attempts table and printed by `explain --json`."""
        return to_jsonable(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        """The decision `to_dict` wrote (absent fields take their defaults); raises ValueError."""
        return from_jsonable(cls, data)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a rule's check returns: matched or not, and the one-line reason either way."""

    matched: bool
    reason: str
    delay_ms: float | None = None
    delay_source: str | None = None
    layer: Layer | None = None
    corrected_parameters: Mapping[str, Any] | None = None


def hit(reason: str, **extra: Any) -> Outcome:
    """A matching outcome."""
    return Outcome(True, reason, **extra)


def miss(reason: str) -> Outcome:
    """A non-matching outcome."""
    return Outcome(False, reason)


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the policy table. `source` names the seed section it comes from."""

    rule_id: str
    action: Action
    row: str
    source: str
    summary: str
    check: Callable[[DecisionInputs], Outcome]


# ---------------------------------------------------------------------------
# Helpers shared by several rules.


QUOTA_STATUS = 402


def _count(number: int, noun: str) -> str:
    """`1 attempt`, `3 attempts`: a count with its noun in the right number."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _status_text(inputs: DecisionInputs) -> str:
    if inputs.status == 0:
        return f"transport failure ({inputs.transport_error or 'unknown'})"
    if inputs.status is None:
        return "no response (not dispatched)"
    return f"HTTP {inputs.status}"


def _is_correctable_4xx(inputs: DecisionInputs) -> bool:
    status = inputs.status or 0
    if is_terminal_status(status) or is_transient_status(status) or status == QUOTA_STATUS:
        return False
    return 400 <= status < 500


def _not_correctable_reason(inputs: DecisionInputs) -> str:
    return f"{_status_text(inputs)} is not a correctable 4xx (4xx but 401/402/403/405/408/429)"


def _within_correction_budget(inputs: DecisionInputs) -> bool:
    return inputs.validation_retries < inputs.max_validation_retries


def _wants_resolver(inputs: DecisionInputs) -> tuple[bool, str]:
    """Whether layer 4 is eligible by configuration and the analyzer's answer (budget aside)."""
    verdict = inputs.analyzer
    if verdict is None:
        return False, "layer 3 was not consulted; layer 4 runs only after layer 3 says cannot fix"
    if not verdict.answered:
        return False, f"layer 3 gave no usable answer ({verdict.failure}); layer 4 is not consulted"
    if verdict.should_retry:
        return False, "layer 3 did not say 'cannot fix' (should_retry=true)"
    if not inputs.resolver_available:
        return False, f"layer 4 is off: {_layer_off_reason(inputs, 'semantic retry is disabled')}"
    if not inputs.has_dependencies and not inputs.semantic_retry_independent_steps:
        return False, "step has no dependencies and semantic retry for independent steps is off"
    return True, "layer 3 said cannot fix and layer 4 is enabled"


FEEDBACK_OFF = (
    "correction is off: validation_feedback_enabled is false (layers 1 and 2 only, seed 001)"
)


def _wants_legacy(inputs: DecisionInputs) -> tuple[bool, str]:
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


def _layer_off_reason(inputs: DecisionInputs, disabled: str) -> str:
    """Why an LLM layer cannot run: correction off, no LLM, or the layer's own switch."""
    if not inputs.validation_feedback_enabled:
        return FEEDBACK_OFF
    if not inputs.llm_configured:
        return "no LLM is configured"
    return disabled


def _transient_delay(inputs: DecisionInputs) -> tuple[float, str]:
    """The wait before an unchanged resend: a Retry-After in full, else the computed backoff.

    seed 003: honor Retry-After when the service provides it; `max_delay_ms` caps only the
    exponential backoff (inside `BackoffConfig.delay_ns`). Waits too long to honour are stopped
    by the `budget.retry_after_max` and `budget.wall_clock.wait` rules, never shortened.
    """
    if inputs.retry_after_ms is not None:
        return max(0.0, inputs.retry_after_ms), inputs.retry_after_source or "retry_after_header"
    return inputs.backoff.delay_ns(inputs.attempt_number) / 1e6, "backoff"


def _source_text(source: str) -> str:
    return {
        "retry_after_header": "Retry-After header",
        "retry_after_details": "error.details.retry_after",
        "backoff": "exponential backoff",
    }.get(source, source)


def _resend_due(inputs: DecisionInputs) -> bool:
    """A transient failure with attempts left: a resend is next unless a budget says no."""
    return (
        is_transient_status(inputs.status or 0) and inputs.attempt_number < inputs.max_attempts
    )


def _request_may_have_been_accepted(inputs: DecisionInputs) -> bool:
    """Seed 003: a refused request (429, 408, 503 + Retry-After, connect error) was not accepted."""
    status = inputs.status or 0
    if status == 0:
        return inputs.transport_error not in {"connect", "cancelled"}
    if status in (408, 429):
        return False
    return not (status == 503 and inputs.retry_after_ms is not None)


# ---------------------------------------------------------------------------
# Pre-dispatch rules: evaluated before every HTTP call.


def _check_cancel_before(inputs: DecisionInputs) -> Outcome:
    if inputs.cancelled:
        return hit("the run was cancelled before this dispatch")
    return miss("not cancelled")


def _check_wall_clock(inputs: DecisionInputs) -> Outcome:
    limit = inputs.max_wall_clock_s
    if limit is not None and inputs.ended_by_deadline:
        return hit(
            f"the task wall-clock budget ({limit:g}s) ended the request in flight "
            f"at {inputs.elapsed_s:.3f}s; it is not resent"
        )
    if limit is not None and inputs.elapsed_s >= limit:
        return hit(f"task wall-clock budget used up: {inputs.elapsed_s:.3f}s of {limit:g}s")
    if limit is None:
        return miss("no wall-clock budget set")
    return miss(f"wall clock {inputs.elapsed_s:.3f}s is within {limit:g}s")


def _check_circuit(inputs: DecisionInputs) -> Outcome:
    if inputs.circuit_open:
        return hit("the tool's circuit breaker is open; the request is not sent")
    return miss("circuit closed or not enabled")


def _check_guard(inputs: DecisionInputs) -> Outcome:
    if inputs.guard_violations:
        return hit("pre-dispatch guard: " + "; ".join(inputs.guard_violations))
    return miss("parameters pass the pre-dispatch guard")


def _check_dispatch(inputs: DecisionInputs) -> Outcome:
    return hit("no pre-dispatch rule blocks the request")


PREDISPATCH_RULES: tuple[Rule, ...] = (
    # seed 000 §7 "Context-Aware Waiting": a cancelled context stops the step at once.
    Rule("cancel.before_dispatch", Action.STOP_CANCELLED, "12", "seed 000 §7",
         "context cancelled before the request", _check_cancel_before),
    # seed 003 "Termination conditions": every task limits wall-clock time.
    Rule("budget.wall_clock.before_dispatch", Action.STOP_BUDGET, "13", "seed 003",
         "task wall-clock budget used up", _check_wall_clock),
    # SPEC §3.2: an open circuit refuses the call without sending it.
    Rule("circuit.open", Action.STOP_CIRCUIT_OPEN, "—", "seed 000 §7; SPEC §3.2",
         "per-tool circuit breaker is open", _check_circuit),
    # seed 000 §12: references, required keys, enums and container shapes before every dispatch.
    Rule("guard.reject_predispatch", Action.REJECT_PREDISPATCH, "0", "seed 000 §12",
         "unresolved binding, missing required key, enum or shape mismatch", _check_guard),
    Rule("predispatch.dispatch", Action.DISPATCH, "—", "seed 000 §4",
         "default: send the request", _check_dispatch),
)


# ---------------------------------------------------------------------------
# Response rules: evaluated after each dispatch, first match wins.


def _check_success(inputs: DecisionInputs) -> Outcome:
    if inputs.status is not None and is_success_status(inputs.status):
        if not inputs.body_is_json_object:
            return miss(f"HTTP {inputs.status} but the body is not a JSON object")
        return hit(f"HTTP {inputs.status} is success")
    return miss(f"{_status_text(inputs)} is not 2xx")


def _check_result_parsing(inputs: DecisionInputs) -> Outcome:
    if inputs.status is not None and is_success_status(inputs.status):
        return hit(
            f"HTTP {inputs.status} but the body is not a JSON object: a result-parsing "
            "failure, not a success (seed 003); not resent, no LLM layer"
        )
    return miss(f"{_status_text(inputs)} is not 2xx")


def _check_cancel_in_flight(inputs: DecisionInputs) -> Outcome:
    if inputs.cancelled or inputs.transport_error == "cancelled":
        return hit("the run was cancelled; stopping without waiting or resending")
    return miss("not cancelled")


def _check_explicit_false(inputs: DecisionInputs) -> Outcome:
    if inputs.retry_policy is RetryPolicy.EXPLICIT_FALSE:
        return hit(
            f"the tool declared error.retryable=false on {_status_text(inputs)}; "
            "explicit refusal precedes status routing"
        )
    return miss(f"retry policy is {inputs.retry_policy.value}, not explicit false")


def _check_terminal(inputs: DecisionInputs) -> Outcome:
    if inputs.status is not None and is_terminal_status(inputs.status):
        return hit(f"HTTP {inputs.status} is terminal (auth or method); no retry, no LLM layer")
    return miss(f"{_status_text(inputs)} is not 401/403/405")


def _check_quota(inputs: DecisionInputs) -> Outcome:
    if inputs.status == QUOTA_STATUS:
        return hit(
            "HTTP 402: account quota or payment exhausted; rephrasing cannot fix account quota "
            "(seed 003), so no retry and no LLM layer"
        )
    return miss(f"{_status_text(inputs)} is not 402")


def _check_orchestrator(inputs: DecisionInputs) -> Outcome:
    if inputs.orchestrator:
        sent = (
            "; the connection was refused, so nothing reached it, and it is not retried"
            if inputs.transport_error == "connect" else ""
        )
        return hit(
            f"delegated orchestrator capability failed with {_status_text(inputs)}; "
            f"it gets one physical dispatch, ever{sent}"
        )
    return miss("capability is not a delegated orchestrator")


def _llm_call_due(inputs: DecisionInputs) -> bool:
    """Whether the table would consult an LLM layer next (budgets aside)."""
    return any(
        check(inputs).matched
        for check in (_check_ask_analyzer, _check_ask_resolver, _check_ask_legacy)
    ) and not _check_semantic_budget(inputs).matched


def _check_tokens(inputs: DecisionInputs) -> Outcome:
    limit = inputs.max_total_tokens
    if limit is None:
        return miss("no total-token budget set")
    if not _llm_call_due(inputs):
        return miss("no LLM call is due")
    if inputs.llm_tokens_used >= limit:
        return hit(f"task LLM token budget used up: {inputs.llm_tokens_used} of {limit} tokens")
    return miss(f"{inputs.llm_tokens_used} of {limit} LLM tokens used")


def _check_llm_calls(inputs: DecisionInputs) -> Outcome:
    limit = inputs.max_llm_calls
    if limit is None:
        return miss("no LLM-call budget set")
    if not _llm_call_due(inputs):
        return miss("no LLM call is due")
    if inputs.llm_calls_used >= limit:
        return hit(f"task LLM-call budget used up: {inputs.llm_calls_used} of {limit} calls")
    return miss(f"{inputs.llm_calls_used} of {limit} LLM calls used")


def _check_repeated(inputs: DecisionInputs) -> Outcome:
    limit = inputs.max_repeated_errors
    if limit is None:
        return miss("no repeated-error budget set")
    if inputs.repeated_error_count >= limit:
        return hit(
            f"the same error was seen {inputs.repeated_error_count} times (limit {limit})"
        )
    return miss(f"this error was seen {_count(inputs.repeated_error_count, 'time')}, "
                f"limit {limit}")


def _check_unsafe(inputs: DecisionInputs) -> Outcome:
    if inputs.side_effects != "unsafe":
        return miss(f"side effects are {inputs.side_effects!r}, not 'unsafe'")
    if not is_transient_status(inputs.status or 0):
        return miss(f"{_status_text(inputs)} is not a transient failure")
    if not _request_may_have_been_accepted(inputs):
        return miss(f"{_status_text(inputs)} means the request was refused, so a resend is safe")
    return hit(
        f"{_status_text(inputs)} after the request may have been accepted by an unsafe "
        "capability; not resent — recovery action: query status"
    )


def _check_retries_per_tool(inputs: DecisionInputs) -> Outcome:
    limit = inputs.max_retries_per_tool
    if limit is None:
        return miss("no per-tool retry budget set")
    if not _resend_due(inputs):
        return miss("no unchanged resend is due")
    tool = f"tool {inputs.tool!r}" if inputs.tool else "the tool"
    if inputs.tool_retries_used >= limit:
        return hit(
            f"{_status_text(inputs)} is transient, but {tool} has used {inputs.tool_retries_used} "
            f"of {limit} unchanged resends allowed per tool in this task (max_retries_per_tool)"
        )
    return miss(f"{tool} has used {inputs.tool_retries_used} of {limit} resends")


def _check_retry_after_max(inputs: DecisionInputs) -> Outcome:
    cap = inputs.retry_after_max_ms
    if inputs.retry_after_ms is None:
        return miss("the response asks for no Retry-After wait")
    if not _resend_due(inputs):
        return miss("no unchanged resend is due")
    source = _source_text(inputs.retry_after_source or "retry_after_header")
    if cap is not None and inputs.retry_after_ms > cap:
        return hit(
            f"{_status_text(inputs)} asks to wait {inputs.retry_after_ms:.1f} ms ({source}), "
            f"more than retry_after_max_ms {cap:g}; stopped rather than resent early"
        )
    return miss(f"the requested wait of {inputs.retry_after_ms:.1f} ms is within "
                f"retry_after_max_ms {'unlimited' if cap is None else f'{cap:g}'}")


def _check_wait_outlasts_budget(inputs: DecisionInputs) -> Outcome:
    remaining = inputs.remaining_wall_clock_ms
    if remaining is None:
        return miss("no wall-clock budget set")
    if not _resend_due(inputs):
        return miss("no unchanged resend is due")
    delay_ms, source = _transient_delay(inputs)
    if delay_ms > remaining:
        return hit(
            f"{_status_text(inputs)}: the wait of {delay_ms:.1f} ms ({_source_text(source)}) "
            f"would outlast the task wall-clock budget ({remaining:.1f} ms left of "
            f"{inputs.max_wall_clock_s:g}s); stopped rather than resent early"
        )
    return miss(f"the wait of {delay_ms:.1f} ms fits in the {remaining:.1f} ms left")


def _check_transient_retry(inputs: DecisionInputs) -> Outcome:
    if not is_transient_status(inputs.status or 0):
        return miss(f"{_status_text(inputs)} is not transient (transport, 408, 429, 5xx)")
    if inputs.attempt_number >= inputs.max_attempts:
        return miss(f"attempt {inputs.attempt_number} of {inputs.max_attempts}: none left")
    delay_ms, source = _transient_delay(inputs)
    return hit(
        f"{_status_text(inputs)} is transient; resend the same payload after {delay_ms:.1f} ms "
        f"({_source_text(source)}), attempt {inputs.attempt_number + 1} of {inputs.max_attempts}",
        delay_ms=delay_ms,
        delay_source=source,
    )


def _check_transient_exhausted(inputs: DecisionInputs) -> Outcome:
    if is_transient_status(inputs.status or 0):
        verb = "is" if inputs.max_attempts == 1 else "are"
        return hit(
            f"{_status_text(inputs)} is transient but all "
            f"{_count(inputs.max_attempts, 'attempt')} {verb} used"
        )
    return miss(f"{_status_text(inputs)} is not transient")


def _check_no_mutable(inputs: DecisionInputs) -> Outcome:
    if not _is_correctable_4xx(inputs):
        return miss(_not_correctable_reason(inputs))
    if inputs.protected_keys and not inputs.mutable_keys:
        keys = ", ".join(f"{k} ({why})" for k, why in inputs.protected_keys.items())
        return hit(f"every input is protected from correction: {keys}")
    return miss("some inputs may be corrected")


def _check_correction_budget(inputs: DecisionInputs) -> Outcome:
    if not _is_correctable_4xx(inputs):
        return miss(_not_correctable_reason(inputs))
    if not _within_correction_budget(inputs):
        return hit(
            f"correction budget used up: {inputs.validation_retries} of "
            f"{inputs.max_validation_retries} corrections"
        )
    return miss(
        f"{inputs.validation_retries} of {inputs.max_validation_retries} corrections used"
    )


def _check_ask_analyzer(inputs: DecisionInputs) -> Outcome:
    if not _is_correctable_4xx(inputs):
        return miss(_not_correctable_reason(inputs))
    if not inputs.analyzer_available:
        return miss(f"layer 3 error analyzer is off: {_layer_off_reason(inputs, 'it is disabled')}")
    if inputs.analyzer is not None:
        return miss("layer 3 was already consulted for this attempt")
    return hit(f"{_status_text(inputs)} may be correctable; consult the layer 3 error analyzer")


def _protected_hit(verdict: LayerVerdict | None, label: str) -> Outcome:
    if verdict is None or not verdict.answered or not verdict.should_retry:
        return miss(f"{label} proposed no correction")
    if verdict.touched_protected:
        keys = ", ".join(verdict.touched_protected)
        return hit(f"{label} correction would change protected input(s): {keys}")
    return miss(f"{label} correction touches no protected input")


def _accept_hit(verdict: LayerVerdict | None, label: str, layer: Layer) -> Outcome:
    if verdict is None:
        return miss(f"{label} was not consulted")
    if not verdict.answered:
        return miss(f"{label} gave no usable answer: {verdict.failure}")
    if not verdict.should_retry:
        return miss(f"{label} said cannot fix: {verdict.explanation or 'no reason given'}")
    if not verdict.changed_keys:
        coerced = (
            f" ({', '.join(verdict.unchanged_after_coercion)} differ only in text: after "
            "layer-2 coercion they are the values already sent)"
            if verdict.unchanged_after_coercion else ""
        )
        return miss(
            f"{label} proposed no change to the parameters on the wire{coerced}; a "
            "non-transient 4xx is never resent unchanged"
        )
    if verdict.guard_violations:
        return miss(
            f"{label} correction fails the pre-dispatch guard: "
            + "; ".join(verdict.guard_violations)
        )
    keys = ", ".join(verdict.changed_keys)
    return hit(
        f"{label} corrected {keys}: {verdict.explanation or 'no reason given'}",
        layer=layer,
        corrected_parameters=verdict.proposed_parameters,
    )


def _correctable_4xx_only(
    check: Callable[[DecisionInputs], Outcome],
) -> Callable[[DecisionInputs], Outcome]:
    """A layer verdict is read only for a correctable 4xx; elsewhere its rule does not match."""

    def gated(inputs: DecisionInputs) -> Outcome:
        if not _is_correctable_4xx(inputs):
            return miss(_not_correctable_reason(inputs))
        return check(inputs)

    gated.__name__ = check.__name__
    gated.__doc__ = check.__doc__
    return gated


def _unavailable_hit(inputs: DecisionInputs, verdict: LayerVerdict | None, label: str) -> Outcome:
    if verdict is None:
        return miss(f"{label} was not consulted")
    if verdict.unavailable is None:
        return miss(f"{label}'s LLM endpoint answered")
    return hit(
        f"{_status_text(inputs)}: the {label} was unavailable ({verdict.unavailable}); "
        "no correction, and a non-transient 4xx is never resent unchanged"
    )


UNAVAILABLE_RULE_IDS = frozenset(
    {"analyzer.unavailable", "re_resolution.unavailable", "legacy.unavailable"}
)


@_correctable_4xx_only
def _check_analyzer_unavailable(inputs: DecisionInputs) -> Outcome:
    return _unavailable_hit(inputs, inputs.analyzer, "layer 3 analyzer")


@_correctable_4xx_only
def _check_resolver_unavailable(inputs: DecisionInputs) -> Outcome:
    return _unavailable_hit(inputs, inputs.resolver, "layer 4 re-resolver")


@_correctable_4xx_only
def _check_legacy_unavailable(inputs: DecisionInputs) -> Outcome:
    return _unavailable_hit(inputs, inputs.legacy, "legacy correction callback")


@_correctable_4xx_only
def _check_analyzer_protected(inputs: DecisionInputs) -> Outcome:
    return _protected_hit(inputs.analyzer, "layer 3 analyzer")


@_correctable_4xx_only
def _check_analyzer_accept(inputs: DecisionInputs) -> Outcome:
    return _accept_hit(inputs.analyzer, "layer 3 analyzer", Layer.ANALYZER)


def _check_semantic_budget(inputs: DecisionInputs) -> Outcome:
    if not _is_correctable_4xx(inputs):
        return miss(_not_correctable_reason(inputs))
    eligible, why = _wants_resolver(inputs)
    if not eligible:
        return miss(why)
    if inputs.validation_retries >= inputs.max_semantic_retries:
        return hit(
            f"{_status_text(inputs)}: layer 3 said cannot fix and layer 4 has no budget left "
            f"({inputs.validation_retries} corrections used, max_semantic_retries "
            f"{inputs.max_semantic_retries}); never resent unchanged"
        )
    return miss(
        f"{inputs.validation_retries} of {inputs.max_semantic_retries} semantic retries used"
    )


def _check_ask_resolver(inputs: DecisionInputs) -> Outcome:
    if not _is_correctable_4xx(inputs):
        return miss(_not_correctable_reason(inputs))
    eligible, why = _wants_resolver(inputs)
    if not eligible:
        return miss(why)
    if inputs.resolver is not None:
        return miss("layer 4 was already consulted for this attempt")
    return hit("layer 3 said cannot fix; consult the layer 4 contextual re-resolver")


@_correctable_4xx_only
def _check_resolver_protected(inputs: DecisionInputs) -> Outcome:
    return _protected_hit(inputs.resolver, "layer 4 re-resolver")


@_correctable_4xx_only
def _check_resolver_accept(inputs: DecisionInputs) -> Outcome:
    return _accept_hit(inputs.resolver, "layer 4 re-resolver", Layer.RE_RESOLUTION)


def _check_ask_legacy(inputs: DecisionInputs) -> Outcome:
    if not _is_correctable_4xx(inputs):
        return miss(_not_correctable_reason(inputs))
    eligible, why = _wants_legacy(inputs)
    if not eligible:
        return miss(why)
    if inputs.legacy is not None:
        return miss("the legacy callback was already consulted for this attempt")
    return hit(f"{why}; consult the legacy correction callback")


@_correctable_4xx_only
def _check_legacy_protected(inputs: DecisionInputs) -> Outcome:
    return _protected_hit(inputs.legacy, "legacy callback")


@_correctable_4xx_only
def _check_legacy_accept(inputs: DecisionInputs) -> Outcome:
    return _accept_hit(inputs.legacy, "legacy callback", Layer.LEGACY)


def _no_correction_reason(inputs: DecisionInputs) -> str:
    parts: list[str] = []
    if not inputs.validation_feedback_enabled:
        parts.append(FEEDBACK_OFF)
    elif not inputs.llm_configured and not inputs.legacy_callback_set:
        parts.append("LLM layers are off (no LLM configured)")
    for verdict, label in (
        (inputs.analyzer, "layer 3"),
        (inputs.resolver, "layer 4"),
        (inputs.legacy, "legacy"),
    ):
        if verdict is None:
            continue
        if not verdict.answered:
            parts.append(f"{label} gave no usable answer ({verdict.failure})")
        elif not verdict.should_retry:
            transient = " and claimed transient" if verdict.is_transient else ""
            parts.append(f"{label} said cannot fix{transient}")
        elif not verdict.changed_keys:
            parts.append(f"{label} proposed no change on the wire")
        elif verdict.guard_violations:
            parts.append(f"{label} proposed invalid parameters")
    if (inputs.analyzer is None and not inputs.analyzer_available and inputs.llm_configured
            and inputs.validation_feedback_enabled):
        parts.append("the error analyzer is disabled")
        if inputs.legacy is None:
            parts.append(f"legacy correction not used: {_wants_legacy(inputs)[1]}")
    summary = "; ".join(parts) if parts else "no correction layer applies"
    return f"{_status_text(inputs)}: no accepted correction ({summary}); never resent unchanged"


def _check_no_correction(inputs: DecisionInputs) -> Outcome:
    if _is_correctable_4xx(inputs):
        return hit(_no_correction_reason(inputs))
    return miss(_not_correctable_reason(inputs))


def _check_default(inputs: DecisionInputs) -> Outcome:
    return hit(
        f"{_status_text(inputs)} matches no routing rule; an unknown outcome is not retried"
    )


RESPONSE_RULES: tuple[Rule, ...] = (
    # seed 000 §3: 2xx is success; a success:false body on 2xx is flagged, not retried.
    Rule("success.2xx", Action.SUCCESS, "1", "seed 000 §3, §10",
         "2xx response with a JSON object body", _check_success),
    # seed 003 fault matrix: result parsing is a failure class of its own, not a success.
    Rule("result.not_json_object", Action.STOP_TERMINAL, "1", "seed 003",
         "2xx whose body is not a JSON object", _check_result_parsing),
    # seed 000 §7: cancellation stops at once, even mid-wait.
    Rule("cancel.in_flight", Action.STOP_CANCELLED, "12", "seed 000 §7",
         "context cancelled", _check_cancel_in_flight),
    # seed 000 §3: explicit false precedes status routing, 5xx included.
    Rule("refused.explicit_false", Action.STOP_REFUSED, "2", "seed 000 §3, §12",
         "error.retryable is JSON false", _check_explicit_false),
    # seed 000 §12: 401/403/405 fail immediately; never reach layer 3 or 4.
    Rule("terminal.auth_or_method", Action.STOP_TERMINAL, "3", "seed 000 §4, §12",
         "HTTP 401, 403 or 405", _check_terminal),
    # seed 003: "Rephrasing cannot fix account quota"; quota is not retried or corrected.
    Rule("terminal.quota", Action.STOP_TERMINAL, "3", "seed 003",
         "HTTP 402: quota or payment", _check_quota),
    # seed 000 §4: delegated orchestrator capabilities keep their single-dispatch limit.
    Rule("orchestrator.single_dispatch", Action.STOP_SINGLE_DISPATCH, "4", "seed 000 §4, §12",
         "delegated orchestrator capability failed", _check_orchestrator),
    # seed 003 "Termination conditions": explicit terminal state naming the budget.
    Rule("budget.wall_clock", Action.STOP_BUDGET, "13", "seed 003",
         "task wall-clock budget used up", _check_wall_clock),
    Rule("budget.repeated_error", Action.STOP_BUDGET, "13", "seed 003",
         "the same error repeated too often", _check_repeated),
    # seed 003 "Retry answers three questions": a possibly accepted unsafe write is not resent.
    Rule("side_effects.unsafe_resend", Action.STOP_UNSAFE_RESEND, "2.6", "seed 003",
         "transient failure of an unsafe capability after possible acceptance", _check_unsafe),
    # seed 003: "Every task limits ... retries per tool" so one tool cannot consume the task.
    Rule("budget.retries_per_tool", Action.STOP_BUDGET, "13", "seed 003",
         "the tool's unchanged-resend budget for the task is used up", _check_retries_per_tool),
    # seed 003: honor Retry-After; a wait too long to honour stops, it is never cut short.
    Rule("budget.retry_after_max", Action.STOP_BUDGET, "5", "seed 003",
         "the requested Retry-After exceeds retry_after_max_ms", _check_retry_after_max),
    Rule("budget.wall_clock.wait", Action.STOP_BUDGET, "13", "seed 003",
         "the wait before a resend would outlast the wall-clock budget",
         _check_wait_outlasts_budget),
    # seed 000 §3, §4: transport, 408, 429 and 5xx retry the same payload; never an LLM call.
    Rule("transient.retry_same", Action.RETRY_SAME, "5", "seed 000 §3, §4, §7",
         "transient failure with attempts left", _check_transient_retry),
    Rule("budget.attempts", Action.STOP_BUDGET, "5", "seed 000 §4, §9",
         "transient failure with no attempts left", _check_transient_exhausted),
    # seed 000 §4: HITL-approved values are preserved; correction needs mutable inputs.
    Rule("protected.no_mutable_inputs", Action.STOP_PROTECTED, "6", "seed 000 §4, §12",
         "every input is HITL-approved or exact-bound", _check_no_mutable),
    # seed 000 §4: corrections consume maxValidationRetries.
    Rule("budget.corrections", Action.STOP_BUDGET, "7", "seed 000 §4, §5",
         "correction budget used up", _check_correction_budget),
    # seed 003: model turns and tokens are budgeted; checked when another LLM call is due.
    Rule("budget.total_tokens", Action.STOP_BUDGET, "13", "seed 003",
         "an LLM layer is due but the task token budget is used up", _check_tokens),
    Rule("budget.llm_calls", Action.STOP_BUDGET, "13", "seed 003",
         "an LLM layer is due but the model-turn budget is used up", _check_llm_calls),
    Rule("analyzer.ask", Action.ASK_ANALYZER, "8", "seed 000 §5",
         "consult the layer 3 error analyzer", _check_ask_analyzer),
    # seed 000 §3: a 4xx is not resent unchanged when correction is unavailable.
    Rule("analyzer.unavailable", Action.STOP_NO_CORRECTION, "11", "seed 000 §3",
         "the analyzer's LLM endpoint failed on every try", _check_analyzer_unavailable),
    Rule("analyzer.protected", Action.STOP_PROTECTED, "6", "seed 000 §12",
         "analyzer correction touches a protected input", _check_analyzer_protected),
    Rule("analyzer.accept", Action.RETRY_CORRECTED, "8", "seed 000 §4, §5; seed 001",
         "analyzer correction accepted (attempt--)", _check_analyzer_accept),
    # seed 000 §6: layer 4 needs semantic budget left; without it row 9 cannot apply (row 11).
    Rule("re_resolution.budget_exhausted", Action.STOP_NO_CORRECTION, "11", "seed 000 §6",
         "layer 3 said cannot fix and no semantic-retry budget is left", _check_semantic_budget),
    Rule("re_resolution.ask", Action.ASK_RESOLVER, "9", "seed 000 §6; seed 001",
         "consult the layer 4 contextual re-resolver", _check_ask_resolver),
    Rule("re_resolution.unavailable", Action.STOP_NO_CORRECTION, "11", "seed 000 §3",
         "the re-resolver's LLM endpoint failed on every try", _check_resolver_unavailable),
    Rule("re_resolution.protected", Action.STOP_PROTECTED, "6", "seed 000 §12",
         "re-resolved parameters change a protected input", _check_resolver_protected),
    Rule("re_resolution.accept", Action.RETRY_CORRECTED, "9", "seed 000 §6; seed 001",
         "re-resolved parameters accepted (attempt--)", _check_resolver_accept),
    # seed 000 §10: without an analyzer, the legacy callback via type patterns or retryable:true.
    Rule("legacy.ask", Action.ASK_LEGACY, "10", "seed 000 §10; seed 001 Layer 3",
         "consult the legacy correction callback", _check_ask_legacy),
    Rule("legacy.unavailable", Action.STOP_NO_CORRECTION, "11", "seed 000 §3",
         "the legacy correction's LLM endpoint failed on every try", _check_legacy_unavailable),
    Rule("legacy.protected", Action.STOP_PROTECTED, "6", "seed 000 §12",
         "legacy correction touches a protected input", _check_legacy_protected),
    Rule("legacy.accept", Action.RETRY_CORRECTED, "10", "seed 000 §10; seed 001 Layer 3",
         "legacy correction accepted (attempt--)", _check_legacy_accept),
    # seed 000 §3, §6: a non-transient 4xx is never resent unchanged, whatever the LLM claims.
    Rule("no_correction.stop", Action.STOP_NO_CORRECTION, "11", "seed 000 §3, §6; seed 001",
         "correctable 4xx with no accepted correction", _check_no_correction),
    # seed 003: an unknown, non-automatic-retry state is safer than assuming transient.
    Rule("default.unrouted", Action.STOP_TERMINAL, "default", "seed 003",
         "anything else (1xx, 3xx): stop", _check_default),
)

ALL_RULES: tuple[Rule, ...] = PREDISPATCH_RULES + RESPONSE_RULES

# Task budget stops that end the whole task: steps not yet started are skipped.
TASK_STOP_RULE_IDS = frozenset(
    {"budget.wall_clock", "budget.wall_clock.before_dispatch", "budget.total_tokens",
     "budget.llm_calls", "budget.repeated_error"}
)
# Stops that end the step because a task-level budget (not the tool) says so; a wait that
# would outlast the wall clock, or one tool's resend budget, ends only that step.
TASK_BUDGET_RULE_IDS = TASK_STOP_RULE_IDS | {"budget.wall_clock.wait", "budget.retries_per_tool"}


def decide(inputs: DecisionInputs) -> Decision:
    """Evaluate the rule table for `inputs` first-match and explain the outcome."""
    rules = RESPONSE_RULES if inputs.dispatched else PREDISPATCH_RULES
    misses: list[RuleMiss] = []
    for rule in rules:
        outcome = rule.check(inputs)
        if outcome.matched:
            final = rule.action not in INTERMEDIATE_ACTIONS
            failure_class, recovery, impact = (
                _fault_cell(rule, inputs, outcome) if final else (None, None, None)
            )
            return Decision(
                action=rule.action,
                rule_id=rule.rule_id,
                reason=outcome.reason,
                inputs=inputs.to_dict(),
                not_matched=tuple(misses),
                delay_ms=outcome.delay_ms,
                delay_source=outcome.delay_source,
                layer=outcome.layer,
                corrected_parameters=outcome.corrected_parameters,
                failure_class=failure_class,
                recovery=recovery,
                impact=impact,
                layers=_layer_notes(rule, inputs, outcome) if final else (),
                budgets={
                    "step_retries_left": inputs.step_retries_left,
                    "tool_retries_left": inputs.tool_retries_left,
                    "corrections_left": max(
                        0, inputs.max_validation_retries - inputs.validation_retries
                    ),
                },
            )
        misses.append(RuleMiss(rule.rule_id, outcome.reason))
    raise AssertionError("the rule table ends in a default rule that always matches")


# ---------------------------------------------------------------------------
# seed 003: "The user sees impact, a concrete recovery action, and relevant evidence."

# Actions whose recovery does not follow from the failure class alone: (recovery, consequence,
# advice); None keeps the class's own.
_ACTION_RECOVERY: dict[Action, tuple[Recovery, str, str | None]] = {
    Action.STOP_UNSAFE_RESEND: (
        Recovery.QUERY_STATUS,
        "the step stopped without resending, because the unsafe request may have been accepted",
        "ask the tool whether the request took effect before running it again",
    ),
    Action.STOP_SINGLE_DISPATCH: (
        Recovery.QUERY_STATUS,
        "the step stopped: a delegated orchestrator gets one dispatch and may have done part "
        "of the work",
        "check its status before running it again",
    ),
    Action.STOP_PROTECTED: (
        Recovery.REQUEST_AUTHORIZATION,
        "the step stopped: the correction would change HITL-approved or exact-bound inputs",
        "approve the change, or fix the step the binding reads from, then rerun",
    ),
    Action.STOP_CIRCUIT_OPEN: (
        Recovery.WAIT,
        "nothing was sent: the tool's circuit breaker is open after repeated failures",
        "wait for the breaker to half-open, then rerun the step",
    ),
    Action.REJECT_PREDISPATCH: (
        Recovery.MODIFY,
        "nothing was sent: the parameters fail the pre-dispatch guard",
        "correct the parameters (or the binding that produced them), then rerun the step",
    ),
}


def _fault_cell(
    rule: Rule, inputs: DecisionInputs, outcome: Outcome
) -> tuple[FailureClass | None, Recovery | None, str]:
    """The fault-matrix class, recovery action and one-line impact of a final decision."""
    if rule.action is Action.SUCCESS:
        return None, None, f"the step succeeded ({_status_text(inputs)})"
    evidence = _status_text(inputs) if inputs.dispatched else "before dispatch"
    if rule.rule_id in TASK_BUDGET_RULE_IDS:
        failure_class = FailureClass.BUDGET
    elif rule.action is Action.STOP_CANCELLED:
        failure_class = FailureClass.CANCELLATION
    else:
        failure_class = classify_failure(
            inputs.status, inputs.transport_error, dispatched=inputs.dispatched
        )
    cell = FAULT_MATRIX[failure_class]
    cause = rule.summary if failure_class is FailureClass.BUDGET else cell.cause
    if inputs.transport_error == "connect" and failure_class is FailureClass.SERVER_ERROR:
        cause = "the tool could not be reached"
    recovery, consequence, advice = cell.recovery, "the step failed", cell.advice
    if rule.action is Action.RETRY_SAME:
        recovery, advice = Recovery.WAIT, None
        consequence = (
            f"the executor resends the same payload after {outcome.delay_ms or 0.0:.1f} ms "
            f"({_source_text(outcome.delay_source or 'backoff')})"
        )
    elif rule.action is Action.RETRY_CORRECTED:
        recovery, advice = Recovery.MODIFY, None
        consequence = f"the executor resends with parameters corrected by the {outcome.layer}"
    elif rule.action in _ACTION_RECOVERY:
        recovery, consequence, override = _ACTION_RECOVERY[rule.action]
        advice = override or advice
    elif rule.rule_id in UNAVAILABLE_RULE_IDS:
        consequence = "the step failed: the LLM endpoint was unavailable, so no correction ran"
        advice = f"{advice} (or rerun it once the LLM endpoint answers)" if advice else None
    elif rule.rule_id == "budget.attempts":
        consequence = f"the step failed after {_count(inputs.max_attempts, 'attempt')}"
    elif rule.rule_id == "budget.corrections":
        consequence = "the step failed: its correction budget is used up"
    elif rule.rule_id == "budget.retry_after_max":
        consequence = "the step stopped rather than resend before the requested wait"
    elif rule.action is Action.STOP_REFUSED:
        consequence = "the step failed: the tool declared the error not retryable"
    elif failure_class is FailureClass.BUDGET:
        consequence = "the step stopped"
    impact = f"{cause} ({evidence}): {consequence}" + (f"; {advice}" if advice else "")
    return failure_class, recovery, impact


# ---------------------------------------------------------------------------
# "Why not" for the correction layers: consulted with a verdict, or why not (seed 000 §4, §5).

_LAYER_SLOTS: tuple[tuple[Layer, str], ...] = (
    (Layer.ANALYZER, "analyzer"), (Layer.RE_RESOLUTION, "resolver"), (Layer.LEGACY, "legacy"),
)


def _verdict_text(verdict: LayerVerdict) -> str:
    if verdict.unavailable is not None:
        return f"unavailable: its LLM endpoint failed ({verdict.unavailable})"
    if not verdict.answered:
        return f"no usable answer ({verdict.failure})"
    if not verdict.should_retry:
        transient = " and claimed the error is transient" if verdict.is_transient else ""
        return f"said cannot fix{transient}: {verdict.explanation or 'no reason given'}"
    if not verdict.changed_keys:
        return "proposed no change on the wire"
    if verdict.touched_protected:
        return f"proposed a change to protected input(s) {', '.join(verdict.touched_protected)}"
    if verdict.guard_violations:
        return "proposed parameters that fail the pre-dispatch guard"
    return f"corrected {', '.join(verdict.changed_keys)}: {verdict.explanation or 'no reason'}"


def _not_consulted_because(inputs: DecisionInputs, layer: Layer, rule: Rule) -> str:
    status = _status_text(inputs)
    if rule.action is Action.STOP_CANCELLED:
        return "the run was cancelled"
    if rule.rule_id == "result.not_json_object":
        return "a result-parsing failure is the tool's contract, not the parameters"
    if inputs.retry_policy is RetryPolicy.EXPLICIT_FALSE:
        return "the tool declared retryable:false, which stops before any correction (seed 000 §3)"
    if is_terminal_status(inputs.status or 0):
        return f"{status} is terminal: no layer may correct it (seed 000 §12)"
    if inputs.status == QUOTA_STATUS:
        return "HTTP 402 is quota: rephrasing cannot fix account quota (seed 003)"
    if inputs.orchestrator:
        return "a delegated orchestrator gets a single dispatch, with no correction (seed 000 §4)"
    if is_transient_status(inputs.status or 0):
        return (
            f"{status} is transient: the executor resends the same payload and never asks an "
            "LLM for it (seed 000 §4)"
        )
    if not _is_correctable_4xx(inputs):
        return f"{status} is not a correctable 4xx"
    if layer is Layer.ANALYZER and not inputs.analyzer_available:
        return f"off: {_layer_off_reason(inputs, 'the error analyzer is disabled')}"
    if layer is Layer.RE_RESOLUTION and not inputs.resolver_available:
        return f"off: {_layer_off_reason(inputs, 'semantic retry is disabled')}"
    if layer is Layer.RE_RESOLUTION:
        eligible, why = _wants_resolver(inputs)
        if not eligible:
            return why
    if layer is Layer.LEGACY:
        eligible, why = _wants_legacy(inputs)
        if not eligible:
            return why
    return f"not reached: {rule.rule_id} decided first"


def _layer_notes(rule: Rule, inputs: DecisionInputs, outcome: Outcome) -> tuple[LayerNote, ...]:
    """One note per correction layer for a dispatched failure; none for success or pre-dispatch."""
    if not inputs.dispatched or rule.action is Action.SUCCESS:
        return ()
    notes = []
    for layer, slot in _LAYER_SLOTS:
        verdict: LayerVerdict | None = getattr(inputs, slot)
        if verdict is not None:
            notes.append(LayerNote(layer, True, _verdict_text(verdict)))
        else:
            notes.append(LayerNote(layer, False, _not_consulted_because(inputs, layer, rule)))
    return tuple(notes)


def assess_correction(
    layer: Layer,
    *,
    answered: bool,
    current_parameters: Mapping[str, Any],
    proposed_parameters: Mapping[str, Any] | None = None,
    protected_keys: Mapping[str, str],
    schema: Mapping[str, Any] | None,
    plan_step_ids: frozenset[str] | tuple[str, ...],
    should_retry: bool = False,
    is_transient: bool = False,
    explanation: str = "",
    changes: Mapping[str, Any] | None = None,
    failure: str | None = None,
    protected_paths: Mapping[str, tuple[str | int, ...]] | None = None,
) -> LayerVerdict:
    """Judge a layer's proposal against the parameters last sent: what changes on the wire.

    The proposal is coerced by layer 2 first, as it would be before dispatch, so `"35.6"` for a
    number already sent as 35.6 is no change (seed 000 §4: "Changed, valid, binding-preserving
    parameters"). `protected_keys` maps a protected location (a top-level key, or a nested path
    such as `filter.city` given with its segments in `protected_paths`) to why it is protected.
    A top-level key missing from a full replacement is restored rather than counted as a change
    when it holds a protected value.
    """
    if not answered or proposed_parameters is None:
        return LayerVerdict(layer, answered=answered, should_retry=should_retry,
                            is_transient=is_transient, explanation=explanation,
                            changes=changes, failure=failure)
    segments = {
        path: (protected_paths or {}).get(path, (path,)) for path in protected_keys
    }
    proposed = dict(proposed_parameters)
    for path_segments in segments.values():
        top = path_segments[0]
        if top not in proposed and top in current_parameters:
            proposed[top] = current_parameters[top]
    coerced, _ = coerce_parameters(proposed, schema)
    sent = dict(coerced or {})
    all_keys = sorted(set(current_parameters) | set(sent), key=str)
    changed = tuple(
        k for k in all_keys
        if k not in current_parameters or k not in sent
        or not json_equal(current_parameters[k], sent[k])
    )
    unchanged_after_coercion = tuple(
        k for k in all_keys
        if k in current_parameters and k in proposed and k not in changed
        and not json_equal(current_parameters[k], proposed[k])
    )
    touched = tuple(
        path for path, path_segments in segments.items()
        if not json_equal(value_at_path(current_parameters, path_segments),
                          value_at_path(sent, path_segments))
    )
    violations = tuple(
        v.message for v in guard_parameters(sent, schema, plan_step_ids)
    ) if changed else ()
    return LayerVerdict(
        layer,
        answered=True,
        should_retry=should_retry,
        is_transient=is_transient,
        explanation=explanation,
        changes=changes,
        proposed_parameters=sent,
        changed_keys=changed,
        touched_protected=touched,
        guard_violations=violations,
        failure=failure,
        unchanged_after_coercion=unchanged_after_coercion,
    )


def with_verdict(inputs: DecisionInputs, verdict: LayerVerdict, **updates: Any) -> DecisionInputs:
    """Inputs with one layer's verdict added (and any counters updated) for the next `decide()`."""
    slot = {Layer.ANALYZER: "analyzer", Layer.RE_RESOLUTION: "resolver", Layer.LEGACY: "legacy"}
    return replace(inputs, **{slot[verdict.layer]: verdict}, **updates)


# ---------------------------------------------------------------------------
# Re-deciding recorded inputs under changed config (the base of a policy what-if).

# Config keys (the plan's `config` block) that `decide()` reads through a same-named input.
_CONFIG_INPUT_FIELDS = (
    "max_attempts", "max_validation_retries", "max_semantic_retries", "semantic_retry_enabled",
    "semantic_retry_independent_steps", "validation_feedback_enabled", "error_analyzer_enabled",
    "max_total_tokens", "max_llm_calls", "max_wall_clock_s", "max_repeated_errors",
    "retry_after_max_ms", "max_retries_per_tool",
)
# Config keys that `decide()` reads through the `backoff` input.
_CONFIG_BACKOFF_FIELDS = ("initial_delay_ms", "max_delay_ms", "backoff_factor", "jitter")
REDECIDE_KEYS = _CONFIG_INPUT_FIELDS + _CONFIG_BACKOFF_FIELDS


def redecide(inputs: Mapping[str, Any], overrides: Mapping[str, Any]) -> Decision:
    """`decide()` on recorded inputs (`DecisionInputs.to_dict()` form) with config overridden.

    `overrides` maps plan `config` keys (`max_attempts`, `initial_delay_ms`, ...) to new values,
    validated as a plan's config is. Raises ValueError naming an unknown key, a config key
    `decide()` does not read (`timeout_s`), a bad value, or a bad recorded input.
    """
    for key in overrides:
        if key in REDECIDE_KEYS:
            continue
        if key in CONFIG_FIELDS:
            raise ValueError(
                f"config key {key!r} does not change a decision (decide() reads only: "
                f"{', '.join(REDECIDE_KEYS)})"
            )
        raise ValueError(
            f"unknown config key {key!r} (expected one of: {', '.join(REDECIDE_KEYS)})"
        )
    recorded = DecisionInputs.from_dict(inputs)
    config = ExecutorConfig(**dict(overrides))  # validates each value; ConfigError names it
    updates: dict[str, Any] = {
        key: getattr(config, key) for key in _CONFIG_INPUT_FIELDS if key in overrides
    }
    if any(key in overrides for key in _CONFIG_BACKOFF_FIELDS):
        backoff = recorded.backoff
        current = {
            "initial_delay_ms": backoff.initial_delay_ns / 1_000_000,
            "max_delay_ms": backoff.max_delay_ns / 1_000_000,
            "backoff_factor": backoff.backoff_factor,
            "jitter": backoff.jitter_enabled,
        }
        current.update({key: getattr(config, key) for key in overrides if key in current})
        updates["backoff"] = BackoffConfig.from_ms(
            current["initial_delay_ms"], current["max_delay_ms"], current["backoff_factor"],
            current["jitter"],
        )
    return decide(replace(recorded, **updates))
