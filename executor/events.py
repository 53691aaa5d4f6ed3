"""Frozen event records the executor reports, and the recorder protocol that receives them.

The executor writes nothing itself: every attempt, decision, backoff wait, LLM call and state
change is handed, in order, to an injected `Recorder`. The store implements one that writes
DuckDB; tests use `ListRecorder`. Times are UTC epoch seconds (float) from the injected clock
for wall time, durations in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from executor.policy import Decision


@dataclass(frozen=True, slots=True)
class ExecutionStarted:
    """A plan run began. `plan` is the plan as loaded (JSON-able), `config` the resolved config.

    `rerun_of` names the execution this run re-runs (`truva-console rerun`), else None.
    """

    execution_id: str
    started_at: float
    query: str
    plan_path: str | None
    plan: dict[str, Any]
    config: dict[str, Any]
    config_sources: dict[str, str]
    llm: dict[str, Any] | None
    tool_version: str
    rerun_of: str | None = None
    kind: str = "execution_started"


@dataclass(frozen=True, slots=True)
class ExecutionFinished:
    """A plan run ended; `status` is succeeded|partial|failed|cancelled."""

    execution_id: str
    finished_at: float
    status: str
    stop_reason: str | None
    incomplete_steps: tuple[str, ...]
    llm_calls: int
    llm_total_tokens: int
    kind: str = "execution_finished"


@dataclass(frozen=True, slots=True)
class StepStarted:
    """A step became ready and began; `parameters` are after binding resolution, before coercion."""

    execution_id: str
    step_id: str
    started_at: float
    tool: str
    capability: str
    url: str
    depends_on: tuple[str, ...]
    parameters: dict[str, Any]
    protected_keys: dict[str, str]
    orchestrator: bool
    side_effects: str
    kind: str = "step_started"


@dataclass(frozen=True, slots=True)
class StepFinished:
    """A step ended: `status` is succeeded|failed|rejected|skipped; `skip_reason` says why."""

    execution_id: str
    step_id: str
    finished_at: float
    status: str
    dispatch_count: int
    attempts: int
    validation_retries: int
    semantic_retries: int
    final_action: str | None
    final_rule_id: str | None
    error: str | None
    result: Any
    skip_reason: str | None = None
    kind: str = "step_finished"


@dataclass(frozen=True, slots=True)
class ParametersCoerced:
    """Layer 2 changed parameter types before a dispatch; one entry per coerced key."""

    execution_id: str
    step_id: str
    n: int
    at: float
    coercions: tuple[dict[str, Any], ...]
    kind: str = "parameters_coerced"


@dataclass(frozen=True, slots=True)
class AttemptDispatched:
    """An HTTP request is about to be sent. `n` numbers every attempt of the step from 1.

    `attempt_number` is the policy's attempt counter (not advanced by accepted corrections).
    `request_body` is the exact bytes sent; `request_headers` as sent (the store redacts secrets).
    """

    execution_id: str
    step_id: str
    n: int
    attempt_number: int
    at: float
    method: str
    url: str
    request_headers: dict[str, str]
    request_body: bytes
    parameters: dict[str, Any]
    correction_layer: str | None
    kind: str = "attempt_dispatched"


@dataclass(frozen=True, slots=True)
class AttemptResponded:
    """What came back for attempt `n`: a response (status, headers, exact body), or a failure.

    `status` is 0 for a transport failure, and `transport_error` then names it
    (`connect`, `timeout`, `read_timeout`, `reset`, `protocol`, `cancelled`).
    """

    execution_id: str
    step_id: str
    n: int
    at: float
    elapsed_ms: float
    status: int
    response_headers: dict[str, str]
    response_body: bytes
    transport_error: str | None
    transport_error_message: str | None
    retry_policy: str
    kind: str = "attempt_responded"


@dataclass(frozen=True, slots=True)
class AttemptDecided:
    """The routing decision for attempt `n` (final, after any LLM layers were consulted).

    `decision` is the frozen `policy.Decision`; it becomes a dict only in the event codec
    (`executor.eventlog`), the form the store and event logs keep.
    `dispatched` is False for an attempt rejected before any HTTP call.
    """

    execution_id: str
    step_id: str
    n: int
    at: float
    dispatched: bool
    parameters: dict[str, Any]
    decision: Decision
    kind: str = "attempt_decided"


@dataclass(frozen=True, slots=True)
class BackoffEvent:
    """A backoff wait after attempt `n`: phase is planned|started|finished|cancelled.

    `source` says what set the delay: backoff|retry_after_header|retry_after_details.
    `actual_ms` is filled for finished and cancelled.
    """

    execution_id: str
    step_id: str
    n: int
    at: float
    phase: str
    planned_ms: float
    source: str
    actual_ms: float | None = None
    kind: str = "backoff"


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One LLM request and its raw answer, complete and untruncated.

    `site` is error_analysis|semantic_retry|correction. `request_body`/`response_body` are the
    exact HTTP bytes; `messages` what we sent; `raw_text` the assistant content; `parsed` the
    decoded answer or None; `parse_error` why decoding failed; `error` a transport/HTTP failure.
    `text_recorded` False (llm_debug_enabled off) means messages, bodies and raw text are left
    empty on purpose: only the metadata and the parsed answer are kept.
    """

    execution_id: str
    step_id: str
    n: int
    call_id: str
    site: str
    at: float
    latency_ms: float
    base_url: str
    model: str
    temperature: float
    max_tokens: int
    messages: tuple[dict[str, Any], ...]
    request_body: bytes
    response_status: int | None
    response_body: bytes
    raw_text: str | None
    parsed: dict[str, Any] | None
    parse_error: str | None
    error: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    text_recorded: bool = True
    kind: str = "llm_call"


@dataclass(frozen=True, slots=True)
class Notice:
    """Anything else worth seeing: tool-contract warnings, guard rejections, budget notes.

    `name` is a stable dotted id such as `tool_contract.success_false_on_2xx`; `attrs` its data.
    """

    execution_id: str
    step_id: str | None
    n: int | None
    at: float
    name: str
    message: str
    attrs: dict[str, Any] = field(default_factory=dict)
    kind: str = "notice"


@dataclass(frozen=True, slots=True)
class CircuitStateChanged:
    """A circuit breaker moved between closed, open and half-open."""

    breaker: str
    at: float
    from_state: str
    to_state: str
    reason: str
    execution_id: str | None = None
    kind: str = "circuit_state_changed"


Event = (
    ExecutionStarted
    | ExecutionFinished
    | StepStarted
    | StepFinished
    | ParametersCoerced
    | AttemptDispatched
    | AttemptResponded
    | AttemptDecided
    | BackoffEvent
    | LLMCall
    | Notice
    | CircuitStateChanged
)


@runtime_checkable
class Recorder(Protocol):
    """Receives every event in order; `record` must be cheap and must not raise."""

    def record(self, event: Event) -> None: ...


class NullRecorder:
    """Discards events."""

    def record(self, event: Event) -> None:
        return None


class ListRecorder:
    """Keeps events in memory, in order; for tests and for building summaries."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def record(self, event: Event) -> None:
        self.events.append(event)

    def of_kind(self, kind: str) -> list[Event]:
        """Events whose `kind` equals `kind`, in order."""
        return [e for e in self.events if e.kind == kind]


class FanoutRecorder:
    """Passes each event to several recorders in turn."""

    def __init__(self, *recorders: Recorder) -> None:
        self.recorders = recorders

    def record(self, event: Event) -> None:
        for recorder in self.recorders:
            recorder.record(event)
