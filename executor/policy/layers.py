""""Why not" for the correction layers, and judging a layer's proposed correction.

Every final decision on a dispatched failure carries a note per layer: consulted with its
verdict, or why not (seed 000 §4, §5). `assess_correction` turns an LLM answer into a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from executor.params import coerce_parameters, guard_parameters, json_equal, value_at_path
from executor.policy.conditions import (
    QUOTA_STATUS,
    is_correctable_4xx,
    layer_off_reason,
    status_text,
    wants_legacy,
    wants_resolver,
)
from executor.policy.decision import Action, LayerNote, Outcome, Rule
from executor.policy.inputs import DecisionInputs, Layer, LayerVerdict
from executor.wire import RetryPolicy, is_terminal_status, is_transient_status

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
    status = status_text(inputs)
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
    if not is_correctable_4xx(inputs):
        return f"{status} is not a correctable 4xx"
    if layer is Layer.ANALYZER and not inputs.analyzer_available:
        return f"off: {layer_off_reason(inputs, 'the error analyzer is disabled')}"
    if layer is Layer.RE_RESOLUTION and not inputs.resolver_available:
        return f"off: {layer_off_reason(inputs, 'semantic retry is disabled')}"
    if layer is Layer.RE_RESOLUTION:
        eligible, why = wants_resolver(inputs)
        if not eligible:
            return why
    if layer is Layer.LEGACY:
        eligible, why = wants_legacy(inputs)
        if not eligible:
            return why
    return f"not reached: {rule.rule_id} decided first"


def layer_notes(rule: Rule, inputs: DecisionInputs, outcome: Outcome) -> tuple[LayerNote, ...]:
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
