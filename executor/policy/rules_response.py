"""The response rules: evaluated after each dispatch, first match wins."""

from __future__ import annotations

from collections.abc import Callable

from executor.policy.conditions import (
    FEEDBACK_OFF,
    QUOTA_STATUS,
    counted,
    is_correctable_4xx,
    layer_off_reason,
    not_correctable_reason,
    request_may_have_been_accepted,
    resend_due,
    source_text,
    status_text,
    transient_delay,
    wait_text,
    wants_legacy,
    wants_resolver,
    within_correction_budget,
)
from executor.policy.decision import Action, Outcome, Rule, hit, miss
from executor.policy.inputs import DecisionInputs, Layer, LayerVerdict
from executor.policy.rules_dispatch import check_wall_clock
from executor.wire import RetryPolicy, is_success_status, is_terminal_status, is_transient_status


def _check_success(inputs: DecisionInputs) -> Outcome:
    if inputs.status is not None and is_success_status(inputs.status):
        if not inputs.body_is_json_object:
            return miss(f"HTTP {inputs.status} but the body is not a JSON object")
        return hit(f"HTTP {inputs.status} is success")
    return miss(f"{status_text(inputs)} is not 2xx")


def _check_result_parsing(inputs: DecisionInputs) -> Outcome:
    if inputs.status is not None and is_success_status(inputs.status):
        return hit(
            f"HTTP {inputs.status} but the body is not a JSON object: a result-parsing "
            "failure, not a success (seed 003); not resent, no LLM layer"
        )
    return miss(f"{status_text(inputs)} is not 2xx")


def _check_cancel_in_flight(inputs: DecisionInputs) -> Outcome:
    if inputs.cancelled or inputs.transport_error == "cancelled":
        return hit("the run was cancelled; stopping without waiting or resending")
    return miss("not cancelled")


def _check_explicit_false(inputs: DecisionInputs) -> Outcome:
    if inputs.retry_policy is RetryPolicy.EXPLICIT_FALSE:
        return hit(
            f"the tool declared error.retryable=false on {status_text(inputs)}; "
            "explicit refusal precedes status routing"
        )
    return miss(f"retry policy is {inputs.retry_policy.value}, not explicit false")


def _check_terminal(inputs: DecisionInputs) -> Outcome:
    if inputs.status is not None and is_terminal_status(inputs.status):
        return hit(f"HTTP {inputs.status} is terminal (auth or method); no retry, no LLM layer")
    return miss(f"{status_text(inputs)} is not 401/403/405")


def _check_quota(inputs: DecisionInputs) -> Outcome:
    if inputs.status == QUOTA_STATUS:
        return hit(
            "HTTP 402: account quota or payment exhausted; rephrasing cannot fix account quota "
            "(seed 003), so no retry and no LLM layer"
        )
    return miss(f"{status_text(inputs)} is not 402")


def _check_orchestrator(inputs: DecisionInputs) -> Outcome:
    if inputs.orchestrator:
        sent = (
            "; the connection was refused, so nothing reached it, and it is not retried"
            if inputs.transport_error == "connect" else ""
        )
        return hit(
            f"delegated orchestrator capability failed with {status_text(inputs)}; "
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
            f"the same error was seen {counted(inputs.repeated_error_count, 'time')} "
            f"(limit {limit})"
        )
    return miss(f"this error was seen {counted(inputs.repeated_error_count, 'time')}, "
                f"limit {limit}")


def _check_unsafe(inputs: DecisionInputs) -> Outcome:
    if inputs.side_effects != "unsafe":
        return miss(f"side effects are {inputs.side_effects!r}, not 'unsafe'")
    if not is_transient_status(inputs.status or 0):
        return miss(f"{status_text(inputs)} is not a transient failure")
    if not request_may_have_been_accepted(inputs):
        return miss(f"{status_text(inputs)} means the request was refused, so a resend is safe")
    return hit(
        f"{status_text(inputs)} after the request may have been accepted by an unsafe "
        "capability; not resent — recovery action: query status"
    )


def _check_retries_per_tool(inputs: DecisionInputs) -> Outcome:
    limit = inputs.max_retries_per_tool
    if limit is None:
        return miss("no per-tool retry budget set")
    if not resend_due(inputs):
        return miss("no unchanged resend is due")
    tool = f"tool {inputs.tool!r}" if inputs.tool else "the tool"
    if inputs.tool_retries_used >= limit:
        return hit(
            f"{status_text(inputs)} is transient, but {tool} has used {inputs.tool_retries_used} "
            f"of {limit} unchanged resends allowed per tool in this task (max_retries_per_tool)"
        )
    return miss(f"{tool} has used {inputs.tool_retries_used} of {limit} resends")


def _check_retry_after_max(inputs: DecisionInputs) -> Outcome:
    cap = inputs.retry_after_max_ms
    if inputs.retry_after_ms is None:
        return miss("the response asks for no Retry-After wait")
    if not resend_due(inputs):
        return miss("no unchanged resend is due")
    source = source_text(inputs.retry_after_source or "retry_after_header")
    if cap is not None and inputs.retry_after_ms > cap:
        return hit(
            f"{status_text(inputs)} asks to wait {wait_text(inputs.retry_after_ms)} ({source}), "
            f"more than retry_after_max_ms {cap:g}; stopped rather than resent early"
        )
    return miss(f"the requested wait of {wait_text(inputs.retry_after_ms)} is within "
                f"retry_after_max_ms {'unlimited' if cap is None else f'{cap:g}'}")


