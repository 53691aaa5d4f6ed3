"""What the store's queries return: frozen records of executions, steps, attempts and LLM calls.

The value lists (`ACTIONS` and the like) are derived from the executor's enums where it has
one; the statuses are the store's own (`interrupted` exists only here).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from executor.policy import INTERMEDIATE_ACTIONS, Action
from store.errors import StepNotFoundError

EXECUTION_STATUSES = ("running", "succeeded", "partial", "failed", "cancelled", "interrupted")
FINISHED_EXECUTION_STATUSES = frozenset(EXECUTION_STATUSES) - {"running"}
STEP_STATUSES = ("running", "succeeded", "failed", "rejected", "skipped", "interrupted")
# The final actions a recorded decision can have (SPEC §2.2), in the policy's order.
ACTIONS = tuple(str(action) for action in Action if action not in INTERMEDIATE_ACTIONS)


@dataclass(frozen=True, slots=True)
class ExecutionRow:
    """One execution with its counts, as listed."""

    execution_id: str
    status: str
    started_at: float | None
    finished_at: float | None
    duration_ms: float | None
    query: str | None
    plan_path: str | None
    tool_version: str | None
    stop_reason: str | None
    incomplete_steps: tuple[str, ...]
    steps_planned: int
    steps_total: int
    steps_succeeded: int
    steps_failed: int
    steps_rejected: int
    steps_skipped: int
    steps_unfinished: int
    attempts: int
    dispatches: int
    llm_calls: int
    llm_total_tokens: int
    last_failing_rule: str | None
    writer_pid: int | None
    writer_host: str | None
    rerun_of: str | None = None
    labels: dict[str, str] | None = None
    contract_warnings: int = 0


@dataclass(frozen=True, slots=True)
class Page:
    """One page of executions, newest first, and how many match in total."""

    executions: tuple[ExecutionRow, ...]
    total: int
    limit: int
    offset: int


@dataclass(frozen=True, slots=True)
class LLMCallRecord:
    """One LLM request and its raw answer, complete."""

    call_id: str
    step_id: str | None
    n: int | None
    site: str | None
    model: str | None
    base_url: str | None
    temperature: float | None
    max_tokens: int | None
    messages: Any
    request_body: bytes | None
    request_size: int | None
    response_status: int | None
    response_body: bytes | None
    response_size: int | None
    raw_text: str | None
    parsed: Any
    parse_error: str | None
    error: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    latency_ms: float | None
    called_at: float | None
    response_headers: Any = None
    text_note: str | None = None
    # False when the record was read without its texts (`messages`, `request_body`,
    # `response_body`, `raw_text` are None until `Store.llm_call_texts` fills them in).
    texts_loaded: bool = True

    @property
    def text_recorded(self) -> bool:
        """False when the prompt and response text were not recorded (`text_note` says why)."""
        return self.text_note is None

    @property
    def status_text(self) -> str:
        """`HTTP 200`, or `no HTTP response` when the endpoint never answered."""
        if self.response_status is None:
            return "no HTTP response"
        return f"HTTP {self.response_status}"

    @property
    def tokens_text(self) -> str:
        """`P prompt + C completion = T tokens`, or `tokens unknown`."""
        if self.total_tokens is None:
            return "tokens unknown"
        return (
            f"{self.prompt_tokens} prompt + {self.completion_tokens} completion = "
            f"{self.total_tokens} tokens"
        )


@dataclass(frozen=True, slots=True)
class EventRecord:
    """A coercion, backoff phase, notice or circuit change."""

    step_id: str | None
    n: int | None
    seq: int
    occurred_at: float | None
    kind: str
    name: str | None
    message: str | None
    attrs: Any


@dataclass(frozen=True, slots=True)
class BackoffRecord:
    """The wait after an attempt: planned vs actual, and what set the delay."""

    planned_at: float | None
    planned_ms: float | None
    delay_source: str | None
    actual_ms: float | None
    outcome: str | None


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt: what was sent, what came back, and the decision with its inputs.

    `status` is the HTTP status (the `attempts.http_status` column); `attempt_number` the
    policy's attempt counter, derived from the step's earlier `retry_same` decisions.
    """

    step_id: str
    n: int
    attempt_number: int | None
    dispatched: bool | None
    parameters: Any
    correction_layer: str | None
    method: str | None
    url: str | None
    request_headers: Any
    request_body: bytes | None
    request_size: int | None
    status: int | None
    response_headers: Any
    response_body: bytes | None
    response_size: int | None
    transport_error: str | None
    transport_error_message: str | None
    elapsed_ms: float | None
    retry_policy: str | None
    action: str | None
    rule_id: str | None
    reason: str | None
    decision: Any
    decision_layer: str | None
    corrected_parameters: Any
    delay_ms: float | None
    delay_source: str | None
    started_at: float | None
    responded_at: float | None
    decided_at: float | None
    recovery: str | None = None
    impact: str | None = None
    llm_calls: tuple[LLMCallRecord, ...] = ()
    events: tuple[EventRecord, ...] = ()
    backoff: BackoffRecord | None = None


