"""A decision as the console shows it: verdict first, the inputs its rule read, then why not."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from executor.rule_reads import rule_reads
from store.queries import AttemptRecord


@dataclass(frozen=True, slots=True)
class LayerLine:
    """One correction layer under a decision: consulted with its verdict, or why not."""

    layer: str
    consulted: bool
    detail: str


@dataclass(frozen=True, slots=True)
class DecisionView:
    """What the decision panel and `explain` show for one decided attempt.

    `read_inputs` are the (dotted key, value) pairs the deciding rule reads (executor.rule_reads);
    `other_inputs` the rest of the recorded inputs, shown collapsed under "all inputs".
    """

    action: str
    rule_id: str
    layer: str | None
    reason: str
    recovery: str | None
    impact: str | None
    delay: str | None
    corrected: str | None
    read_inputs: tuple[tuple[str, str], ...]
    other_inputs: tuple[tuple[str, str], ...]
    not_matched: tuple[tuple[str, str], ...]
    layers: tuple[LayerLine, ...]


def _inline(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False, default=str)


def flatten_inputs(inputs: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Decision inputs as (dotted key, value) pairs; nested objects are spread out."""
    if not isinstance(inputs, dict):
        return [(prefix or "inputs", _inline(inputs))]
    pairs: list[tuple[str, str]] = []
    for key, value in inputs.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            pairs += flatten_inputs(value, name)
        elif isinstance(value, str):
            pairs.append((name, value))
        else:
            pairs.append((name, "null" if value is None else _inline(value)))
    return pairs


def split_inputs(
    rule_id: str | None, inputs: Any
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(the pairs `rule_id` reads, in the rule's order; every other pair, in recorded order)."""
    pairs = flatten_inputs(inputs) if inputs else []
    reads = rule_reads(rule_id)
    top = {name: index for index, name in enumerate(reads)}
    read = [pair for pair in pairs if pair[0].split(".", 1)[0] in top]
    read.sort(key=lambda pair: top[pair[0].split(".", 1)[0]])
    rest = [pair for pair in pairs if pair[0].split(".", 1)[0] not in top]
    return tuple(read), tuple(rest)


def decision_view(attempt: AttemptRecord) -> DecisionView | None:
    """The view of `attempt`'s decision; None when no decision was recorded."""
    if attempt.action is None:
        return None
    decision = attempt.decision if isinstance(attempt.decision, dict) else {}
    read, rest = split_inputs(attempt.rule_id, decision.get("inputs"))
    delay = None
    if attempt.delay_ms is not None:
        delay = f"{attempt.delay_ms:.1f} ms before the next attempt (set by {attempt.delay_source})"
    return DecisionView(
        action=attempt.action,
        rule_id=attempt.rule_id or "-",
        layer=attempt.decision_layer,
        reason=attempt.reason or "-",
        recovery=decision.get("recovery"),
        impact=decision.get("impact"),
        delay=delay,
        corrected=None if attempt.corrected_parameters is None
        else _inline(attempt.corrected_parameters),
        read_inputs=read,
        other_inputs=rest,
        not_matched=tuple(
            (str(m.get("rule_id")), str(m.get("reason"))) for m in decision.get("not_matched") or ()
        ),
        layers=tuple(
            LayerLine(str(n.get("layer")), bool(n.get("consulted")), str(n.get("detail")))
            for n in decision.get("layers") or ()
        ),
    )


def decision_lines(view: DecisionView, *, all_inputs: bool = True) -> list[str]:
    """The view as plain lines (the text twin of the decision panel)."""
    layer = f" (layer {view.layer})" if view.layer else ""
    lines = [f"action      {view.action} by rule {view.rule_id}{layer}",
             f"reason      {view.reason}"]  # fmt: skip
    for label, value in (("recovery", view.recovery), ("impact", view.impact),
                         ("delay", view.delay), ("corrected", view.corrected)):  # fmt: skip
        if value:
            lines.append(f"{label.ljust(12)}{value}")
    lines.append(f"read by {view.rule_id}:")
    lines += [f"  {key} = {value}" for key, value in view.read_inputs] or ["  nothing recorded"]
    lines.append("why not (earlier rules, first match wins):")
    lines += [f"  {rule}: {reason}" for rule, reason in view.not_matched] or [
        "  none: the first rule matched"]  # fmt: skip
    if view.layers:
        lines.append("correction layers:")
        lines += [f"  {line.layer}: {'consulted' if line.consulted else 'not consulted'} — "
                  f"{line.detail}" for line in view.layers]  # fmt: skip
    if all_inputs and view.other_inputs:
        lines.append(f"all inputs ({len(view.other_inputs)} more):")
        lines += [f"  {key} = {value}" for key, value in view.other_inputs]
    return lines
