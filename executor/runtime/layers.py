"""Consulting the LLM correction layers for a step, with retries and records."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any

from executor.events import (
    LLMCall,
    Notice,
)
from executor.llm import (
    LLM_MAX_TRIES,
    ContextualReResolver,
    ErrorAnalyzer,
    LayerResult,
    LegacyCorrectionRequest,
    LegacyCorrector,
    LLMExchange,
    failure_summary,
)
from executor.plan import CapabilitySpec, StepSpec
from executor.policy import (
    Action,
    Layer,
    LayerVerdict,
    assess_correction,
)
from executor.policy.conditions import wait_text
from executor.runtime.outcomes import (
    HttpOutcome,
    StepContext,
    StepState,
    layer_failure,
    response_text,
    step_error_text,
)
from executor.tracecontext import llm_trace_context
from executor.wire import (
    parse_retry_after_header,
)


class LayerConsultation:
    """Part of `PlanExecutor`: asking the LLM correction layers, with retries and records."""

    async def _consult(
        self, action: Action, ctx: StepContext, state: StepState, outcome: HttpOutcome
    ) -> LayerVerdict:
        """The verdict of the layer `action` asks, with the task's counters when it was asked."""
        before = dict(
            llm_calls_used_before=self._llm_calls, llm_tokens_used_before=self._llm_tokens,
            elapsed_s_before=self.monotonic() - self._started,
        )
        verdict = await self._ask_layer(action, ctx, state, outcome)
        return replace(verdict, **before)

    async def _ask_layer(
        self, action: Action, ctx: StepContext, state: StepState, outcome: HttpOutcome
    ) -> LayerVerdict:
        step, capability = ctx.step, ctx.capability
        body_text = response_text(outcome.body)
        current = dict(state.parameters)
        common = dict(current_parameters=current, protected_keys=ctx.protected,
                      protected_paths=ctx.protected_paths,
                      schema=capability.schema, plan_step_ids=self.plan.step_ids)

        def unanswered(layer: Layer, failure: str | None, unavailable: str | None) -> LayerVerdict:
            return replace(assess_correction(layer, answered=False, failure=failure, **common),
                           unavailable=unavailable)  # fmt: skip

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
                return unanswered(Layer.ANALYZER, layer_failure(result), unavailable)
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
                return unanswered(Layer.RE_RESOLUTION, layer_failure(result), unavailable)
            return assess_correction(
                Layer.RE_RESOLUTION, answered=True,
                proposed_parameters=verdict.corrected_parameters or None,
                should_retry=verdict.should_retry,
                explanation=verdict.analysis, changes=verdict.corrected_parameters, **common,
            )
        corrected, failure, unavailable = await self._legacy(step, capability, state, outcome)
        if corrected is None:
            return unanswered(Layer.LEGACY, failure, unavailable)
        return assess_correction(
            Layer.LEGACY, answered=True, proposed_parameters=corrected, should_retry=True,
            explanation="legacy correction callback returned parameters",
            changes=corrected, **common,
        )

    async def _legacy(
        self, step: StepSpec, capability: CapabilitySpec, state: StepState, outcome: HttpOutcome
    ) -> tuple[dict[str, Any] | None, str | None, str | None]:
        """Corrected parameters, or None with why not and, if so, the endpoint failures."""
        request = LegacyCorrectionRequest(
            step_id=step.id, tool=step.tool, capability=step.capability,
            parameters=dict(state.parameters), error_text=step_error_text(outcome),
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
                return None, layer_failure(answer), failure_summary([failed]) if failed else None
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
            return None, layer_failure(result), unavailable
        return dict(verdict.corrected_parameters), None, None

    async def _layer_call(
        self,
        step: StepSpec,
        state: StepState,
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
                f"trying again after {wait_text(delay_ms)} ({source})",
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
                    f"Retry-After asks for {wait_text(delay_ms)}, more than retry_after_max_ms "
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
                    f"the wait of {wait_text(delay_ms)} would outlast the wall-clock budget "
                    f"({max(0.0, remaining_ms):.0f} ms left)"
                )
        return delay_ms, source, None

    def _record_llm(self, step: StepSpec, state: StepState, result: LayerResult) -> None:
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
            text_recorded=text, response_headers=dict(exchange.response_headers),
        ))