class UndecodedJSON:
    """A JSON column's text read from the store, decoded the first time its field is read."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _LazyJSONField:
    """A record field that may hold `UndecodedJSON`: reading it decodes once and keeps the value.

    Wraps the dataclass's slot, so the field stays a field (`fields()`, `replace()`, `==`,
    `to_jsonable` all see the decoded value); only the store builds records with undecoded text.
    """

    def __init__(self, slot: Any) -> None:
        self.slot = slot

    def __get__(self, record: Any, owner: type | None = None) -> Any:
        if record is None:
            return self
        value = self.slot.__get__(record, owner)
        if type(value) is UndecodedJSON:
            value = json.loads(value.text)
            self.slot.__set__(record, value)
        return value

    def __set__(self, record: Any, value: Any) -> None:
        self.slot.__set__(record, value)


def is_decoded(record: Any, name: str) -> bool:
    """False while the record's field `name` still holds its JSON text undecoded."""
    descriptor = type(record).__dict__.get(name)
    if not isinstance(descriptor, _LazyJSONField):
        return True
    return type(descriptor.slot.__get__(record, type(record))) is not UndecodedJSON


# An execution's attempts are read with these undecoded (1,000 attempts: ~5,000 JSON texts, a
# decision ~0.6 KB each); a screen reads them for the attempts it shows.
ATTEMPT_LAZY_JSON = ("parameters", "request_headers", "response_headers", "decision",
                     "corrected_parameters")  # fmt: skip
for _name in ATTEMPT_LAZY_JSON:
    setattr(AttemptRecord, _name, _LazyJSONField(AttemptRecord.__dict__[_name]))


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step with its attempts in order."""

    step_id: str
    tool: str | None
    capability: str | None
    url: str | None
    depends_on: tuple[str, ...]
    parameters: Any
    protected_keys: Any
    orchestrator: bool | None
    side_effects: str | None
    status: str | None
    dispatch_count: int | None
    attempts_count: int | None
    validation_retries: int | None
    semantic_retries: int | None
    final_action: str | None
    final_rule_id: str | None
    error: str | None
    result: Any
    skip_reason: str | None
    started_at: float | None
    finished_at: float | None
    attempts: tuple[AttemptRecord, ...] = ()
    events: tuple[EventRecord, ...] = ()
    llm_calls: tuple[LLMCallRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class ExecutionDetail:
    """Everything recorded about one execution.

    `events` and `llm_calls` hold what was recorded outside any step (circuit changes, say).
    """

    execution: ExecutionRow
    plan: Any
    config: Any
    config_sources: Any
    llm: Any
    steps: tuple[StepRecord, ...]
    events: tuple[EventRecord, ...]
    llm_calls: tuple[LLMCallRecord, ...] = ()

    def step(self, step_id: str) -> StepRecord:
        """The step named `step_id`; StepNotFoundError names the steps there are."""
        for step in self.steps:
            if step.step_id == step_id:
                return step
        known = ", ".join(step.step_id for step in self.steps) or "none recorded"
        raise StepNotFoundError(
            f"execution {self.execution.execution_id} has no step {step_id!r} (steps: {known})"
        )


def detail_with_step(detail: ExecutionDetail, step: StepRecord) -> ExecutionDetail:
    """`detail` with `step` in place of its recorded step of the same id (StepNotFoundError
    when `detail` has no such step)."""
    detail.step(step.step_id)
    steps = tuple(step if recorded.step_id == step.step_id else recorded
                  for recorded in detail.steps)  # fmt: skip
    return replace(detail, steps=steps)


def step_calls_without_texts(step: StepRecord) -> list[str]:
    """The ids of the step's LLM calls (at its attempts or the step) read without their texts."""
    calls = [*step.llm_calls, *(call for attempt in step.attempts for call in attempt.llm_calls)]
    return [call.call_id for call in calls if not call.texts_loaded]


def step_with_texts(step: StepRecord, texts: dict[str, dict[str, Any]]) -> StepRecord:
    """`step` with the LLM call texts in `texts` (`Store.llm_call_texts`) filled in."""

    def filled(calls: tuple[LLMCallRecord, ...]) -> tuple[LLMCallRecord, ...]:
        return tuple(
            replace(call, **texts[call.call_id], texts_loaded=True)
            if not call.texts_loaded and call.call_id in texts else call
            for call in calls
        )  # fmt: skip

    if not any(call_id in texts for call_id in step_calls_without_texts(step)):
        return step
    attempts = tuple(replace(attempt, llm_calls=filled(attempt.llm_calls))
                     for attempt in step.attempts)  # fmt: skip
    return replace(step, attempts=attempts, llm_calls=filled(step.llm_calls))


def body_view(body: bytes | None) -> dict[str, Any] | None:
    """A JSON-able view of exact bytes: UTF-8 text when valid, else base64."""
    if body is None:
        return None
    try:
        return {"size": len(body), "encoding": "utf-8", "text": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "size": len(body),
            "encoding": "base64",
            "text": base64.b64encode(body).decode("ascii"),
        }


def to_jsonable(value: Any) -> Any:
    """Records as plain JSON-able data; bytes become `body_view` dicts."""
    if is_dataclass(value) and not isinstance(value, type):
        return {item.name: to_jsonable(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, bytes):
        return body_view(value)
    if isinstance(value, dict):
        return {key: to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(item) for item in value]
    return value
