"""Sending the probes once each, recording them as one execution, grading the answers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from console.lint import ReportCard
from console.probe.cases import ProbeCase, SkippedCase
from console.probe.checks import PROBE_TABLE, grade_probe
from console.probe.target import ProbeTarget
from executor import __version__
from executor.config import ExecutorConfig, resolve_config
from executor.events import (
    AttemptDecided,
    AttemptDispatched,
    AttemptResponded,
    ExecutionFinished,
    ExecutionStarted,
    Recorder,
    StepFinished,
    StepStarted,
)
from executor.params import match_type_related_error
from executor.plan import CapabilitySpec, Plan, StepSpec
from executor.policy import Action, Decision, DecisionInputs, decide
from executor.runtime.outcomes import (
    ErrorSignature,
    HttpOutcome,
    classify_transport_error,
    default_tls_context,
    error_signature,
    first_header,
    flatten_headers,
    new_execution_id,
    step_error_text,
)
from executor.runtime.response_body import send_and_read
from executor.runtime.step_loop import tool_request_headers
from executor.tool_contract import Finding, Grade
from executor.tracecontext import attempt_headers
from executor.wire import parse_retry_after_header

PROBE_LABEL = "probe"
DEFAULT_TIMEOUT_S = 10.0

# ------------------------------------------------------------------------------ the run


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One probe as sent and answered, the policy's decision on it and its findings."""

    case: ProbeCase
    outcome: HttpOutcome
    decision: Decision
    findings: tuple[Finding, ...]

    @property
    def graded(self) -> bool:
        """False for a request cancelled in flight (Ctrl-C): the tool never had its chance."""
        return self.outcome.transport_error != "cancelled"

    @property
    def grade(self) -> Grade:
        grades = [finding.grade for finding in self.findings]
        return Grade.FAIL if Grade.FAIL in grades else (
            Grade.WARN if Grade.WARN in grades else Grade.PASS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.case.name, "kind": self.case.kind, "step_id": self.case.step_id,
            "http_status": self.outcome.status or None,
            "transport_error": self.outcome.transport_error,
            "action": str(self.decision.action), "rule_id": self.decision.rule_id,
            "grade": self.grade.value if self.graded else None,
            "findings": [{"check": f.check, "grade": f.grade.value, "message": f.message}
                         for f in self.findings],
        }  # fmt: skip


@dataclass(slots=True)
class ProbeOutcome:
    """How a probe ended: the execution it was recorded as, each result, what was skipped."""

    execution_id: str
    target: ProbeTarget
    results: list[ProbeResult] = field(default_factory=list)
    skipped: list[SkippedCase] = field(default_factory=list)
    cancelled: bool = False
    status: str = "failed"

    def card(self) -> ReportCard:
        """The report card of the answers, with lint's checks and the probe's rows."""
        card = ReportCard(self.target.step.tool, checks=PROBE_TABLE)
        for result in self.results:
            if result.outcome.transport_error == "cancelled":
                continue  # abandoned in flight by Ctrl-C: the tool never had its chance
            where = (self.execution_id, result.case.step_id, 1, result.outcome.status)
            card.add(self.target.step.capability, where, result.findings)
        return card


def _decision_inputs(
    config: ExecutorConfig, capability: CapabilitySpec, case: ProbeCase, outcome: HttpOutcome,
    *, now: float, tool: str, repeated_error_count: int, cancelled: bool,
) -> DecisionInputs:
    """What the step loop would give `decide()` for this answer on a one-attempt run without
    an LLM (the probe's recorded config: `max_attempts` 1)."""
    retry_after_ms, retry_after_source = None, None
    header_value = first_header(outcome.headers, "retry-after")
    if header_value is not None:
        retry_after_ms = parse_retry_after_header(header_value, now=now)
        retry_after_source = "retry_after_header" if retry_after_ms is not None else None
    if retry_after_ms is None and outcome.envelope.retry_after_detail_ms is not None:
        retry_after_ms = outcome.envelope.retry_after_detail_ms
        retry_after_source = "retry_after_details"
    error_text = step_error_text(outcome)
    return DecisionInputs(
        dispatched=True, status=outcome.status, transport_error=outcome.transport_error,
        retry_policy=outcome.envelope.retry_policy, attempt_number=1,
        max_attempts=config.max_attempts, max_validation_retries=config.max_validation_retries,
        max_semantic_retries=config.max_semantic_retries, orchestrator=capability.orchestrator,
        side_effects=capability.side_effects, llm_configured=False,
        error_analyzer_enabled=config.error_analyzer_enabled,
        semantic_retry_enabled=config.semantic_retry_enabled,
        semantic_retry_independent_steps=config.semantic_retry_independent_steps,
        validation_feedback_enabled=config.validation_feedback_enabled,
        legacy_pattern=match_type_related_error(error_text, ""),
        retry_after_ms=retry_after_ms, retry_after_source=retry_after_source,
        max_wall_clock_s=config.max_wall_clock_s, max_total_tokens=config.max_total_tokens,
        max_llm_calls=config.max_llm_calls, repeated_error_count=repeated_error_count,
        cancelled=cancelled,
        max_repeated_errors=config.max_repeated_errors,
        retry_after_max_ms=config.retry_after_max_ms,
        body_is_json_object=outcome.envelope.is_object,
        max_retries_per_tool=config.max_retries_per_tool, tool=tool, error_text=error_text,
        parameter_keys=tuple(case.parameters), backoff=config.backoff(),
    )  # fmt: skip


