"""The executor runtime: runs a plan's steps over real HTTP and acts on `policy.decide()`.

Ready steps run concurrently (bounded); each step's loop dispatches, records what came back,
asks the policy, consults LLM layers when the policy says so, waits out backoffs (cancellable
at once), and reports every event to the injected recorder. It writes nothing to disk itself.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import heapq
import json
import os
import ssl
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import httpx

from executor import __version__
from executor.config import ExecutorConfig, resolve_config
from executor.events import (
    AttemptDecided,
    AttemptDispatched,
    AttemptResponded,
    BackoffEvent,
    CircuitStateChanged,
    ExecutionFinished,
    ExecutionStarted,
    LLMCall,
    Notice,
    NullRecorder,
    ParametersCoerced,
    Recorder,
    StepFinished,
    StepStarted,
)
from executor.llm import (
    LLM_MAX_TRIES,
    PLACEHOLDER_API_KEY,
    ContextualReResolver,
    ErrorAnalyzer,
    LayerResult,
    LegacyCorrectionCallback,
    LegacyCorrectionRequest,
    LegacyCorrector,
    LLMClient,
    LLMExchange,
    LLMSettings,
    failure_summary,
    resolve_llm_settings,
)
from executor.params import (
    binding_references,
    coerce_parameters,
    exact_bound_paths,
    guard_parameters,
    match_type_related_error,
    resolve_bindings,
)
from executor.plan import CapabilitySpec, Plan, StepSpec, basic_authorization
from executor.policy import (
    TASK_STOP_RULE_IDS,
    Action,
    Decision,
    DecisionInputs,
    Layer,
    LayerVerdict,
    assess_correction,
    decide,
    with_verdict,
)
from executor.redact import redact_sensitive_text
from executor.resilience import CircuitBreaker, StateChange
from executor.tracecontext import attempt_headers, llm_trace_context
from executor.wire import (
    WireEnvelope,
    is_transient_status,
    parse_envelope,
    parse_retry_after_header,
)

Sleep = Callable[[float], Awaitable[None]]

STEP_SUCCEEDED = "succeeded"
STEP_FAILED = "failed"
STEP_REJECTED = "rejected"
STEP_SKIPPED = "skipped"



@dataclass(frozen=True, slots=True)
class AttemptSummary:
    """One attempt of a step as `run --json` prints it (SPEC §3.2)."""

    n: int
    attempt_number: int
    dispatched: bool
    status: int | None
    parameters: dict[str, Any]
    action: str
    rule: str
    reason: str
    delay_ms: float | None
    delay_source: str | None
    layer: str | None
    transport_error: str | None
    sent: bool = False
    recovery: str | None = None
    impact: str | None = None
    budgets: dict[str, int | None] = field(default_factory=dict)
    decision: Decision | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """SPEC §3.2 attempt shape plus a few explanatory fields."""
        return {
            "n": self.n,
            "attempt_number": self.attempt_number,
            "dispatched": self.dispatched,
            "sent": self.sent,
            "status": self.status,
            "parameters": self.parameters,
            "action": self.action,
            "rule": self.rule,
            "reason": self.reason,
            "delay_ms": self.delay_ms,
            "delay_source": self.delay_source,
            "layer": self.layer,
            "transport_error": self.transport_error,
            "recovery": self.recovery,
            "impact": self.impact,
            "budgets": dict(self.budgets),
        }


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """How a step ended."""

    id: str
    status: str
    dispatch_count: int
    validation_retries: int
    semantic_retries: int
    attempts: tuple[AttemptSummary, ...]
    tool: str = ""
    capability: str = ""
    parameters: dict[str, Any] | None = None
    result: Any = None
    error: str | None = None
    skip_reason: str | None = None
    final_action: str | None = None
    final_rule: str | None = None
    recovery: str | None = None
    impact: str | None = None
    attempt_counter: int = 0
    max_attempts: int = 0
    start_time: float | None = None
    end_time: float | None = None
    reused_from: str | None = None

    @property
    def retry_exhausted(self) -> bool:
        """TruvaG3's flag: failed with every attempt used."""
        return self.status == STEP_FAILED and self.attempt_counter >= self.max_attempts

    def to_dict(self) -> dict[str, Any]:
        """SPEC §3.2 step shape, plus TruvaG3's StepResult fields (reference §3.1)."""
        duration_ms = (
            (self.end_time - self.start_time) * 1000.0
            if self.start_time is not None and self.end_time is not None else None
        )
        return {
            "id": self.id,
            "status": self.status,
            "dispatch_count": self.dispatch_count,
            "validation_retries": self.validation_retries,
            "semantic_retries": self.semantic_retries,
            "attempts": [a.to_dict() for a in self.attempts],
            "tool": self.tool,
            "capability": self.capability,
            "parameters": self.parameters,
            "response": self.result,
            "success": self.status == STEP_SUCCEEDED,
            "error": self.error,
            "final_action": self.final_action,
            "final_rule": self.final_rule,
            "recovery": self.recovery,
            "impact": self.impact,
            "retry_exhausted": self.retry_exhausted,
            "skipped": self.status == STEP_SKIPPED,
            "skip_reason": self.skip_reason,
            "reused_from": self.reused_from,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "duration_ms": round(duration_ms, 3) if duration_ms is not None else None,
        }