def _check_wait_outlasts_budget(inputs: DecisionInputs) -> Outcome:
    remaining = inputs.remaining_wall_clock_ms
    if remaining is None:
        return miss("no wall-clock budget set")
    if not resend_due(inputs):
        return miss("no unchanged resend is due")
    delay_ms, source = transient_delay(inputs)
    if delay_ms > remaining:
        return hit(
            f"{status_text(inputs)}: the wait of {wait_text(delay_ms)} ({source_text(source)}) "
            f"would outlast the task wall-clock budget ({remaining:.1f} ms left of "
            f"{inputs.max_wall_clock_s:g}s); stopped rather than resent early"
        )
    return miss(f"the wait of {wait_text(delay_ms)} fits in the {remaining:.1f} ms left")


def _check_transient_retry(inputs: DecisionInputs) -> Outcome:
    if not is_transient_status(inputs.status or 0):
        return miss(f"{status_text(inputs)} is not transient (transport, 408, 429, 5xx)")
    if inputs.attempt_number >= inputs.max_attempts:
        return miss(f"attempt {inputs.attempt_number} of {inputs.max_attempts}: none left")
    delay_ms, source = transient_delay(inputs)
    return hit(
        f"{status_text(inputs)} is transient; resend the same payload after {wait_text(delay_ms)} "
        f"({source_text(source)}), attempt {inputs.attempt_number + 1} of {inputs.max_attempts}",
        delay_ms=delay_ms,
        delay_source=source,
    )


def _check_transient_exhausted(inputs: DecisionInputs) -> Outcome:
    if is_transient_status(inputs.status or 0):
        verb = "is" if inputs.max_attempts == 1 else "are"
        return hit(
            f"{status_text(inputs)} is transient but all "
            f"{counted(inputs.max_attempts, 'attempt')} {verb} used"
        )
    return miss(f"{status_text(inputs)} is not transient")


def _check_no_mutable(inputs: DecisionInputs) -> Outcome:
    if not is_correctable_4xx(inputs):
        return miss(not_correctable_reason(inputs))
    if inputs.protected_keys and not inputs.mutable_keys:
        keys = ", ".join(f"{k} ({why})" for k, why in inputs.protected_keys.items())
        return hit(f"every input is protected from correction: {keys}")
    return miss("some inputs may be corrected")


def _check_correction_budget(inputs: DecisionInputs) -> Outcome:
    if not is_correctable_4xx(inputs):
        return miss(not_correctable_reason(inputs))
    if not within_correction_budget(inputs):
        return hit(
            f"correction budget used up: {inputs.validation_retries} of "
            f"{inputs.max_validation_retries} corrections"
        )
    return miss(
        f"{inputs.validation_retries} of {inputs.max_validation_retries} corrections used"
    )


def _check_ask_analyzer(inputs: DecisionInputs) -> Outcome:
    if not is_correctable_4xx(inputs):
        return miss(not_correctable_reason(inputs))
    if not inputs.analyzer_available:
        return miss(f"layer 3 error analyzer is off: {layer_off_reason(inputs, 'it is disabled')}")
    if inputs.analyzer is not None:
        return miss("layer 3 was already consulted for this attempt")
    return hit(f"{status_text(inputs)} may be correctable; consult the layer 3 error analyzer")


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
        if not is_correctable_4xx(inputs):
            return miss(not_correctable_reason(inputs))
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
        f"{status_text(inputs)}: the {label} was unavailable ({verdict.unavailable}); "
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
    if not is_correctable_4xx(inputs):
        return miss(not_correctable_reason(inputs))
    eligible, why = wants_resolver(inputs)
    if not eligible:
        return miss(why)
    if inputs.validation_retries >= inputs.max_semantic_retries:
        return hit(
            f"{status_text(inputs)}: layer 3 said cannot fix and layer 4 has no budget left "
            f"({inputs.validation_retries} corrections used, of every layer, against "
            f"max_semantic_retries {inputs.max_semantic_retries}); never resent unchanged"
        )
    # seed 000 §6 compares the shared correction counter (validationRetries), not layer 4's own.
    return miss(
        f"{inputs.validation_retries} corrections used (of every layer) of "
        f"max_semantic_retries {inputs.max_semantic_retries}"
    )


def _check_ask_resolver(inputs: DecisionInputs) -> Outcome:
    if not is_correctable_4xx(inputs):
        return miss(not_correctable_reason(inputs))
    eligible, why = wants_resolver(inputs)
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
    if not is_correctable_4xx(inputs):
        return miss(not_correctable_reason(inputs))
    eligible, why = wants_legacy(inputs)
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
            parts.append(f"legacy correction not used: {wants_legacy(inputs)[1]}")
    summary = "; ".join(parts) if parts else "no correction layer applies"
    return f"{status_text(inputs)}: no accepted correction ({summary}); never resent unchanged"


def _check_no_correction(inputs: DecisionInputs) -> Outcome:
    if is_correctable_4xx(inputs):
        return hit(_no_correction_reason(inputs))
    return miss(not_correctable_reason(inputs))


def _check_default(inputs: DecisionInputs) -> Outcome:
    return hit(
        f"{status_text(inputs)} matches no routing rule; an unknown outcome is not retried"
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
         "task wall-clock budget used up", check_wall_clock),
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
