"""The TruvaG3-named counters and histograms the recorder records, with their descriptions."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor.llm import SITE_ERROR_ANALYSIS, SITE_SEMANTIC_RETRY
from executor.telemetry.attributes import otel_attributes

if TYPE_CHECKING:
    pass

_logger = logging.getLogger(__name__)

LLM_HISTOGRAMS = {
    SITE_ERROR_ANALYSIS: "orchestration.error_analyzer.llm_latency_ms",
    SITE_SEMANTIC_RETRY: "orchestration.semantic_retry.llm_latency_ms",
}
LLM_ERROR_COUNTERS = {
    SITE_ERROR_ANALYSIS: "orchestration.error_analyzer.llm_errors",
    SITE_SEMANTIC_RETRY: "orchestration.semantic_retry.llm_errors",
}

COUNTERS: dict[str, str] = {
    "orchestration.error_analysis.retry": "Analyzer corrections applied",
    "orchestration.error_analysis.no_retry": "Analyzer answers that led to no correction",
    "orchestration.semantic_retry.applied": "Layer 4 re-resolutions applied",
    "orchestration.semantic_retry.independent_step": "Layer 4 re-resolutions of independent steps",
    "orchestration.semantic_retry.attempts": "Layer 4 consultations of the re-resolver",
    "orchestration.semantic_retry.success": "Layer 4 re-resolutions whose attempt succeeded",
    "orchestration.non_retryable_errors": "Stops on an explicit retryable:false",
    "orchestration.type_coercion.applied": "Dispatches whose parameters layer 2 coerced",
    "orchestration.validation_feedback.attempts": "Legacy correction callback consultations",
    "orchestration.validation_feedback.success": "Legacy corrections applied",
    "orchestration.validation_feedback.failed": "Legacy consultations that gave no correction",
    "orchestration.step.skipped": "Steps skipped before they started",
    "orchestration.error_analyzer.llm_errors": "Analyzer LLM calls that failed",
    "orchestration.semantic_retry.llm_errors": "Re-resolver LLM calls that failed",
    "truva.decisions": "Final routing decisions, by action and rule id",
    "truva.dispatches": "HTTP requests sent to tools",
}
HISTOGRAMS: dict[str, tuple[str, str]] = {
    "orchestration.error_analyzer.llm_latency_ms": ("ms", "Analyzer LLM call latency"),
    "orchestration.semantic_retry.llm_latency_ms": ("ms", "Re-resolver LLM call latency"),
    "truva.backoff.wait": ("s", "Backoff waits as actually waited"),
    "gen_ai.client.operation.duration": ("s", "GenAI operation duration"),
    "gen_ai.client.token.usage": ("{token}", "Tokens used per LLM call"),
}


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One increment of a counter (`value` the amount) or one histogram observation."""

    instrument: str
    value: float
    labels: Mapping[str, Any]


class Meters:
    """The counters and histograms above, created on one meter; labels become OTel attributes."""

    def __init__(self, meter: Any) -> None:
        from opentelemetry.metrics import NoOpMeter

        # A no-op meter records nothing, so its points and labels need not be made.
        self.enabled = not isinstance(meter, NoOpMeter)
        self._counters = {
            name: meter.create_counter(name, unit="1", description=text)
            for name, text in COUNTERS.items()
        }
        self._histograms = {
            name: meter.create_histogram(name, unit=unit, description=text)
            for name, (unit, text) in HISTOGRAMS.items()
        }

    def count(self, name: str, labels: Mapping[str, Any], amount: int = 1) -> None:
        """Add `amount` to the counter `name`."""
        self._counters[name].add(amount, otel_attributes(labels))

    def observe(self, name: str, value: float, labels: Mapping[str, Any]) -> None:
        """Record `value` in the histogram `name`."""
        self._histograms[name].record(value, otel_attributes(labels))

    def record(self, points: Iterable[MetricPoint]) -> None:
        """Each point into its counter or histogram."""
        for point in points:
            if point.instrument in self._counters:
                self.count(point.instrument, point.labels, int(point.value))
            else:
                self.observe(point.instrument, point.value, point.labels)