class Prober:
    """Sends each case once, in order, records everything, grades every answer; cancellable.

    The recorded execution holds a plan snapshot with one step per case (its `instruction`
    is the case's name), config `max_attempts` 1 and label `probe`, so `explain`, the TUI and
    `whatif` read it as any other execution.
    """

    def __init__(
        self,
        target: ProbeTarget,
        cases: list[ProbeCase],
        *,
        recorder: Recorder,
        skipped: list[SkippedCase] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        http_client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.cases = cases
        self.skipped = list(skipped or [])
        self.recorder = recorder
        self.env = dict(env or {})
        self.timeout_s = timeout_s
        self.clock = clock
        self.monotonic = monotonic
        self.execution_id = new_execution_id(clock())
        resolved, sources = resolve_config(target.plan.config, self.env)
        self.config = replace(resolved, max_attempts=1, timeout_s=timeout_s)
        self.config_sources = {**sources, "max_attempts": "probe (one request per case)",
                               "timeout_s": "probe (--timeout)"}
        self._http = http_client
        self._cancel = asyncio.Event()
        # As the step loop counts them: one error body seen again across the execution.
        self._error_counts: Counter[ErrorSignature] = Counter()

    def cancel(self) -> None:
        """Stop now: a request in flight is abandoned and no further case is sent."""
        self._cancel.set()

    def snapshot(self) -> Plan:
        """The plan recorded with the execution: the target's tool and capability, one step per
        case (parameters as sent; an unreadable body has none), config `max_attempts` 1."""
        step = self.target.step
        steps = tuple(StepSpec(case.step_id, step.tool, step.capability, dict(case.parameters),
                               instruction=f"probe: {case.name}") for case in self.cases)
        config = {**self.target.plan.config, "max_attempts": 1, "timeout_s": self.timeout_s}
        return Plan(
            query=f"probe {self.target.capability.key}: deliberately bad requests",
            tools={step.tool: self.target.plan.tools[step.tool]},
            capabilities={self.target.capability.key: self.target.capability},
            steps=steps, config=config, source_path=self.target.plan.source_path,
        )  # fmt: skip

    async def run(self) -> ProbeOutcome:
        """Send every case (until cancelled) and return the graded results."""
        outcome = ProbeOutcome(self.execution_id, self.target, skipped=self.skipped)
        snapshot = self.snapshot()
        self._emit(ExecutionStarted(
            execution_id=self.execution_id, started_at=self.clock(), query=snapshot.query,
            plan_path=snapshot.source_path, plan=snapshot.to_dict(),
            config=self.config.to_dict(),
            config_sources=dict(self.config_sources),
            llm=None, tool_version=__version__,
            labels={PROBE_LABEL: self.target.capability.key},
        ))  # fmt: skip
        owns_http = self._http is None
        http = self._http or httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout_s), follow_redirects=False,
            verify=default_tls_context(),
        )
        try:
            for case in self.cases:
                if self._cancel.is_set():
                    break
                outcome.results.append(await self._probe(http, snapshot, case))
        finally:
            if owns_http:
                await http.aclose()
        outcome.cancelled = self._cancel.is_set()
        succeeded = sum(1 for r in outcome.results if r.decision.action is Action.SUCCESS)
        if outcome.cancelled:
            outcome.status = "cancelled"
        elif succeeded == len(self.cases):
            outcome.status = "succeeded"
        else:
            outcome.status = "partial" if succeeded else "failed"
        accepted = {r.case.step_id for r in outcome.results if r.decision.action is Action.SUCCESS}
        incomplete = tuple(case.step_id for case in self.cases if case.step_id not in accepted)
        self._emit(ExecutionFinished(
            execution_id=self.execution_id, finished_at=self.clock(), status=outcome.status,
            stop_reason="cancelled" if outcome.cancelled else None,
            incomplete_steps=incomplete, llm_calls=0, llm_total_tokens=0,
        ))
        return outcome

    async def _probe(self, http: httpx.AsyncClient, snapshot: Plan, case: ProbeCase) -> ProbeResult:
        target, step_id = self.target, case.step_id
        step = snapshot.step(step_id)
        self._emit(StepStarted(
            execution_id=self.execution_id, step_id=step_id, started_at=self.clock(),
            tool=step.tool, capability=step.capability, url=target.url, depends_on=(),
            parameters=dict(case.parameters), protected_keys={},
            orchestrator=target.capability.orchestrator,
            side_effects=target.capability.side_effects,
        ))
        headers = tool_request_headers(snapshot, step, self.env, self.execution_id)
        headers.update(attempt_headers(self.recorder, self.execution_id, step_id, 1))
        self._emit(AttemptDispatched(
            execution_id=self.execution_id, step_id=step_id, n=1, attempt_number=1,
            at=self.clock(), method="POST", url=target.url, request_headers=dict(headers),
            request_body=case.body, parameters=dict(case.parameters), correction_layer=None,
        ))
        progress = _Progress()
        answered = await self._send(
            self._post(http, target.url, case.body, headers, progress.trace), progress
        )
        self._emit(AttemptResponded(
            execution_id=self.execution_id, step_id=step_id, n=1, at=self.clock(),
            elapsed_ms=answered.elapsed_ms, status=answered.status,
            response_headers=answered.headers, response_body=answered.body,
            transport_error=answered.transport_error,
            transport_error_message=answered.transport_error_message,
            retry_policy=str(answered.envelope.retry_policy),
        ))
        signature = error_signature(step, answered)
        if signature is not None:
            self._error_counts[signature] += 1
        decision = decide(_decision_inputs(
            self.config, target.capability, case, answered, now=self.clock(), tool=step.tool,
            repeated_error_count=0 if signature is None else self._error_counts[signature],
            cancelled=self._cancel.is_set(),
        ))
        self._emit(AttemptDecided(
            execution_id=self.execution_id, step_id=step_id, n=1, at=self.clock(),
            dispatched=True, parameters=dict(case.parameters), decision=decision,
        ))
        success = decision.action is Action.SUCCESS
        self._emit(StepFinished(
            execution_id=self.execution_id, step_id=step_id, finished_at=self.clock(),
            status="succeeded" if success else "failed",
            dispatch_count=0 if answered.transport_error == "connect" else 1, attempts=1,
            validation_retries=0, semantic_retries=0, final_action=str(decision.action),
            final_rule_id=decision.rule_id, error=None if success else step_error_text(answered),
            result=answered.envelope.json_value if success else None,
        ))  # fmt: skip
        return ProbeResult(case, answered, decision, tuple(grade_probe(case, answered)))

    async def _post(
        self, http: httpx.AsyncClient, url: str, body: bytes, headers: Mapping[str, str],
        trace: Callable[[str, dict[str, Any]], Awaitable[None]],
    ) -> tuple[httpx.Response, bytes]:
        """POST and read the answer as the executor does (`send_and_read`)."""
        request = http.build_request("POST", url, content=body, headers=dict(headers),
                                     extensions={"trace": trace})  # fmt: skip
        return await send_and_read(http, request, self.config.max_response_body_bytes)

    async def _send(
        self, request: Awaitable[tuple[httpx.Response, bytes]], progress: _Progress
    ) -> HttpOutcome:
        """The answer to `request` within `timeout_s`, or the transport failure; cancellable."""
        started = self.monotonic()
        work = asyncio.ensure_future(asyncio.wait_for(request, timeout=self.timeout_s))
        stop = asyncio.ensure_future(self._cancel.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        elapsed_ms = (self.monotonic() - started) * 1000.0
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            return HttpOutcome(0, {}, b"", elapsed_ms, "cancelled", "probe cancelled in flight")
        error = work.exception()
        if isinstance(error, TimeoutError):
            if progress.traced and not progress.writing:  # as the executor records it
                return HttpOutcome(0, {}, b"", elapsed_ms, "connect",
                                   f"request timed out (--timeout {self.timeout_s:g}) while "
                                   "connecting; nothing was sent")  # fmt: skip
            return HttpOutcome(0, {}, b"", elapsed_ms, "timeout",
                               f"no response within {self.timeout_s:g} s")
        if isinstance(error, httpx.TransportError):
            return HttpOutcome(0, {}, b"", elapsed_ms, classify_transport_error(error),
                               f"request failed: {type(error).__name__}: {error}")
        if error is not None:
            raise error
        response, body = work.result()
        return HttpOutcome(response.status_code, flatten_headers(response.headers), body,
                           elapsed_ms)

    def _emit(self, event: Any) -> None:
        # A recorder failure must not stop the probe (as in the executor).
        with contextlib.suppress(Exception):
            self.recorder.record(event)


class _Progress:
    """httpcore's progress on one request (httpx's `trace` extension): whether it started to
    write the headers, so a timeout before that is a failed connection, as `run` records it."""

    __slots__ = ("traced", "writing")

    def __init__(self) -> None:
        self.traced = False
        self.writing = False

    async def trace(self, name: str, info: dict[str, Any]) -> None:
        self.traced = True
        if name.endswith("send_request_headers.started"):
            self.writing = True
