"""What changed in the request between consecutive attempts of a step, and who proposed it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from store.queries import AttemptRecord, LLMCallRecord, StepRecord

# The LLM call site of each correction layer.
LAYER_SITES = {
    "analyzer": "error_analysis",
    "re_resolution": "semantic_retry",
    "legacy": "correction",
}
_MISSING = object()


@dataclass(frozen=True, slots=True)
class KeyChange:
    """One parameter (a dotted path for nested objects) that differs: old → new."""

    key: str
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class RequestDiff:
    """Attempt `before` → `after`: the changed keys, the layer and the LLM call behind it."""

    before: int
    after: int
    changes: tuple[KeyChange, ...]
    layer: str | None
    proposed_by: LLMCallRecord | None
    call_number: int | None

    @property
    def source_text(self) -> str:
        """`analyzer layer, LLM call 1 of attempt #2 (error_analysis, model m)`, or why nothing
        changed. The call is numbered as in that attempt's LLM tab: the first LLM call of the
        step's second correction is that attempt's call 1, not the execution's."""
        if not self.changes:
            return "resent unchanged"
        if self.layer is None:
            return "changed without a correction layer (coercion or a new resolution)"
        text = f"{self.layer} layer"
        call = self.proposed_by
        if call is not None:
            text += (f", LLM call {self.call_number} of attempt #{self.before} "
                     f"({call.site}, model {call.model})")  # fmt: skip
        return text


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "(absent)"
    return json.dumps(value, ensure_ascii=False)


def key_changes(old: Any, new: Any, prefix: str = "") -> list[KeyChange]:
    """Every key whose value differs between two parameter maps, nested objects spread out."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[KeyChange] = []
        for key in list(old) + [k for k in new if k not in old]:
            name = f"{prefix}.{key}" if prefix else str(key)
            changes += key_changes(old.get(key, _MISSING), new.get(key, _MISSING), name)
        return changes
    if old is not _MISSING and new is not _MISSING and old == new and type(old) is type(new):
        return []
    return [KeyChange(prefix or "parameters", _shown(old), _shown(new))]


def _proposer(before: AttemptRecord, layer: str | None) -> tuple[LLMCallRecord | None, int | None]:
    site = LAYER_SITES.get(layer or "")
    calls = [(number, call) for number, call in enumerate(before.llm_calls, 1)
             if call.site == site and call.error is None]  # fmt: skip
    if not calls:
        return None, None
    number, call = calls[-1]  # the try that answered, after any retried ones
    return call, number


def request_diffs(step: StepRecord) -> list[RequestDiff]:
    """One diff per pair of consecutive attempts of `step`."""
    diffs = []
    for before, after in zip(step.attempts, step.attempts[1:], strict=False):
        changes = tuple(key_changes(before.parameters or {}, after.parameters or {}))
        layer = after.correction_layer if changes else None
        call, number = _proposer(before, layer) if layer else (None, None)
        diffs.append(RequestDiff(before.n, after.n, changes, layer, call, number))
    return diffs


def diff_lines(diff: RequestDiff) -> list[str]:
    """The diff as plain lines: a head, then `key: old → new` per change."""
    head = f"#{diff.before} → #{diff.after}  {diff.source_text}"
    return [head, *(f"  {change.key}: {change.old} → {change.new}" for change in diff.changes)]