@dataclass(frozen=True, slots=True)
class ExecutionOutcome:
    """How a run ended; `steps` are in plan order."""

    execution_id: str
    status: str
    steps: tuple[StepOutcome, ...]
    stop_reason: str | None
    incomplete_steps: tuple[str, ...]
    llm_calls: int
    llm_total_tokens: int
    duration_ms: float
    rerun_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The `truva-console run --json` document (SPEC §3.2)."""
        return {
            "execution_id": self.execution_id,
            "rerun_of": self.rerun_of,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "incomplete_steps": list(self.incomplete_steps),
            "llm_calls": self.llm_calls,
            "llm_total_tokens": self.llm_total_tokens,
            "duration_ms": round(self.duration_ms, 3),
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass(frozen=True, slots=True)
class HttpOutcome:
    """What one dispatch produced."""

    status: int
    headers: dict[str, str]
    body: bytes
    elapsed_ms: float
    transport_error: str | None = None
    transport_error_message: str | None = None
    ended_by_deadline: bool = False

    envelope: WireEnvelope = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The body read as a TruvaG3 envelope, parsed once per attempt.
        object.__setattr__(self, "envelope", parse_envelope(self.body))


@dataclass(frozen=True, slots=True)
class _StepContext:
    """What a step's loop reads but never changes."""

    step: StepSpec
    capability: CapabilitySpec
    url: str
    protected: dict[str, str]
    dependency_results: dict[str, Any]
    protected_paths: dict[str, tuple[str | int, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class _StepState:
    """Mutable per-step loop state (private to the loop)."""

    parameters: dict[str, Any]
    started_at: float = 0.0
    attempt_number: int = 1
    validation_retries: int = 0
    semantic_retries: int = 0
    dispatch_count: int = 0
    n: int = 0
    correction_layer: str | None = None
    previous_errors: list[str] = field(default_factory=list)
    attempts: list[AttemptSummary] = field(default_factory=list)


@functools.cache
def default_tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once: loading the CA bundle took ~100 ms per run."""
    return httpx.create_ssl_context()


def new_execution_id(now: float | None = None) -> str:
    """A sortable, readable id: UTC timestamp plus 10 random hex digits (40 bits per second)."""
    moment = datetime.fromtimestamp(now if now is not None else time.time(), tz=UTC)
    return f"{moment:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:10]}"


def encode_json_body(value: Any) -> bytes:
    """JSON bytes as Go's encoding/json writes them: sorted keys, compact, HTML-safe escapes."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text.encode("utf-8")


def classify_transport_error(exc: httpx.TransportError) -> str:
    """Name a transport failure: connect (never sent), timeout, reset, or protocol."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return "connect"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return "reset"
    return "protocol"


@dataclass(frozen=True, slots=True)
class _ScheduleGraph:
    """What the scheduler reads of a plan, computed once per run.

    `position`: step id → index in plan order; `unmet`: step id → number of distinct
    dependencies (`Plan.dependencies_of`); `blocked_by`: step id → the steps whose skip reason
    names it (its `depends_on`, or a binding with exactly its id), in plan order.
    """

    position: dict[str, int]
    unmet: dict[str, int]
    blocked_by: dict[str, tuple[str, ...]]

    @classmethod
    def of(cls, plan: Plan) -> _ScheduleGraph:
        position = {step.id: index for index, step in enumerate(plan.steps)}
        blocked_by: dict[str, list[str]] = {}
        for step in plan.steps:
            named = dict.fromkeys((*step.depends_on, *binding_references(step.parameters)))
            for name in named:
                if name in position:
                    blocked_by.setdefault(name, []).append(step.id)
        return cls(
            position=position,
            unmet={step.id: len(plan.dependencies_of(step.id)) for step in plan.steps},
            blocked_by={name: tuple(ids) for name, ids in blocked_by.items()},
        )


class PlanExecutor:
    """Runs one plan. Construct, then `await run()`; `cancel()` stops it at once.

    A re-run seeds it: `reuse_results` maps step ids to results recorded in an earlier run;
    those steps are not dispatched but reported as succeeded with zero dispatches (and a
    `rerun.result_reused` notice), and their dependents bind to that data. `skip_steps` maps
    step ids to the reason each is not run; they are reported skipped, and so are their
    dependents. `rerun_of` names the earlier execution in `ExecutionStarted` and the reasons
    (`reuse_results` requires it). `labels` tag the execution (`ExecutionStarted.labels`).
    """

    def __init__(
        self,
        plan: Plan,
        *,
        recorder: Recorder | None = None,
        env: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        llm_client: LLMClient | None = None,
        legacy_callback: LegacyCorrectionCallback | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        execution_id: str | None = None,
        config: ExecutorConfig | None = None,
        reuse_results: Mapping[str, Any] | None = None,
        skip_steps: Mapping[str, str] | None = None,
        rerun_of: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.plan = plan
        self.labels = dict(labels or {})
        self.reuse_results = dict(reuse_results or {})
        self.skip_steps = dict(skip_steps or {})
        self.rerun_of = rerun_of
        unknown = sorted((set(self.reuse_results) | set(self.skip_steps)) - set(plan.step_ids))
        if unknown:
            raise ValueError(f"reuse_results/skip_steps name steps not in the plan: {unknown}")
        if self.reuse_results and not rerun_of:
            raise ValueError("reuse_results needs rerun_of, the execution they were recorded in")
        self.env = dict(os.environ if env is None else env)
        if config is None:
            config, sources = resolve_config(plan.config, self.env)
        else:
            sources = {name: "explicit" for name in config.to_dict()}
        self.config = config
        self.config_sources = sources
        self.recorder: Recorder = recorder or NullRecorder()
        self.sleep = sleep
        self.clock = clock
        self.monotonic = monotonic
        self.execution_id = execution_id or new_execution_id(clock())
        self._http = http_client
        self._owns_http = http_client is None
        self.llm_settings: LLMSettings | None = (
            llm_client.settings if llm_client is not None
            else resolve_llm_settings(plan.llm, self.env)
        )
        self._llm = llm_client
        self._owns_llm = llm_client is None
        self._legacy_callback = legacy_callback
        self._cancel = asyncio.Event()
        self._started = 0.0
        self._llm_calls = 0
        self._llm_tokens = 0
        self._error_counts: Counter[tuple[str, int, str]] = Counter()
        self._tool_retries: Counter[str] = Counter()
        self._task_stop: str | None = None
        self._results: dict[str, StepOutcome] = {}
        self._parsed_results: dict[str, Any] = {}
        self._breakers: dict[str, CircuitBreaker] = {}
        self.recorder_error: Exception | None = None  # the last exception a recorder raised

    # ------------------------------------------------------------------ public

    def cancel(self) -> None:
        """Request cancellation: waits end now, in-flight requests are abandoned."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        """True once `cancel()` was called."""
        return self._cancel.is_set()

    async def run(self) -> ExecutionOutcome:
        """Run every step of the plan and return how it ended."""
        self._started = self.monotonic()
        if self._http is None:
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(self.config.timeout_s), follow_redirects=False,
                verify=default_tls_context(),
            )
        if self._llm is None and self.llm_settings is not None:
            self._llm = LLMClient(self.llm_settings, clock=self.clock)
        self._emit(ExecutionStarted(
            execution_id=self.execution_id,
            started_at=self.clock(),
            query=self.plan.query,
            plan_path=self.plan.source_path,
            plan=self.plan.to_dict(),
            config=self.config.to_dict(),
            config_sources=dict(self.config_sources),
            llm=self._llm_description(),
            tool_version=__version__,
            rerun_of=self.rerun_of,
            labels=dict(self.labels),
        ))
        self._note_missing_llm_key()
        self._seed_results()
        try:
            await self._schedule()
        finally:
            await self._close_clients()
        return self._finish()

    # --------------------------------------------------------------- scheduling

    def _seed_results(self) -> None:
        """Record the reused and the held steps before any step is scheduled."""
        for step in self.plan.steps:
            if step.id in self.reuse_results:
                self._reuse(step, self.reuse_results[step.id])
            elif step.id in self.skip_steps:
                self._store_skip(step, self.skip_steps[step.id])

    def _reuse(self, step: StepSpec, result: Any) -> None:
        now = self.clock()
        reason = f"result reused from execution {self.rerun_of}; not resent"
        self._emit(StepStarted(
            execution_id=self.execution_id, step_id=step.id, started_at=now, tool=step.tool,
            capability=step.capability, url=self.plan.url_for(step),
            depends_on=tuple(self.plan.dependencies_of(step.id)),
            parameters=dict(resolve_bindings(step.parameters, self.reuse_results) or {}),
            protected_keys={},
            orchestrator=self.plan.capability_for(step).orchestrator,
            side_effects=self.plan.capability_for(step).side_effects,
        ))
        self._emit(Notice(execution_id=self.execution_id, step_id=step.id, n=None, at=now,
                          name="rerun.result_reused", message=reason,
                          attrs={"reused_from": self.rerun_of}))
        self._emit(StepFinished(
            execution_id=self.execution_id, step_id=step.id, finished_at=now,
            status=STEP_SUCCEEDED, dispatch_count=0, attempts=0, validation_retries=0,
            semantic_retries=0, final_action=None, final_rule_id=None, error=None,
            result=result,
        ))
        self._parsed_results[step.id] = result
        self._results[step.id] = StepOutcome(
            id=step.id, status=STEP_SUCCEEDED, dispatch_count=0, validation_retries=0,
            semantic_retries=0, attempts=(), tool=step.tool, capability=step.capability,
            parameters=None, result=result, skip_reason=None,
            max_attempts=self.config.max_attempts, start_time=now, end_time=now,
            reused_from=self.rerun_of,
        )

    async def _schedule(self) -> None:
        """Start each step once its dependencies succeeded; skip the ones they block.

        Linear in the plan: a count of unmet dependencies per step makes the ready steps, and
        only the steps naming one that just ended unsucceeded are checked for a skip reason.
        Steps with a result already (a rerun's reused and held steps) count as ended.
        """
        plan = self.plan
        pending: dict[str, StepSpec] = {
            step.id: step for step in plan.steps if step.id not in self._results
        }
        graph = _ScheduleGraph.of(plan)
        unmet = dict(graph.unmet)
        ended_unsucceeded: list[str] = []
        for step in plan.steps:
            seeded = self._results.get(step.id)
            if seeded is not None and seeded.status == STEP_SUCCEEDED:
                self._ready(step.id, unmet)
            elif seeded is not None:
                ended_unsucceeded.append(step.id)
        ready = [step_id for step_id in pending if unmet[step_id] == 0]
        running: dict[asyncio.Task[StepOutcome], str] = {}
        # Tasks put themselves here when done: waiting on all running tasks at each completion
        # (asyncio.wait) costs O(running), which made 10,000 ready steps quadratic.
        finished: asyncio.Queue[asyncio.Task[StepOutcome]] = asyncio.Queue()
        limiter = asyncio.Semaphore(self.config.max_concurrency)
        while pending or running:
            self._skip_blocked(pending, graph, ended_unsucceeded)
            ended_unsucceeded = []
            for step_id in sorted(ready, key=graph.position.__getitem__):
                step = pending.pop(step_id, None)
                if step is not None:
                    task = asyncio.create_task(self._run_limited(step, limiter))
                    task.add_done_callback(finished.put_nowait)
                    running[task] = step_id
            ready = []
            if not running:
                if pending:
                    for step_id in list(pending):
                        self._store_skip(pending.pop(step_id), "no executable steps found")
                break
            done = [await finished.get()]
            while not finished.empty():
                done.append(finished.get_nowait())
            for task in done:
                step_id = running.pop(task)
                outcome = task.result()
                self._results[step_id] = outcome
                if outcome.status == STEP_SUCCEEDED:
                    ready.extend(self._ready(step_id, unmet))
                else:
                    ended_unsucceeded.append(step_id)

    async def _run_limited(self, step: StepSpec, limiter: asyncio.Semaphore) -> StepOutcome:
        async with limiter:
            if self.cancelled:
                return self._skip_outcome(step, "run cancelled before the step started")
            if self._task_stop is not None:
                return self._skip_outcome(step, f"task stopped: {self._task_stop}")
            try:
                return await self._run_step(step)
            except Exception as exc:  # a bug in one step must not lose its siblings' results
                return self._panic_outcome(step, exc)

    def _panic_outcome(self, step: StepSpec, exc: Exception) -> StepOutcome:
        error = f"step {step.id} execution panic: {type(exc).__name__}: {exc}"
        self._emit(StepFinished(
            execution_id=self.execution_id, step_id=step.id, finished_at=self.clock(),
            status=STEP_FAILED, dispatch_count=0, attempts=0, validation_retries=0,
            semantic_retries=0, final_action=None, final_rule_id=None, error=error, result=None,
        ))
        return StepOutcome(id=step.id, status=STEP_FAILED, dispatch_count=0,
                           validation_retries=0, semantic_retries=0, attempts=(),
                           tool=step.tool, capability=step.capability, error=error)

    def _ready(self, succeeded_id: str, unmet: dict[str, int]) -> list[str]:
        """The steps that `succeeded_id` succeeding leaves with every dependency succeeded."""
        ready = []
        for dependent in self.plan.dependents_of(succeeded_id):
            unmet[dependent] -= 1
            if unmet[dependent] == 0:
                ready.append(dependent)
        return ready

    def _skip_blocked(
        self, pending: dict[str, StepSpec], graph: _ScheduleGraph, ended_unsucceeded: list[str]
    ) -> None:
        """Skip every pending step that now has a blocking reason, cascading through skips.

        Gives the skips, in the order and with the reasons, of checking every pending step in
        plan order and repeating until a pass skips nothing; but only steps naming a step that
        ended unsucceeded (since the last call, or by a skip here) are checked.
        """
        if self.cancelled or self._task_stop is not None:
            for step_id in list(pending):
                reason = self._blocking_reason(pending[step_id])
                if reason is not None:
                    self._store_skip(pending.pop(step_id), reason)
            return
        this_pass = [graph.position[d] for ended in ended_unsucceeded
                     for d in graph.blocked_by.get(ended, ()) if d in pending]
        heapq.heapify(this_pass)
        next_pass: set[int] = set()
        while this_pass or next_pass:
            if not this_pass:
                this_pass = sorted(next_pass)
                next_pass = set()
            position = heapq.heappop(this_pass)
            while this_pass and this_pass[0] == position:
                heapq.heappop(this_pass)
            step = self.plan.steps[position]
            if step.id not in pending:
                continue
            reason = self._blocking_reason(step)
            if reason is None:
                continue
            self._store_skip(pending.pop(step.id), reason)
            for dependent in graph.blocked_by.get(step.id, ()):
                if dependent in pending:
                    later = graph.position[dependent]
                    if later > position:
                        heapq.heappush(this_pass, later)
                    else:
                        next_pass.add(later)

    def _blocking_reason(self, step: StepSpec) -> str | None:
        if self.cancelled:
            return "run cancelled before the step started"
        if self._task_stop is not None:
            return f"task stopped: {self._task_stop}"
        held = sorted(d for d in self.plan.dependencies_of(step.id) if d in self.skip_steps)
        if held:
            return f"skipped due to held dependency: {held[0]} ({self.skip_steps[held[0]]})"
        explicit = sorted(
            d for d in step.depends_on
            if d in self._results and self._results[d].status != STEP_SUCCEEDED
        )
        if len(explicit) == 1:
            return f"skipped due to failed dependency: {explicit[0]}"
        if explicit:
            return f"skipped due to failed dependencies: {', '.join(explicit)}"
        templated = sorted(
            d for d in binding_references(step.parameters)
            if d in self._results and self._results[d].status != STEP_SUCCEEDED
        )
        if templated:
            first, rest = templated[0], templated[1:]
            extra = f"; additional failed upstreams: {', '.join(rest)}" if rest else ""
            return (
                f"skipped due to failed template dependency: {first} "
                f"(parameter references {{{{{first}...}}}} but that step failed{extra})"
            )
        return None

    def _store_skip(self, step: StepSpec, reason: str) -> None:
        self._results[step.id] = self._skip_outcome(step, reason)

    def _skip_outcome(self, step: StepSpec, reason: str) -> StepOutcome:
        outcome = StepOutcome(
            id=step.id, status=STEP_SKIPPED, dispatch_count=0, validation_retries=0,
            semantic_retries=0, attempts=(), tool=step.tool, capability=step.capability,
            error=reason, skip_reason=reason, max_attempts=self.config.max_attempts,
        )
        self._emit(StepFinished(
            execution_id=self.execution_id, step_id=step.id, finished_at=self.clock(),
            status=STEP_SKIPPED, dispatch_count=0, attempts=0, validation_retries=0,
            semantic_retries=0, final_action=None, final_rule_id=None, error=reason,
            result=None, skip_reason=reason,
        ))
        return outcome

    # --------------------------------------------------------------- step loop

    async def _run_step(self, step: StepSpec) -> StepOutcome:
        capability = self.plan.capability_for(step)
        url = self.plan.url_for(step)
        dependency_results = {
            dep: self._parsed_results[dep]
            for dep in self.plan.dependencies_of(step.id)
            if dep in self._parsed_results
        }
        protected: dict[str, str] = {key: "hitl_approved" for key in step.hitl_approved}
        bound_paths = exact_bound_paths(step.parameters)
        for path in bound_paths:
            protected.setdefault(path, "exact_bound")
        ctx = _StepContext(step, capability, url, protected, dependency_results, bound_paths)
        resolved = resolve_bindings(step.parameters, dependency_results)
        state = _StepState(parameters=dict(resolved or {}), started_at=self.clock())
        self._emit(StepStarted(
            execution_id=self.execution_id, step_id=step.id, started_at=self.clock(),
            tool=step.tool, capability=step.capability, url=url,
            depends_on=tuple(self.plan.dependencies_of(step.id)),
            parameters=dict(state.parameters), protected_keys=dict(protected),
            orchestrator=capability.orchestrator, side_effects=capability.side_effects,
        ))
        while True:
            state.n += 1
            coerced, coercions = coerce_parameters(state.parameters, capability.schema)
            state.parameters = dict(coerced or {})
            if coercions:
                self._emit(ParametersCoerced(
                    execution_id=self.execution_id, step_id=step.id, n=state.n, at=self.clock(),
                    coercions=tuple(c.to_dict() for c in coercions),
                ))
            violations = tuple(
                v.message
                for v in guard_parameters(state.parameters, capability.schema, self.plan.step_ids)
            )
            breaker = self._breaker(step.tool)
            pre = decide(self._inputs(ctx, state, dispatched=False,
                                      guard_violations=violations,
                                      circuit_open=breaker is not None
                                      and not breaker.can_execute()))
            if pre.action is not Action.DISPATCH:
                self._record_decision(step, state, pre, dispatched=False, outcome=None)
                self._note_task_stop(pre)
                status = STEP_REJECTED if state.dispatch_count == 0 else STEP_FAILED
                return self._finish_step(step, state, status, pre, error=pre.reason)
            outcome = await self._dispatch(step, url, state)
            if breaker is not None:
                if is_transient_status(outcome.status) and outcome.transport_error != "cancelled":
                    breaker.record_failure()
                else:
                    breaker.record_success()
            decision = await self._route(ctx, state, outcome)
            self._record_decision(step, state, decision, dispatched=True, outcome=outcome)
            if decision.action is Action.SUCCESS:
                parsed = outcome.envelope.json_value
                self._parsed_results[step.id] = parsed
                return self._finish_step(step, state, STEP_SUCCEEDED, decision, result=parsed)
            if decision.action is Action.RETRY_SAME:
                self._tool_retries[step.tool] += 1
                await self._backoff(step, state, decision)
                state.attempt_number += 1
                state.correction_layer = None
                continue
            if decision.action is Action.RETRY_CORRECTED:
                state.previous_errors.append(redact_sensitive_text(_body_text(outcome.body)))
                state.parameters = dict(decision.corrected_parameters or {})
                state.validation_retries += 1
                if decision.layer is Layer.RE_RESOLUTION:
                    state.semantic_retries += 1
                state.correction_layer = str(decision.layer)
                continue
            self._note_task_stop(decision)
            return self._finish_step(step, state, STEP_FAILED, decision,
                                     error=_error_text(outcome))

    def _note_task_stop(self, decision: Decision) -> None:
        """A task budget stop ends the task: steps not yet started will be skipped."""
        if decision.rule_id in TASK_STOP_RULE_IDS and self._task_stop is None:
            self._task_stop = f"{decision.rule_id}: {decision.reason}"

    async def _route(self, ctx: _StepContext, state: _StepState, outcome: HttpOutcome) -> Decision:
        step = ctx.step
        envelope = outcome.envelope
        retry_after_ms, retry_after_source = None, None
        header_value = _header(outcome.headers, "retry-after")
        if header_value is not None:
            retry_after_ms = parse_retry_after_header(header_value, now=self.clock())
            retry_after_source = "retry_after_header" if retry_after_ms is not None else None
        if retry_after_ms is None and envelope.retry_after_detail_ms is not None:
            retry_after_ms = envelope.retry_after_detail_ms
            retry_after_source = "retry_after_details"
        self._warn_contract(step, state, outcome, envelope)
        error_text = _error_text(outcome)
        signature = (step.capability, outcome.status, hashlib.sha256(outcome.body).hexdigest())
        if outcome.status == 0 or outcome.status >= 300:
            self._error_counts[signature] += 1
        inputs = self._inputs(
            ctx, state, dispatched=True,
            status=outcome.status, transport_error=outcome.transport_error,
            retry_policy=envelope.retry_policy, error_text=error_text,
            legacy_pattern=match_type_related_error(error_text, ""),
            retry_after_ms=retry_after_ms, retry_after_source=retry_after_source,
            repeated_error_count=self._error_counts[signature],
            body_is_json_object=envelope.is_object,
            ended_by_deadline=outcome.ended_by_deadline,
        )
        decision = decide(inputs)
        while decision.action in (Action.ASK_ANALYZER, Action.ASK_RESOLVER, Action.ASK_LEGACY):
            verdict = await self._consult(decision.action, ctx, state, outcome)
            inputs = with_verdict(
                inputs, verdict,
                llm_tokens_used=self._llm_tokens, llm_calls_used=self._llm_calls,
                elapsed_s=self.monotonic() - self._started,
                cancelled=self.cancelled,
            )
            decision = decide(inputs)
        return decision

    def _inputs(self, ctx: _StepContext, state: _StepState, **fields: Any) -> DecisionInputs:
        config, capability = self.config, ctx.capability
        base = DecisionInputs(
            dispatched=False,
            attempt_number=state.attempt_number,
            max_attempts=config.max_attempts,
            validation_retries=state.validation_retries,
            max_validation_retries=config.max_validation_retries,
            max_semantic_retries=config.max_semantic_retries,
            orchestrator=capability.orchestrator,
            side_effects=capability.side_effects,
            protected_keys=dict(ctx.protected),
            parameter_keys=tuple(state.parameters),
            has_dependencies=bool(self.plan.dependencies_of(ctx.step.id)),
            llm_configured=self._llm is not None,
            error_analyzer_enabled=config.error_analyzer_enabled,
            semantic_retry_enabled=config.semantic_retry_enabled,
            semantic_retry_independent_steps=config.semantic_retry_independent_steps,
            validation_feedback_enabled=config.validation_feedback_enabled,
            legacy_callback_set=self._legacy_callback is not None or self._llm is not None,
            cancelled=self.cancelled,
            retry_after_max_ms=config.retry_after_max_ms,
            backoff=config.backoff(),
            elapsed_s=self.monotonic() - self._started,
            max_wall_clock_s=config.max_wall_clock_s,
            llm_tokens_used=self._llm_tokens,
            max_total_tokens=config.max_total_tokens,
            llm_calls_used=self._llm_calls,
            max_llm_calls=config.max_llm_calls,
            max_repeated_errors=config.max_repeated_errors,
            tool=ctx.step.tool,
            tool_retries_used=self._tool_retries[ctx.step.tool],
            max_retries_per_tool=config.max_retries_per_tool,
        )
        return replace(base, **fields)

    def _remaining_wall_clock_s(self) -> float | None:
        """Seconds left of the task's wall-clock budget, or None when it has none."""
        limit = self.config.max_wall_clock_s
        if limit is None:
            return None
        return max(0.0, limit - (self.monotonic() - self._started))

    def _breaker(self, tool: str) -> CircuitBreaker | None:
        """The tool's circuit breaker when `circuit_breaker_enabled`, created on first use."""
        if not self.config.circuit_breaker_enabled:
            return None
        if tool not in self._breakers:
            self._breakers[tool] = CircuitBreaker(
                tool, clock=self.monotonic, on_state_change=self._circuit_changed
            )
        return self._breakers[tool]

    def _circuit_changed(self, change: StateChange) -> None:
        self._emit(CircuitStateChanged(
            breaker=change.breaker, at=self.clock(), from_state=str(change.from_state),
            to_state=str(change.to_state), reason=change.reason,
            execution_id=self.execution_id,
        ))

    # ---------------------------------------------------------------- dispatch

    async def _dispatch(self, step: StepSpec, url: str, state: _StepState) -> HttpOutcome:
        body = encode_json_body(state.parameters)
        headers = self._request_headers(step)
        headers.update(attempt_headers(self.recorder, self.execution_id, step.id, state.n))
        self._emit(AttemptDispatched(
            execution_id=self.execution_id, step_id=step.id, n=state.n,
            attempt_number=state.attempt_number, at=self.clock(), method="POST", url=url,
            request_headers=dict(headers), request_body=body,
            parameters=dict(state.parameters), correction_layer=state.correction_layer,
        ))
        started = self.monotonic()
        assert self._http is not None
        remaining_s = self._remaining_wall_clock_s()
        limit_s = self.config.timeout_s if remaining_s is None else min(
            self.config.timeout_s, remaining_s
        )
        request = asyncio.wait_for(
            self._http.post(url, content=body, headers=headers), timeout=limit_s
        )
        finished, result = await self._race_cancel(request)
        elapsed_ms = (self.monotonic() - started) * 1000.0
        if not finished:
            outcome = HttpOutcome(0, {}, b"", elapsed_ms, "cancelled", "run cancelled in flight")
        elif isinstance(result, TimeoutError):
            # seed 003, seed 000 §9: the wall-clock budget ends a request in flight.
            by_budget = remaining_s is not None and remaining_s <= self.config.timeout_s
            why = (
                f"ended by the task wall-clock budget (max_wall_clock_s="
                f"{self.config.max_wall_clock_s:g}) after {elapsed_ms:.0f} ms"
                if by_budget else f"no response within timeout_s={self.config.timeout_s:g}"
            )
            outcome = HttpOutcome(0, {}, b"", elapsed_ms, "timeout", f"request {why}",
                                  ended_by_deadline=by_budget)
        elif isinstance(result, httpx.TransportError):
            outcome = HttpOutcome(0, {}, b"", elapsed_ms, classify_transport_error(result),
                                  f"request failed: {type(result).__name__}: {result}")
        else:
            response: httpx.Response = result
            outcome = HttpOutcome(
                response.status_code, _flatten_headers(response.headers), response.content,
                elapsed_ms,
            )
        if outcome.transport_error != "connect":
            # Physical dispatches only: a refused connection put nothing on the wire.
            state.dispatch_count += 1
        self._emit(AttemptResponded(
            execution_id=self.execution_id, step_id=step.id, n=state.n, at=self.clock(),
            elapsed_ms=outcome.elapsed_ms, status=outcome.status,
            response_headers=outcome.headers, response_body=outcome.body,
            transport_error=outcome.transport_error,
            transport_error_message=outcome.transport_error_message,
            retry_policy=str(outcome.envelope.retry_policy),
        ))
        return outcome

    def _request_headers(self, step: StepSpec) -> dict[str, str]:
        """The headers of a tool call. Authorization: the tool's own `headers` win, then
        `TRUVAG3_OAUTH_TOKEN` (as Bearer), then userinfo in the tool's `base_url` (as Basic)."""
        headers = {"Content-Type": "application/json"}
        tool = self.plan.tools.get(step.tool)
        if tool is not None:
            headers.update(tool.headers or {})
        if tool is None or not tool.has_authorization_header:
            token = self.env.get("TRUVAG3_OAUTH_TOKEN")
            userinfo = tool.userinfo if tool is not None else None
            if token:
                headers["Authorization"] = f"Bearer {token}"
            elif userinfo is not None:
                headers["Authorization"] = basic_authorization(*userinfo)
        headers.update({
            "X-TruvaG3-Request-ID": self.execution_id,
            "X-TruvaG3-Plan-ID": self.execution_id,
            "X-TruvaG3-Step-ID": step.id,
            "X-TruvaG3-Agent-Name": step.tool,
        })
        return headers

    async def _race_cancel(self, awaitable: Awaitable[Any]) -> tuple[bool, Any]:
        """Await `awaitable` unless cancellation comes first: (finished, result or exception)."""
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._cancel.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            return False, None
        if work.cancelled():
            return False, None
        exc = work.exception()
        if exc is not None:
            if isinstance(exc, httpx.TransportError | TimeoutError):
                return True, exc
            raise exc
        return True, work.result()

    # ----------------------------------------------------------------- backoff

    async def _backoff(self, step: StepSpec, state: _StepState, decision: Decision) -> None:
        planned = decision.delay_ms or 0.0
        source = decision.delay_source or "backoff"
        common = dict(execution_id=self.execution_id, step_id=step.id, n=state.n,
                      planned_ms=planned, source=source)
        self._emit(BackoffEvent(at=self.clock(), phase="started", **common))
        started = self.monotonic()
        finished, _ = await self._race_cancel(self.sleep(planned / 1000.0))
        actual = (self.monotonic() - started) * 1000.0
        phase = "finished" if finished else "cancelled"
        self._emit(BackoffEvent(at=self.clock(), phase=phase, actual_ms=actual, **common))

    # --------------------------------------------------------------- LLM layers

    async def _consult(
        self, action: Action, ctx: _StepContext, state: _StepState, outcome: HttpOutcome
    ) -> LayerVerdict:
        step, capability = ctx.step, ctx.capability
        body_text = _body_text(outcome.body)
        current = dict(state.parameters)
        common = dict(current_parameters=current, protected_keys=ctx.protected,
                      protected_paths=ctx.protected_paths,
                      schema=capability.schema, plan_step_ids=self.plan.step_ids)
        if action is Action.ASK_ANALYZER:
            assert self._llm is not None
            ask = partial(
                ErrorAnalyzer(self._llm).analyze,
                http_status=outcome.status, error_response=body_text, original_request=current,
                user_query=self.plan.query, step_instruction=step.instruction,
                capability_name=capability.name,
                capability_description=capability.description, step_id=step.id,
            )
            result, unavailable = await self._layer_call(step, state, "layer 3 analyzer", ask)
            verdict = result.verdict if result is not None else None
            if verdict is None:
                return replace(assess_correction(Layer.ANALYZER, answered=False,
                                                 failure=_layer_failure(result), **common),
                               unavailable=unavailable)  # fmt: skip
            proposed = {**current, **verdict.suggested_changes}
            return assess_correction(
                Layer.ANALYZER, answered=True, proposed_parameters=proposed,
                should_retry=verdict.should_retry, is_transient=verdict.is_transient_error,
                explanation=verdict.reason, changes=verdict.suggested_changes, **common,
            )
        if action is Action.ASK_RESOLVER:
            assert self._llm is not None
            ask = partial(
                ContextualReResolver(self._llm).re_resolve,
                user_query=self.plan.query, step_instruction=step.instruction,
                source_data=dict(ctx.dependency_results), step_id=step.id,
                capability_name=capability.name, capability_schema=capability.schema,
                attempted_params=current, error_response=body_text, http_status=outcome.status,
                previous_errors=list(state.previous_errors),
            )
            result, unavailable = await self._layer_call(step, state, "layer 4 re-resolver", ask)
            verdict = result.verdict if result is not None else None
            if verdict is None:
                return replace(assess_correction(Layer.RE_RESOLUTION, answered=False,
                                                 failure=_layer_failure(result), **common),
                               unavailable=unavailable)  # fmt: skip
            return assess_correction(
                Layer.RE_RESOLUTION, answered=True,
                proposed_parameters=verdict.corrected_parameters or None,
                should_retry=verdict.should_retry,
                explanation=verdict.analysis, changes=verdict.corrected_parameters, **common,
            )
        corrected, failure, unavailable = await self._legacy(step, capability, state, outcome)
        if corrected is None:
            return replace(
                assess_correction(Layer.LEGACY, answered=False, failure=failure, **common),
                unavailable=unavailable,
            )
        return assess_correction(
            Layer.LEGACY, answered=True, proposed_parameters=corrected, should_retry=True,
            explanation="legacy correction callback returned parameters",
            changes=corrected, **common,
        )

    async def _legacy(
        self, step: StepSpec, capability: CapabilitySpec, state: _StepState, outcome: HttpOutcome
    ) -> tuple[dict[str, Any] | None, str | None, str | None]:
        """Corrected parameters, or None with why not and, if so, the endpoint failures."""
        request = LegacyCorrectionRequest(
            step_id=step.id, tool=step.tool, capability=step.capability,
            parameters=dict(state.parameters), error_text=_error_text(outcome),
            schema=capability.schema,
        )
        if self._legacy_callback is not None:
            finished, answer = await self._race_cancel(self._legacy_callback(request))
            if not finished:
                return None, "cancelled", None
            if isinstance(answer, LayerResult):
                self._record_llm(step, state, answer)
                verdict = answer.verdict
                if verdict is not None:
                    return dict(verdict.corrected_parameters), None, None
                failed = answer.exchange.endpoint_failure
                return None, _layer_failure(answer), failure_summary([failed]) if failed else None
            if isinstance(answer, dict):
                return dict(answer), None, None
            return None, "callback returned no parameters", None
        assert self._llm is not None
        ask = partial(
            LegacyCorrector(self._llm).correct,
            tool=step.tool, capability=step.capability, error_text=request.error_text,
            original_params=request.parameters, schema=capability.schema,
        )
        result, unavailable = await self._layer_call(step, state, "legacy correction", ask)
        verdict = result.verdict if result is not None else None
        if verdict is None:
            return None, _layer_failure(result), unavailable
        return dict(verdict.corrected_parameters), None, None

    async def _layer_call(
        self,
        step: StepSpec,
        state: _StepState,
        label: str,
        make_call: Callable[[], Awaitable[LayerResult]],
    ) -> tuple[LayerResult | None, str | None]:
        """One layer's LLM call, retried while the endpoint fails transiently (LLM_MAX_TRIES).

        Returns the last result (None when cancelled) and, when the endpoint gave no answer,
        its failures counted (`HTTP 503 ×3`) plus why there was no further try, if not the cap.
        Waits use the executor's backoff or the endpoint's Retry-After, through `self.sleep`.
        """
        failures: list[str] = []
        for try_number in range(1, LLM_MAX_TRIES + 1):
            remaining_s = self._remaining_wall_clock_s()
            call = make_call() if remaining_s is None else asyncio.wait_for(
                make_call(), timeout=remaining_s
            )
            with llm_trace_context(self.recorder, self.execution_id, step.id, state.n):
                finished, result = await self._race_cancel(call)
            if not finished:
                return None, None
            if isinstance(result, TimeoutError):
                # seed 003: the wall-clock budget ends an LLM call in flight too.
                return None, (
                    f"the LLM call was ended by the task wall-clock budget (max_wall_clock_s="
                    f"{self.config.max_wall_clock_s:g})"
                )
            self._record_llm(step, state, result)
            exchange = result.exchange
            failed = exchange.endpoint_failure
            if failed is None:
                return result, None
            failures.append(failed)
            if try_number == LLM_MAX_TRIES:
                break
            delay_ms, source, why_not = self._llm_retry_delay(exchange, try_number)
            if not exchange.transient_failure:
                why_not = f"{failed} is not transient"
            if why_not is not None:
                return result, f"{failure_summary(failures)}; not retried: {why_not}"
            self._emit(Notice(
                execution_id=self.execution_id, step_id=step.id, n=state.n, at=self.clock(),
                name="llm.retry_wait",
                message=f"{label}: LLM try {try_number} of {LLM_MAX_TRIES} failed ({failed}); "
                f"trying again after {delay_ms:.1f} ms ({source})",
                attrs={"site": exchange.site, "try": try_number, "max_tries": LLM_MAX_TRIES,
                       "failure": failed, "delay_ms": delay_ms, "delay_source": source},
            ))
            finished, _ = await self._race_cancel(self.sleep(delay_ms / 1000.0))
            if not finished:
                return None, None
        return result, failure_summary(failures)

    def _llm_retry_delay(
        self, exchange: LLMExchange, try_number: int
    ) -> tuple[float, str, str | None]:
        """The wait before the next LLM try, its source, and why not to retry (None: retry)."""
        config = self.config
        retry_after_ms = parse_retry_after_header(exchange.retry_after_header, now=self.clock())
        if retry_after_ms is not None:
            delay_ms, source = retry_after_ms, "retry_after_header"
            cap_ms = config.retry_after_max_ms  # None: no limit but the wall clock
            if cap_ms is not None and delay_ms > cap_ms:
                return delay_ms, source, (
                    f"Retry-After asks for {delay_ms:.0f} ms, more than retry_after_max_ms "
                    f"{cap_ms:.0f}"
                )
        else:
            delay_ms, source = config.backoff().delay_ms(try_number), "backoff"
        if config.max_llm_calls is not None and self._llm_calls >= config.max_llm_calls:
            return delay_ms, source, (
                f"LLM-call budget used up ({self._llm_calls} of {config.max_llm_calls} calls)"
            )
        if config.max_wall_clock_s is not None:
            remaining_ms = (config.max_wall_clock_s - (self.monotonic() - self._started)) * 1000
            if delay_ms >= remaining_ms:
                return delay_ms, source, (
                    f"the wait of {delay_ms:.0f} ms would outlast the wall-clock budget "
                    f"({max(0.0, remaining_ms):.0f} ms left)"
                )
        return delay_ms, source, None

    def _record_llm(self, step: StepSpec, state: _StepState, result: LayerResult) -> None:
        exchange = result.exchange
        self._llm_calls += 1
        self._llm_tokens += exchange.total_tokens or 0
        # llm_debug_enabled false keeps the call's metadata and parsed verdict, not its text.
        text = self.config.llm_debug_enabled
        self._emit(LLMCall(
            execution_id=self.execution_id, step_id=step.id, n=state.n,
            call_id=f"{self.execution_id}:{step.id}:{state.n}:{self._llm_calls}",
            site=exchange.site, at=exchange.started_at, latency_ms=exchange.latency_ms,
            base_url=exchange.base_url, model=exchange.model,
            temperature=exchange.temperature, max_tokens=exchange.max_tokens,
            messages=tuple(exchange.messages) if text else (),
            request_body=exchange.request_body if text else b"",
            response_status=exchange.response_status,
            response_body=exchange.response_body if text else b"",
            raw_text=exchange.raw_text if text else None,
            parsed=result.parsed, parse_error=result.parse_error,
            error=exchange.error, prompt_tokens=exchange.prompt_tokens,
            completion_tokens=exchange.completion_tokens, total_tokens=exchange.total_tokens,
            text_recorded=text,
        ))

    # ----------------------------------------------------------------- records

    def _record_decision(
        self,
        step: StepSpec,
        state: _StepState,
        decision: Decision,
        *,
        dispatched: bool,
        outcome: HttpOutcome | None,
    ) -> None:
        self._emit(AttemptDecided(
            execution_id=self.execution_id, step_id=step.id, n=state.n, at=self.clock(),
            dispatched=dispatched, parameters=dict(state.parameters), decision=decision.to_dict(),
        ))
        state.attempts.append(AttemptSummary(
            n=state.n,
            attempt_number=state.attempt_number,
            dispatched=dispatched,
            status=outcome.status if outcome is not None else None,
            parameters=dict(state.parameters),
            action=str(decision.action),
            rule=decision.rule_id,
            reason=decision.reason,
            delay_ms=decision.delay_ms if decision.action is Action.RETRY_SAME else None,
            delay_source=decision.delay_source if decision.action is Action.RETRY_SAME else None,
            layer=str(decision.layer) if decision.layer else None,
            transport_error=outcome.transport_error if outcome is not None else None,
            sent=outcome is not None and outcome.transport_error != "connect",
            recovery=str(decision.recovery) if decision.recovery else None,
            impact=decision.impact,
            budgets=dict(decision.budgets),
            decision=decision,
        ))

    def _warn_contract(self, step: StepSpec, state: _StepState, outcome: HttpOutcome,
                       envelope: WireEnvelope) -> None:
        if not 200 <= outcome.status < 300:
            if envelope.success is True:
                self._notice(step, state, "tool_contract.success_true_on_error",
                             f"HTTP {outcome.status} but the body says success:true")
            return
        if envelope.success is False:
            self._notice(step, state, "tool_contract.success_false_on_2xx",
                         f"HTTP {outcome.status} but the body says success:false; treated as "
                         "success (seed 000 §11: call WriteHeader before encoding)")
        elif not envelope.is_object:
            self._notice(step, state, "tool_contract.body_not_json_object",
                         f"HTTP {outcome.status} body is not a JSON object envelope")

    def _notice(self, step: StepSpec, state: _StepState, name: str, message: str) -> None:
        self._emit(Notice(execution_id=self.execution_id, step_id=step.id, n=state.n,
                          at=self.clock(), name=name, message=message))

    def _finish_step(
        self,
        step: StepSpec,
        state: _StepState,
        status: str,
        decision: Decision,
        *,
        result: Any = None,
        error: str | None = None,
    ) -> StepOutcome:
        outcome = StepOutcome(
            id=step.id, status=status, dispatch_count=state.dispatch_count,
            validation_retries=state.validation_retries, semantic_retries=state.semantic_retries,
            attempts=tuple(state.attempts), tool=step.tool, capability=step.capability,
            parameters=dict(state.parameters), result=result, error=error,
            final_action=str(decision.action), final_rule=decision.rule_id,
            recovery=str(decision.recovery) if decision.recovery else None,
            impact=decision.impact,
            attempt_counter=state.attempt_number,
            max_attempts=1 if self.plan.capability_for(step).orchestrator
            else self.config.max_attempts,
            start_time=state.started_at, end_time=self.clock(),
        )
        self._emit(StepFinished(
            execution_id=self.execution_id, step_id=step.id, finished_at=self.clock(),
            status=status, dispatch_count=state.dispatch_count, attempts=state.attempt_number,
            validation_retries=state.validation_retries, semantic_retries=state.semantic_retries,
            final_action=str(decision.action), final_rule_id=decision.rule_id, error=error,
            result=result,
        ))
        return outcome

    def _finish(self) -> ExecutionOutcome:
        steps = tuple(self._results[s.id] for s in self.plan.steps if s.id in self._results)
        succeeded = sum(1 for s in steps if s.status == STEP_SUCCEEDED)
        incomplete = tuple(s.id for s in steps if s.status != STEP_SUCCEEDED)
        if self.cancelled:
            status = "cancelled"
        elif succeeded == len(self.plan.steps):
            status = "succeeded"
        elif succeeded:
            status = "partial"
        else:
            status = "failed"
        stop_reason = self._task_stop
        if self.cancelled:
            stop_reason = "cancelled"
        self._emit(ExecutionFinished(
            execution_id=self.execution_id, finished_at=self.clock(), status=status,
            stop_reason=stop_reason, incomplete_steps=incomplete, llm_calls=self._llm_calls,
            llm_total_tokens=self._llm_tokens,
        ))
        return ExecutionOutcome(
            execution_id=self.execution_id, status=status, steps=steps, stop_reason=stop_reason,
            incomplete_steps=incomplete, llm_calls=self._llm_calls,
            llm_total_tokens=self._llm_tokens,
            duration_ms=(self.monotonic() - self._started) * 1000.0,
            rerun_of=self.rerun_of,
        )

    def _emit(self, event: Any) -> None:
        try:
            self.recorder.record(event)
        except Exception as exc:  # a recorder failure must never stop the executor
            self.recorder_error = exc

    def _llm_description(self) -> dict[str, Any] | None:
        if self.llm_settings is None:
            return None
        return {"base_url": self.llm_settings.base_url, "model": self.llm_settings.model,
                "auth_source": self.llm_settings.api_key_source}

    def _note_missing_llm_key(self) -> None:
        """Say at the start of a run that LLM calls carry no credential (not silently)."""
        if self.llm_settings is None or self.llm_settings.has_credential:
            return
        self._emit(Notice(
            execution_id=self.execution_id, step_id=None, n=None, at=self.clock(),
            name="llm.no_api_key",
            message=("no LLM API key: none of llm.api_key, OPENAI_API_KEY or userinfo in the "
                     "LLM base URL is set, so LLM calls send the placeholder "
                     f"'Authorization: Bearer {PLACEHOLDER_API_KEY}'"),
            attrs={"base_url": self.llm_settings.base_url},
        ))

    async def _close_clients(self) -> None:
        if self._owns_http and self._http is not None:
            await self._http.aclose()
        if self._owns_llm and self._llm is not None:
            await self._llm.aclose()


def _flatten_headers(headers: httpx.Headers) -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in headers.multi_items():
        flat[key] = f"{flat[key]}, {value}" if key in flat else value
    return flat


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _body_text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


def _error_text(outcome: HttpOutcome) -> str:
    """The step error in TruvaG3's words, redacted; a 2xx body is a result, not error text."""
    if outcome.status == 0:
        return redact_sensitive_text(outcome.transport_error_message or "request failed")
    if 200 <= outcome.status < 300:
        return f"component returned status {outcome.status}"
    return redact_sensitive_text(
        f"component returned status {outcome.status}: {_body_text(outcome.body)}"
    )


def _layer_failure(result: LayerResult | None) -> str:
    if result is None:
        return "cancelled"
    if result.exchange.error:
        return f"LLM call failed: {result.exchange.error}"
    if result.parse_error:
        return f"malformed answer: {result.parse_error}"
    return "no usable answer"


async def run_plan(plan: Plan, **kwargs: Any) -> ExecutionOutcome:
    """Convenience: construct a `PlanExecutor` and run it."""
    return await PlanExecutor(plan, **kwargs).run()
