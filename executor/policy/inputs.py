"""What a routing decision reads: the frozen `DecisionInputs` and the layers' verdicts.

Both are recorded with every decision and read back (`to_dict` / `from_dict`, generated from
the dataclass fields), so a recorded decision can be decided again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from executor.backoff import BackoffConfig
from executor.jsonform import JsonRecord
from executor.wire import RetryPolicy


class Layer(StrEnum):
    """Correction layers, as recorded in decisions and attempts."""

    ANALYZER = "analyzer"
    RE_RESOLUTION = "re_resolution"
    LEGACY = "legacy"


@dataclass(frozen=True, slots=True)
class LayerVerdict(JsonRecord):
    """What one correction layer answered, assessed against the step's parameters.

    `answered` is False when the LLM failed or its answer was malformed (`failure` says how).
    `unavailable` counts the endpoint failures (`HTTP 503 ×3`) when the LLM endpoint gave no
    answer after its retries. `proposed_parameters` is the full parameter map the correction
    would send. `llm_calls_used_before`, `llm_tokens_used_before` and `elapsed_s_before` are
    the task's counters when the layer was asked (None: recorded by a version that did not
    keep them), so a re-decision can stop where a budget would have stopped before the call.
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
    llm_calls_used_before: int | None = None
    llm_tokens_used_before: int | None = None
    elapsed_s_before: float | None = None

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


@dataclass(frozen=True, slots=True)
class DecisionInputs(JsonRecord):
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




class InputsDict(Mapping[str, Any]):
    """`DecisionInputs.to_dict()` read on first use: a decision's `inputs`, built for every
    decision but read only for the ones recorded or explained."""

    __slots__ = ("_data", "_inputs")

    def __init__(self, inputs: DecisionInputs) -> None:
        self._inputs = inputs
        self._data: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The dict itself (not a copy): read it, do not change it."""
        data = self._data
        if data is None:
            data = self._data = self._inputs.to_dict()
        return data

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, InputsDict):
            other = other.as_dict()
        return self.as_dict() == other

    __hash__ = None  # type: ignore[assignment]  # like the dict it stands for

    def __repr__(self) -> str:
        return repr(self.as_dict())
