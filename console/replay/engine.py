"""Replays one recorded step locally against recorded or edited tool responses (SPEC §3.4).

The real executor runs the step over real HTTP to a loopback server that answers dispatch k
with the edited response for k, else the original run's k-th response byte for byte. The
steps it depends on are run too and answered with their recorded successful responses, so its
bindings, protected keys and layer-4 context are exactly those of the original run. LLM layers
are answered from the original run's recorded answers by a loopback OpenAI-compatible server,
by the live endpoint, or are off; backoff waits are jumped over by a virtual clock.
docs/replay.md describes the choices. The setup comes from `console.replay.setup`, the edits
from `console.replay.edits`, the servers from `console.replay.loopback`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import httpx

from console.replay.edits import ReplayResponse
from console.replay.loopback import ReplayRequest, ReplayServer, ReplayTransport, closing_server
from console.replay.setup import LLM_LIVE, LLM_RECORDED, ReplaySetup
from console.words import counted
from executor.events import FanoutRecorder, ListRecorder, LLMCall, NullRecorder, Recorder
from executor.runtime import ExecutionOutcome, PlanExecutor, StepOutcome
from store.queries import AttemptRecord

__all__ = ["SIGNATURE_FIELDS", "Divergence", "ReplayResult", "Replayer", "ServedDispatch"]

_LIVE_LLM_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TRUVAG3_LLM_MODEL")


class _VirtualMonotonic:
    """A monotonic clock that jumps over backoff waits instead of sleeping them."""

    def __init__(self) -> None:
        self.skipped_s = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.skipped_s

    async def sleep(self, seconds: float) -> None:
        self.skipped_s += max(0.0, seconds)
        await asyncio.sleep(0)



# ---------------------------------------------------------------------------------------------
# Running a replay
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServedDispatch:
    """What the replay served to dispatch `number` of the replayed step."""

    number: int
    source: str  # "edited", "recorded" or "unscripted"
    response: str  # e.g. "HTTP 503", "drop (reset)", "none"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"n": self.number, "source": self.source, "response": self.response}


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """How the replay ran: its execution, the replayed step, what was served and what to know."""

    setup: ReplaySetup
    outcome: ExecutionOutcome
    step: StepOutcome | None
    dispatches: tuple[ServedDispatch, ...]
    unscripted_dispatch: int | None
    llm_answers_served: int
    llm_calls_unanswered: tuple[int, ...]
    notes: tuple[str, ...]
    cancelled_by_user: bool = False

    @property
    def execution_id(self) -> str:
        """The replay's own execution id."""
        return self.outcome.execution_id

    @property
    def ran_out(self) -> bool:
        """Whether a dispatch had no recorded or edited response (the replay stopped there) or an
        LLM call had no recorded answer: then its outcome says nothing about the original's."""
        return self.unscripted_dispatch is not None or bool(self.llm_calls_unanswered)

    @property
    def changed(self) -> bool:
        """Whether an attempt (sent, status, action, rule, delay, parameters) or the end differs."""
        original, replayed = self._signatures()
        status = self.step.status if self.step else None
        return original != replayed or status != self.setup.original.status

    @property
    def first_divergence(self) -> Divergence | None:
        """The first attempt in which the replay differs from the original, None when none does."""
        original, replayed = self._signatures()
        for index in range(max(len(original), len(replayed))):
            left = original[index] if index < len(original) else None
            right = replayed[index] if index < len(replayed) else None
            if left == right:
                continue
            if left is None or right is None:
                return Divergence(index + 1, (), missing="original" if left is None else "replay")
            fields = tuple(
                (name, _shown_field(name, was), _shown_field(name, now))
                for name, was, now in zip(SIGNATURE_FIELDS, left, right, strict=True)
                if was != now
            )
            return Divergence(index + 1, fields)
        return None

    def _signatures(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        original = [_signature_of_record(a) for a in self.setup.original.attempts]
        replayed = [_signature_of_summary(a) for a in (self.step.attempts if self.step else ())]
        return original, replayed


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where a replay first differs from the original: attempt `attempt` (1 = first), each
    differing field as (name, original value, replayed value), or the side that `missing` the
    attempt altogether ("original" or "replay")."""

    attempt: int
    fields: tuple[tuple[str, Any, Any], ...]
    missing: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: `{"attempt", "missing", "fields": {name: {"original", "replay"}}}`."""
        return {
            "attempt": self.attempt,
            "missing": self.missing,
            "fields": {name: {"original": was, "replay": now} for name, was, now in self.fields},
        }


# The attempt fields a replay is compared on, in the order of the signatures below.
SIGNATURE_FIELDS = (
    "sent", "status", "transport_error", "action", "rule", "delay_ms", "parameters",
)  # fmt: skip


def _shown_field(name: str, value: Any) -> Any:
    """A signature value as reported: parameters decoded back from their sorted JSON."""
    return json.loads(value) if name == "parameters" else value


def _rounded(delay_ms: float | None) -> float | None:
    return None if delay_ms is None else round(delay_ms, 3)


def _signature_of_record(attempt: AttemptRecord) -> tuple[Any, ...]:
    delay = attempt.delay_ms if attempt.action == "retry_same" else None
    return (
        bool(attempt.dispatched),
        attempt.status,
        attempt.transport_error,
        attempt.action,
        attempt.rule_id,
        _rounded(delay),
        json.dumps(attempt.parameters, sort_keys=True),
    )


def _signature_of_summary(attempt: Any) -> tuple[Any, ...]:
    return (
        attempt.dispatched,
        attempt.status,
        attempt.transport_error,
        attempt.action,
        attempt.rule,
        _rounded(attempt.delay_ms),
        json.dumps(attempt.parameters, sort_keys=True),
    )


class Replayer:
    """Runs one `ReplaySetup`. Construct, then `await run()`; `cancel()` stops it at once."""

    def __init__(
        self,
        setup: ReplaySetup,
        *,
        recorder: Recorder | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.setup = setup
        self.recorder = recorder or NullRecorder()
        self.env = dict(os.environ if env is None else env)
        self._lock = threading.Lock()
        self._dispatches: list[ServedDispatch] = []
        self._llm_requests = 0
        self._llm_unanswered: list[int] = []
        self._unscripted: int | None = None
        self._user_cancelled = False
        self._executor: PlanExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def cancel(self) -> None:
        """Stop the replay at once, as Ctrl-C stops a run."""
        self._user_cancelled = True
        if self._executor is not None:
            self._executor.cancel()

    async def run(self) -> ReplayResult:
        """Start the loopback servers, run the executor against them, and report."""
        setup = self.setup
        self._loop = asyncio.get_running_loop()
        events = ListRecorder()
        clock = _VirtualMonotonic()
        with contextlib.ExitStack() as servers:
            tools = servers.enter_context(closing_server(ReplayServer("tools", self._answer_tool)))
            llm_block = None
            if setup.llm is not None and setup.llm_mode == LLM_RECORDED:
                llm = servers.enter_context(closing_server(ReplayServer("llm", self._answer_llm)))
                llm_block = {**setup.llm, "base_url": f"{llm.base_url}/v1", "api_key": "unused"}
            elif setup.llm is not None:
                llm_block = dict(setup.llm)
            plan = replace(
                setup.plan,
                tools={
                    name: replace(tool, base_url=tools.base_url + _url_path(tool.base_url))
                    for name, tool in setup.plan.tools.items()
                },
                llm=llm_block,
            )
            env: dict[str, str] = {}
            if setup.llm_mode == LLM_LIVE:
                env = {name: self.env[name] for name in _LIVE_LLM_ENV if name in self.env}
            client = httpx.AsyncClient(
                transport=ReplayTransport(),
                timeout=httpx.Timeout(setup.config.timeout_s),
                follow_redirects=False,
            )
            self._executor = PlanExecutor(
                plan, recorder=FanoutRecorder(self.recorder, events), env=env,
                http_client=client, sleep=clock.sleep, monotonic=clock.monotonic,
                config=setup.config,
            )  # fmt: skip
            if self._user_cancelled:
                self._executor.cancel()
            try:
                outcome = await self._executor.run()
            finally:
                await client.aclose()
        return self._result(outcome, events)

    # -- answers, called on server threads ----------------------------------------------------

    def _answer_tool(self, request: ReplayRequest) -> ReplayResponse | None:
        setup = self.setup
        if request.step_id in setup.dependency_responses:
            return setup.dependency_responses[request.step_id]
        if request.step_id != setup.step_id:
            body = json.dumps({"success": False, "error": {
                "code": "NOT_IN_REPLAY", "message": f"step {request.step_id!r} is not replayed",
                "category": "NOT_FOUND", "retryable": False}}).encode()  # fmt: skip
            return ReplayResponse(404, (("Content-Type", "application/json"),), body)
        with self._lock:
            number = len(self._dispatches) + 1
            response = setup.edits.get(number)
            if response is None and number <= len(setup.recorded):
                response = setup.recorded[number - 1]
            if response is None:
                self._dispatches.append(ServedDispatch(number, "unscripted", "none"))
                self._unscripted = number
            else:
                self._dispatches.append(
                    ServedDispatch(number, response.source, response.describe())
                )
        if response is None:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._stop_unscripted)
        return response

    def _stop_unscripted(self) -> None:
        if self._executor is not None:
            self._executor.cancel()

    def _answer_llm(self, request: ReplayRequest) -> ReplayResponse | None:
        answers = self.setup.llm_answers
        with self._lock:
            self._llm_requests += 1
            number = self._llm_requests
            if number <= len(answers):
                return answers[number - 1].response
            self._llm_unanswered.append(number)
        message = (
            f"truva-console replay: LLM call {number} has no recorded answer "
            f"({len(answers)} recorded); use --llm live to ask a model"
        )
        body = json.dumps(
            {"error": {"message": message, "type": "replay_exhausted", "param": None, "code": None}}
        ).encode()
        # 404, not 5xx: a missing answer is not an outage, so the executor does not retry it.
        return ReplayResponse(404, (("Content-Type", "application/json"),), body)

    # -- the report ---------------------------------------------------------------------------

    def _result(self, outcome: ExecutionOutcome, events: ListRecorder) -> ReplayResult:
        setup = self.setup
        step = next((s for s in outcome.steps if s.id == setup.step_id), None)
        notes = list(setup.notes)
        made = len(self._dispatches)
        if self._unscripted is not None:
            notes.append(
                f"no recorded response for dispatch {self._unscripted}; pass "
                f"--response {self._unscripted}=FILE (the replay stopped there)"
            )
        unused = [n for n in setup.edits if n > made]
        if unused:
            listed = ", ".join(str(n) for n in unused)
            responses = "edited response" if len(unused) == 1 else "edited responses"
            dispatch = "dispatch" if len(unused) == 1 else "dispatches"
            notes.append(
                f"{responses} for {dispatch} {listed} not used: the replay made "
                f"{counted(made, 'dispatch', 'dispatches')}"
            )
        for number in self._llm_unanswered:
            notes.append(
                f"LLM call {number} had no recorded answer; the replay LLM server "
                "answered HTTP 404 (use --llm live to ask a model)"
            )
        calls = [e for e in events.events
                 if isinstance(e, LLMCall) and e.step_id == setup.step_id]  # fmt: skip
        served = min(self._llm_requests, len(setup.llm_answers))
        for index, (call, answer) in enumerate(zip(calls, setup.llm_answers, strict=False), 1):
            if answer.site and call.site != answer.site:
                notes.append(
                    f"LLM call {index} asked {call.site} but the recorded answer "
                    f"was for {answer.site}"
                )
        if setup.llm_mode == LLM_RECORDED and served < len(setup.llm_answers):
            unasked = len(setup.llm_answers) - served
            verb = "was" if unasked == 1 else "were"
            notes.append(f"{counted(unasked, 'recorded LLM answer')} {verb} not asked for")
        return ReplayResult(
            setup=setup,
            outcome=outcome,
            step=step,
            dispatches=tuple(self._dispatches),
            unscripted_dispatch=self._unscripted,
            llm_answers_served=served,
            llm_calls_unanswered=tuple(self._llm_unanswered),
            notes=tuple(notes),
            cancelled_by_user=self._user_cancelled,
        )


def _url_path(base_url: str) -> str:
    """The path part of a tool's base_url, kept so each capability's URL path is unchanged."""
    return urlsplit(base_url).path.rstrip("/")
