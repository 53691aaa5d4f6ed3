"""One step's loop: coerce, guard, `decide()`, dispatch, back off."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from executor.events import (
    AttemptDispatched,
    AttemptResponded,
    BackoffEvent,
    CircuitStateChanged,
    ParametersCoerced,
    StepStarted,
)
from executor.params import (
    coerce_parameters,
    exact_bound_paths,
    guard_parameters,
    match_type_related_error,
    resolve_bindings,
)
from executor.plan import Plan, StepSpec, basic_authorization
from executor.policy import (
    TASK_STOP_RULE_IDS,
    Action,
    Decision,
    DecisionInputs,
    Layer,
    decide,
    with_verdict,
)
from executor.redact import redact_sensitive_text
from executor.resilience import CircuitBreaker, StateChange
from executor.runtime.outcomes import (
    STEP_FAILED,
    STEP_REJECTED,
    STEP_SUCCEEDED,
    HttpOutcome,
    StepContext,
    StepOutcome,
    StepState,
    classify_transport_error,
    encode_json_body,
    error_signature,
    first_header,
    flatten_headers,
    response_text,
    step_error_text,
)
from executor.runtime.response_body import send_and_read
from executor.tracecontext import attempt_traceparent
from executor.wire import (
    is_transient_status,
    parse_retry_after_header,
)

# A plan's steps share a few URLs (one per capability); parsed ones are kept up to this many.
_PARSED_URLS_KEPT = 256


class _Dispatched:
    """An attempt's `AttemptDispatched`, emitted once: when httpcore starts writing the request
    (`trace`, given as httpx's `trace` extension) or when the outcome is known (`emit`)."""

    __slots__ = ("_emit", "_event", "traced", "writing")

    def __init__(self, emit: Callable[[Any], None], event: Any) -> None:
        self._emit = emit
        self._event: Any = event
        self.traced = False  # httpcore reported progress (a transport that is not httpcore,
        self.writing = False  # httpx.MockTransport say, never does: then nothing is known)

    async def trace(self, name: str, info: dict[str, Any]) -> None:
        self.traced = True
        if not self.writing and name.endswith("send_request_headers.started"):
            self.writing = True
            self.emit()

    def emit(self) -> None:
        if self._event is not None:
            event, self._event = self._event, None
            self._emit(event)


class StepLoop:
    """Part of `PlanExecutor`: one step's loop — coerce, guard, decide, dispatch, back off."""

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
        ctx = StepContext(step, capability, url, protected, dependency_results, bound_paths)
        resolved = resolve_bindings(step.parameters, dependency_results)
        state = StepState(parameters=dict(resolved or {}), started_at=self.clock())
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
                return self._stop_undispatched(step, state, pre)
            outcome = await self._dispatch(step, url, state)
            if outcome is None:  # cancelled before the request's first byte was written
                return self._stop_undispatched(step, state, decide(self._inputs(
                    ctx, state, dispatched=False, guard_violations=violations,
                    circuit_open=False)))
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
                state.previous_errors.append(redact_sensitive_text(response_text(outcome.body)))
                state.parameters = dict(decision.corrected_parameters or {})
                state.validation_retries += 1
                if decision.layer is Layer.RE_RESOLUTION:
                    state.semantic_retries += 1
                state.correction_layer = str(decision.layer)
                continue
            self._note_task_stop(decision)
            # SPEC §3.2: a step none of whose attempts reached the tool (every connection
            # refused, or timed out while connecting) never dispatched: it is rejected.
            status = STEP_REJECTED if state.dispatch_count == 0 else STEP_FAILED
            return self._finish_step(step, state, status, decision,
                                     error=step_error_text(outcome))

    def _note_task_stop(self, decision: Decision) -> None:
        """A task budget stop ends the task: steps not yet started will be skipped."""
        if decision.rule_id in TASK_STOP_RULE_IDS and self._task_stop is None:
            self._task_stop = f"{decision.rule_id}: {decision.reason}"

    async def _route(self, ctx: StepContext, state: StepState, outcome: HttpOutcome) -> Decision:
        step = ctx.step
        envelope = outcome.envelope
        retry_after_ms, retry_after_source = None, None
        header_value = first_header(outcome.headers, "retry-after")
        if header_value is not None:
            retry_after_ms = parse_retry_after_header(header_value, now=self.clock())
            retry_after_source = "retry_after_header" if retry_after_ms is not None else None
        if retry_after_ms is None and envelope.retry_after_detail_ms is not None:
            retry_after_ms = envelope.retry_after_detail_ms
            retry_after_source = "retry_after_details"
        self._warn_contract(step, state, outcome, envelope)
        error_text = step_error_text(outcome)
        signature = error_signature(step, outcome)
        if signature is not None:
            self._error_counts[signature] += 1
        inputs = self._inputs(
            ctx, state, dispatched=True,
            status=outcome.status, transport_error=outcome.transport_error,
            retry_policy=envelope.retry_policy, error_text=error_text,
            legacy_pattern=match_type_related_error(error_text, ""),
            retry_after_ms=retry_after_ms, retry_after_source=retry_after_source,
            repeated_error_count=0 if signature is None else self._error_counts[signature],
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

    def _inputs(self, ctx: StepContext, state: StepState, **fields: Any) -> DecisionInputs:
        values = self._decision_constants()
        values.update(
            attempt_number=state.attempt_number,
            validation_retries=state.validation_retries,
            orchestrator=ctx.capability.orchestrator,
            side_effects=ctx.capability.side_effects,
            protected_keys=dict(ctx.protected),
            parameter_keys=tuple(state.parameters),
            has_dependencies=bool(self.plan.dependencies_of(ctx.step.id)),
            cancelled=self.cancelled,
            elapsed_s=self.monotonic() - self._started,
            llm_tokens_used=self._llm_tokens,
            llm_calls_used=self._llm_calls,
            tool=ctx.step.tool,
            tool_retries_used=self._tool_retries[ctx.step.tool],
        )
        values.update(fields)
        return DecisionInputs(**values)

    def _decision_constants(self) -> dict[str, Any]:
        """A new dict of the decision inputs that stay the same for a whole run (the config,
        the LLM wiring), computed once the run's clients are set."""
        constants = self._run_constants
        if constants is None or constants[0] is not self._llm:
            config = self.config
            constants = self._run_constants = (self._llm, {
                "dispatched": False,
                "max_attempts": config.max_attempts,
                "max_validation_retries": config.max_validation_retries,
                "max_semantic_retries": config.max_semantic_retries,
                "llm_configured": self._llm is not None,
                "error_analyzer_enabled": config.error_analyzer_enabled,
                "semantic_retry_enabled": config.semantic_retry_enabled,
                "semantic_retry_independent_steps": config.semantic_retry_independent_steps,
                "validation_feedback_enabled": config.validation_feedback_enabled,
                "legacy_callback_set": (
                    self._legacy_callback is not None or self._llm is not None
                ),
                "retry_after_max_ms": config.retry_after_max_ms,
                "backoff": config.backoff(),
                "max_wall_clock_s": config.max_wall_clock_s,
                "max_total_tokens": config.max_total_tokens,
                "max_llm_calls": config.max_llm_calls,
                "max_repeated_errors": config.max_repeated_errors,
                "max_retries_per_tool": config.max_retries_per_tool,
            })
        return dict(constants[1])

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

    def _stop_undispatched(
        self, step: StepSpec, state: StepState, decision: Decision
    ) -> StepOutcome:
        """End the step on a pre-dispatch `decision`: the attempt was not sent."""
        self._record_decision(step, state, decision, dispatched=False, outcome=None)
        self._note_task_stop(decision)
        status = STEP_REJECTED if state.dispatch_count == 0 else STEP_FAILED
        return self._finish_step(step, state, status, decision, error=decision.reason)

    async def _dispatch(
        self, step: StepSpec, url: str, state: StepState
    ) -> HttpOutcome | None:
        """Send the attempt and say what came back; None when the run was cancelled before
        the request's first byte was written (nothing reached the wire).

        `AttemptDispatched` is emitted when httpcore starts writing the request's headers (its
        `trace` extension), or, when it never does, with the outcome (a refused connection, a
        timeout while connecting); its time is the moment the attempt was sent off."""
        body = encode_json_body(state.parameters)
        headers = self._request_headers(step)
        if self._propagates_trace_context:
            headers["traceparent"] = attempt_traceparent(self.execution_id, step.id, state.n)
        if self._cancel.is_set():  # came after the pre-dispatch decision: nothing is sent
            return None
        dispatched = _Dispatched(self._emit, AttemptDispatched(
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
        finished, result = await self._race_cancel(
            self._post(url, body, headers, limit_s, dispatched.trace)
        )
        elapsed_ms = (self.monotonic() - started) * 1000.0
        if not finished and dispatched.traced and not dispatched.writing:
            return None  # httpcore was connecting: no byte of the request was written
        dispatched.emit()
        if not finished:
            outcome = HttpOutcome(0, {}, b"", elapsed_ms, "cancelled", "run cancelled in flight")
        elif isinstance(result, TimeoutError):
            # seed 003, seed 000 §9: the wall-clock budget ends a request in flight.
            by_budget = remaining_s is not None and remaining_s <= self.config.timeout_s
            budget = (
                f"ended by the task wall-clock budget (max_wall_clock_s="
                f"{self.config.max_wall_clock_s:g}) after {elapsed_ms:.0f} ms"
                if by_budget else ""
            )
            if dispatched.traced and not dispatched.writing:
                # Still connecting: no byte reached the tool. A failed connection (as httpx's
                # own ConnectTimeout is), never a request the tool may have accepted.
                why = budget if by_budget else f"timed out (timeout_s={self.config.timeout_s:g})"
                outcome = HttpOutcome(0, {}, b"", elapsed_ms, "connect",
                                      f"request {why} while connecting; nothing was sent",
                                      ended_by_deadline=by_budget)
            else:
                timeout = f"no response within timeout_s={self.config.timeout_s:g}"
                why = budget if by_budget else timeout
                outcome = HttpOutcome(0, {}, b"", elapsed_ms, "timeout", f"request {why}",
                                      ended_by_deadline=by_budget)
        elif isinstance(result, httpx.TransportError):
            outcome = HttpOutcome(0, {}, b"", elapsed_ms, classify_transport_error(result),
                                  f"request failed: {type(result).__name__}: {result}")
        else:
            response, response_body = result
            outcome = HttpOutcome(
                response.status_code, flatten_headers(response.headers), response_body,
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
        """The headers of a tool call (`tool_request_headers`); the tool's part (content type,
        its own headers, authorization, the execution ids) is computed once per run."""
        tool_headers = self._tool_headers.get(step.tool)
        if tool_headers is None:
            tool_headers = self._tool_headers[step.tool] = tool_request_headers(
                self.plan, step, self.env, self.execution_id
            )
        headers = dict(tool_headers)
        headers["X-TruvaG3-Step-ID"] = step.id
        headers["X-TruvaG3-Agent-Name"] = step.tool
        return headers

    async def _post(
        self, url: str, body: bytes, headers: dict[str, str], limit_s: float,
        trace: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None,
    ) -> tuple[httpx.Response, bytes]:
        """POST within `limit_s` seconds (TimeoutError after); none is sent when it is 0. The
        response and its decoded body, at most `max_response_body_bytes` (ResponseTooLarge).
        `trace` is given httpcore's trace events (httpx's `trace` request extension)."""
        if limit_s <= 0:
            raise TimeoutError
        assert self._http is not None
        target = self._http_urls.get(url)
        if target is None:
            target = httpx.URL(url)
            if len(self._http_urls) < _PARSED_URLS_KEPT:
                self._http_urls[url] = target
        async with asyncio.timeout(limit_s):
            request = self._http.build_request(
                "POST", target, content=body, headers=headers,
                extensions=None if trace is None else {"trace": trace},
            )
            return await send_and_read(self._http, request, self.config.max_response_body_bytes)

    async def _race_cancel(self, awaitable: Awaitable[Any]) -> tuple[bool, Any]:
        """Await `awaitable` unless cancellation comes first: (finished, result or exception).

        It runs in this task, which `cancel()` cancels while it waits here (no task per call);
        a cancellation from anywhere else propagates as usual.
        """
        if self._cancel.is_set():
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            return False, None
        task = asyncio.current_task()
        assert task is not None
        racing = self._racing
        racing[task] = False
        try:
            return True, await awaitable
        except (httpx.TransportError, TimeoutError) as exc:
            if racing.get(task):  # cancel() came while a timeout ended the wait
                task.uncancel()
                return False, None
            return True, exc
        except asyncio.CancelledError:
            if racing.get(task):
                task.uncancel()
                return False, None
            raise
        finally:
            del racing[task]

    async def _backoff(self, step: StepSpec, state: StepState, decision: Decision) -> None:
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


def tool_request_headers(
    plan: Plan, step: StepSpec, env: Mapping[str, str], execution_id: str
) -> dict[str, str]:
    """The headers of a tool call (`run`'s and `probe`'s). Authorization: the tool's own
    `headers` win, then `TRUVAG3_OAUTH_TOKEN` (as Bearer), then userinfo in the tool's
    `base_url` (as Basic)."""
    headers = {"Content-Type": "application/json"}
    tool = plan.tools.get(step.tool)
    if tool is not None:
        headers.update(tool.headers or {})
    if tool is None or not tool.has_authorization_header:
        token = env.get("TRUVAG3_OAUTH_TOKEN")
        userinfo = tool.userinfo if tool is not None else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif userinfo is not None:
            headers["Authorization"] = basic_authorization(*userinfo)
    headers.update({
        "X-TruvaG3-Request-ID": execution_id,
        "X-TruvaG3-Plan-ID": execution_id,
        "X-TruvaG3-Step-ID": step.id,
        "X-TruvaG3-Agent-Name": step.tool,
    })
    return headers
