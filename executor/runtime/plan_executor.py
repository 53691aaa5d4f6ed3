"""`PlanExecutor`: construction, `run()`, and the records it reports."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from executor import __version__
from executor.config import ExecutorConfig, resolve_config
from executor.events import (
    AttemptDecided,
    ExecutionFinished,
    ExecutionStarted,
    Notice,
    NullRecorder,
    Recorder,
    StepFinished,
)
from executor.llm import (
    PLACEHOLDER_API_KEY,
    LegacyCorrectionCallback,
    LLMClient,
    LLMSettings,
    resolve_llm_settings,
)
from executor.plan import Plan, StepSpec
from executor.policy import (
    Action,
    Decision,
)
from executor.resilience import CircuitBreaker
from executor.runtime.layers import LayerConsultation
from executor.runtime.outcomes import (
    STEP_SUCCEEDED,
    AttemptSummary,
    ErrorSignature,
    ExecutionOutcome,
    HttpOutcome,
    Sleep,
    StepOutcome,
    StepState,
    ToolHttpClient,
    default_tls_context,
    new_execution_id,
)
from executor.runtime.scheduling import StepScheduling
from executor.runtime.step_loop import StepLoop
from executor.tracecontext import propagates
from executor.wire import (
    WireEnvelope,
)


class PlanExecutor(StepScheduling, StepLoop, LayerConsultation):
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
        self.reuse_results = dict(reuse_results or {})
        self.skip_steps = dict(skip_steps or {})
        self.rerun_of = rerun_of
        self.labels = dict(labels or {})
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
        self._error_counts: Counter[ErrorSignature] = Counter()
        self._tool_retries: Counter[str] = Counter()
        self._task_stop: str | None = None
        self._results: dict[str, StepOutcome] = {}
        self._parsed_results: dict[str, Any] = {}
        self._breakers: dict[str, CircuitBreaker] = {}
        # Per-run caches of what does not change from step to step.
        # Tasks waiting in `_race_cancel`, and whether `cancel()` cancelled them.
        self._racing: dict[asyncio.Task[Any], bool] = {}
        self._tool_headers: dict[str, dict[str, str]] = {}
        self._http_urls: dict[str, httpx.URL] = {}  # parsed once per URL, not per request
        self._run_constants: tuple[Any, dict[str, Any]] | None = None
        self._propagates_trace_context = propagates(self.recorder)
        self.recorder_error: Exception | None = None  # the last exception a recorder raised

    def cancel(self) -> None:
        """Request cancellation: waits end now, in-flight requests are abandoned."""
        self._cancel.set()
        for task, cancelled in list(self._racing.items()):
            if not cancelled:
                self._racing[task] = True
                task.cancel()

    @property
    def cancelled(self) -> bool:
        """True once `cancel()` was called."""
        return self._cancel.is_set()

    async def run(self) -> ExecutionOutcome:
        """Run every step of the plan and return how it ended."""
        self._propagates_trace_context = propagates(self.recorder)
        if self._http is None:
            self._http = ToolHttpClient(
                timeout=httpx.Timeout(self.config.timeout_s), follow_redirects=False,
                verify=default_tls_context(),
            )
        if self._llm is None and self.llm_settings is not None:
            self._llm = LLMClient(self.llm_settings, clock=self.clock)
        # The task's wall-clock budget (seed 003) counts the task, not this process setting up
        # its clients: importing openai alone takes 0.7 s of CPU, seconds on a loaded machine.
        self._started = self.monotonic()
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

    def _record_decision(
        self,
        step: StepSpec,
        state: StepState,
        decision: Decision,
        *,
        dispatched: bool,
        outcome: HttpOutcome | None,
    ) -> None:
        self._emit(AttemptDecided(
            execution_id=self.execution_id, step_id=step.id, n=state.n, at=self.clock(),
            dispatched=dispatched, parameters=dict(state.parameters), decision=decision,
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

    def _warn_contract(self, step: StepSpec, state: StepState, outcome: HttpOutcome,
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

    def _notice(self, step: StepSpec, state: StepState, name: str, message: str) -> None:
        self._emit(Notice(execution_id=self.execution_id, step_id=step.id, n=state.n,
                          at=self.clock(), name=name, message=message))

    def _finish_step(
        self,
        step: StepSpec,
        state: StepState,
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


async def run_plan(plan: Plan, **kwargs: Any) -> ExecutionOutcome:
    """Convenience: construct a `PlanExecutor` and run it."""
    return await PlanExecutor(plan, **kwargs).run()
