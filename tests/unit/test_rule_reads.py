"""The rule-reads table agrees with the rules: tracing each check finds no unlisted field."""

from __future__ import annotations

import itertools
from dataclasses import fields, replace
from typing import Any

import pytest

from executor.policy import ALL_RULES, DecisionInputs, Layer, LayerVerdict
from executor.rule_reads import RULE_READS, rule_reads
from executor.wire import RetryPolicy

_FIELDS = frozenset(f.name for f in fields(DecisionInputs))


class _Tracer:
    """Stands in for DecisionInputs and records every field a check reads, via properties too."""

    def __init__(self, inputs: DecisionInputs) -> None:
        object.__setattr__(self, "_inputs", inputs)
        object.__setattr__(self, "read", set())

    def __getattr__(self, name: str) -> Any:
        prop = getattr(DecisionInputs, name, None)
        if isinstance(prop, property):
            return prop.fget(self)
        if name in _FIELDS:
            self.read.add(name)
        return getattr(self._inputs, name)


def _verdict(layer: Layer, **kwargs: Any) -> LayerVerdict:
    return LayerVerdict(layer, answered=True, **kwargs)


def _corpus() -> list[DecisionInputs]:
    base = DecisionInputs(dispatched=True, parameter_keys=("city",), llm_configured=True)
    verdicts = (
        None,
        _verdict(Layer.ANALYZER, should_retry=True, changed_keys=("city",),
                 proposed_parameters={"city": "Tokyo"}),
        _verdict(Layer.ANALYZER, should_retry=False),
        _verdict(Layer.ANALYZER, should_retry=True, touched_protected=("city",)),
        LayerVerdict(Layer.ANALYZER, answered=False, failure="bad json", unavailable="503 ×3"),
    )  # fmt: skip
    variants = [
        {"status": s} for s in (200, 400, 401, 402, 404, 408, 429, 503, 302, 0)
    ]
    flags = [
        {}, {"body_is_json_object": False}, {"cancelled": True}, {"transport_error": "connect"},
        {"retry_policy": RetryPolicy.EXPLICIT_FALSE}, {"retry_policy": RetryPolicy.EXPLICIT_TRUE},
        {"orchestrator": True}, {"side_effects": "unsafe"}, {"max_wall_clock_s": 1.0,
         "elapsed_s": 2.0}, {"max_wall_clock_s": 10.0, "ended_by_deadline": True},
        {"max_repeated_errors": 1, "repeated_error_count": 2}, {"max_retries_per_tool": 0},
        {"retry_after_ms": 5000.0, "retry_after_max_ms": 10.0}, {"attempt_number": 3},
        {"protected_keys": {"city": "hitl"}}, {"validation_retries": 2},
        {"max_total_tokens": 1, "llm_tokens_used": 5}, {"max_llm_calls": 1, "llm_calls_used": 1},
        {"error_analyzer_enabled": False, "legacy_callback_set": True, "legacy_pattern": "type"},
        {"validation_feedback_enabled": False}, {"llm_configured": False},
        {"semantic_retry_independent_steps": False}, {"max_semantic_retries": 0},
    ]  # fmt: skip
    corpus = []
    for variant, flag, verdict in itertools.product(variants, flags, verdicts):
        inputs = replace(base, **variant, **flag)
        if verdict is not None:
            inputs = replace(inputs, analyzer=verdict, resolver=replace(
                verdict, layer=Layer.RE_RESOLUTION), legacy=replace(verdict, layer=Layer.LEGACY))
        corpus.append(inputs)
    corpus += [replace(base, dispatched=False, guard_violations=("missing city",)),
               replace(base, dispatched=False, circuit_open=True)]  # fmt: skip
    return corpus


def test_every_rule_has_a_row_and_every_row_is_a_rule() -> None:
    assert {rule.rule_id for rule in ALL_RULES} == set(RULE_READS)
    assert all(set(reads) <= _FIELDS for reads in RULE_READS.values())


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.rule_id)
def test_a_rule_reads_only_the_fields_its_row_lists(rule) -> None:
    traced: set[str] = set()
    for inputs in _corpus():
        tracer = _Tracer(inputs)
        rule.check(tracer)
        traced |= tracer.read
    assert traced <= set(rule_reads(rule.rule_id)), sorted(traced - set(rule_reads(rule.rule_id)))


def test_an_unknown_rule_reads_nothing() -> None:
    assert rule_reads("no.such_rule") == ()
    assert rule_reads(None) == ()
