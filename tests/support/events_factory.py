"""Realistic synthetic executor event sequences for store tests, and a recording child process.

`realistic_execution()` tells the story of one partial run: a 429 retried after Retry-After,
a 400 corrected by the analyzer, a 401 that stops, a dependent step skipped, and a step
rejected before dispatch. `small_execution()` is a quick variant for load and crash tests.
Run as `python -m tests.support.events_factory --db PATH ...` to record from another process.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from executor.events import (
    AttemptDecided,
    AttemptDispatched,
    AttemptResponded,
    BackoffEvent,
    CircuitStateChanged,
    Event,
    ExecutionFinished,
    ExecutionStarted,
    LLMCall,
    Notice,
    ParametersCoerced,
    StepFinished,
    StepStarted,
)
from executor.policy import Decision

START_AT = 1_767_225_600.0  # 2026-01-01T00:00:00Z
SECRET = "sk-live-TOPSECRET-0123456789abcdef"
NON_UTF8_BODY = b"\xff\xfe\x00binary"
TOOL_VERSION = "0.1.0-test"

PLAN: dict[str, Any] = {
    "query": "Plan a trip to Paris and bill the customer",
    "tools": {
        "weather": {"base_url": "http://127.0.0.1:8101"},
        "crm": {"base_url": "http://127.0.0.1:8102"},
        "billing": {"base_url": "http://127.0.0.1:8103"},
        "geo": {"base_url": "http://127.0.0.1:8104"},
    },
    "steps": [
        {"id": "step-1", "tool": "weather", "capability": "forecast",
         "parameters": {"city": "Paris", "days": "3"}, "depends_on": []},
        {"id": "step-2", "tool": "crm", "capability": "create_contact",
         "parameters": {"name": "Ada", "age": "thirty"}, "depends_on": []},
        {"id": "step-3", "tool": "billing", "capability": "charge",
         "parameters": {"amount": 120, "currency": "EUR"}, "depends_on": []},
        {"id": "step-4", "tool": "billing", "capability": "receipt",
         "parameters": {"charge_id": "{{step-3.data.id}}"}, "depends_on": ["step-3"]},
        {"id": "step-5", "tool": "geo", "capability": "lookup",
         "parameters": {"country": "FR"}, "depends_on": []},
    ],
    "config": {"max_attempts": 3},
}  # fmt: skip

CONFIG: dict[str, Any] = {
    "max_attempts": 3,
    "initial_delay_ms": 500,
    "max_delay_ms": 10000,
    "backoff_factor": 2.0,
    "jitter": True,
    "max_validation_retries": 2,
    "max_semantic_retries": 2,
    "error_analyzer_enabled": True,
}


def new_execution_id() -> str:
    """A fresh execution id like the executor's."""
    return str(uuid.uuid4())


def _inputs(**overrides: Any) -> dict[str, Any]:
    inputs = {
        "dispatched": True,
        "status": 200,
        "transport_error": None,
        "retry_policy": "unspecified",
        "guard_violations": [],
        "attempt_number": 1,
        "max_attempts": 3,
        "validation_retries": 0,
        "max_validation_retries": 2,
        "max_semantic_retries": 2,
        "orchestrator": False,
        "side_effects": "none",
        "protected_keys": {},
        "has_dependencies": False,
        "llm_configured": True,
    }
    inputs.update(overrides)
    return inputs


def decision(
    action: str,
    rule_id: str,
    reason: str,
    *,
    not_matched: tuple[tuple[str, str], ...] = (),
    delay_ms: float | None = None,
    delay_source: str | None = None,
    layer: str | None = None,
    corrected_parameters: dict[str, Any] | None = None,
    **inputs: Any,
) -> Decision:
    """A decision as the executor reports it, built from its `Decision.to_dict()` form."""
    return Decision.from_dict({
        "action": action,
        "rule_id": rule_id,
        "reason": reason,
        "inputs": _inputs(**inputs),
        "not_matched": [{"rule_id": rid, "reason": why} for rid, why in not_matched],
        "delay_ms": delay_ms,
        "delay_source": delay_source,
        "layer": layer,
        "corrected_parameters": corrected_parameters,
    })


@dataclass
class ExecutionScript:
    """Appends events for one execution, advancing a fake clock by a few milliseconds each."""

    execution_id: str
    now: float = START_AT
    events: list[Event] = field(default_factory=list)

    def tick(self, seconds: float = 0.005) -> float:
        self.now += seconds
        return self.now

    def start(self, plan: dict[str, Any], *, secret: str = SECRET) -> None:
        self.events.append(
            ExecutionStarted(
                execution_id=self.execution_id,
                started_at=self.tick(),
                query=plan["query"],
                plan_path="plans/trip.json",
                plan=plan,
                config=CONFIG,
                config_sources={"max_attempts": "plan"},
                llm={
                    "base_url": "http://127.0.0.1:8200/v1",
                    "model": "gpt-test",
                    "api_key": secret,
                },
                tool_version=TOOL_VERSION,
            )
        )

    def step_started(
        self, step: dict[str, Any], *, protected: dict[str, str] | None = None
    ) -> None:
        self.events.append(
            StepStarted(
                execution_id=self.execution_id,
                step_id=step["id"],
                started_at=self.tick(),
                tool=step["tool"],
                capability=step["capability"],
                url=f"http://127.0.0.1:8101/capabilities/{step['capability']}",
                depends_on=tuple(step["depends_on"]),
                parameters=step["parameters"],
                protected_keys=protected or {},
                orchestrator=False,
                side_effects="none",
            )
        )

    def attempt(
        self,
        step: dict[str, Any],
        n: int,
        *,
        parameters: dict[str, Any],
        status: int,
        response_body: bytes,
        decided: Decision,
        attempt_number: int | None = None,
        response_headers: dict[str, str] | None = None,
        correction_layer: str | None = None,
        secret: str = SECRET,
        transport_error: str | None = None,
    ) -> None:
        """Dispatch, response and decision of one attempt."""
        request_body = json.dumps(parameters).encode()
        self.events.append(
            AttemptDispatched(
                execution_id=self.execution_id,
                step_id=step["id"],
                n=n,
                attempt_number=attempt_number or n,
                at=self.tick(),
                method="POST",
                url=f"http://127.0.0.1:8101/capabilities/{step['capability']}",
                request_headers={
                    "Content-Type": "application/json",
                    "Authorization": f"Bearer {secret}",
                    "X-Api-Key": secret,
                },
                request_body=request_body,
                parameters=parameters,
                correction_layer=correction_layer,
            )
        )
        self.events.append(
            AttemptResponded(
                execution_id=self.execution_id,
                step_id=step["id"],
                n=n,
                at=self.tick(0.012),
                elapsed_ms=12.0,
                status=status,
                response_headers=response_headers or {"Content-Type": "application/json"},
                response_body=response_body,
                transport_error=transport_error,
                transport_error_message=None if transport_error is None else "connection reset",
                retry_policy=decided.inputs["retry_policy"],
            )
        )
        self.events.append(
            AttemptDecided(
                execution_id=self.execution_id,
                step_id=step["id"],
                n=n,
                at=self.tick(0.001),
                dispatched=True,
                parameters=parameters,
                decision=decided,
            )
        )

    def backoff(self, step_id: str, n: int, planned_ms: float, source: str) -> None:
        for phase in ("planned", "started", "finished"):
            actual_ms = planned_ms + 0.4 if phase == "finished" else None
            self.events.append(
                BackoffEvent(
                    execution_id=self.execution_id,
                    step_id=step_id,
                    n=n,
                    at=self.tick(planned_ms / 1000 if phase == "finished" else 0.0001),
                    phase=phase,
                    planned_ms=planned_ms,
                    source=source,
                    actual_ms=actual_ms,
                )
            )

    def step_finished(self, step_id: str, status: str, **fields: Any) -> None:
        values: dict[str, Any] = {
            "dispatch_count": 0,
            "attempts": 0,
            "validation_retries": 0,
            "semantic_retries": 0,
            "final_action": None,
            "final_rule_id": None,
            "error": None,
            "result": None,
        }
        values.update(fields)
        self.events.append(
            StepFinished(
                execution_id=self.execution_id,
                step_id=step_id,
                finished_at=self.tick(),
                status=status,
                **values,
            )
        )

    def finish(self, status: str, *, incomplete: tuple[str, ...] = (), llm_calls: int = 0,
               tokens: int = 0, stop_reason: str | None = None) -> None:  # fmt: skip
        self.events.append(
            ExecutionFinished(
                execution_id=self.execution_id,
                finished_at=self.tick(),
                status=status,
                stop_reason=stop_reason,
                incomplete_steps=incomplete,
                llm_calls=llm_calls,
                llm_total_tokens=tokens,
            )
        )


def analyzer_messages(prompt_extra: str = "") -> tuple[dict[str, Any], ...]:
    """The messages of an error-analysis LLM call."""
    return (
        {"role": "system", "content": "You analyze failed tool calls. Answer JSON only."},
        {
            "role": "user",
            "content": "HTTP 400 from crm.create_contact: age must be an integer.\n"
            'Original request: {"name": "Ada", "age": "thirty"}' + prompt_extra,
        },
    )


ANALYZER_ANSWER = (
    '{"should_retry": true, "reason": "age must be an integer", '
    '"suggested_changes": {"age": 30}, "is_transient_error": false}'
)


def realistic_execution(
    execution_id: str | None = None,
    *,
    start_at: float = START_AT,
    secret: str = SECRET,
    binary_body: bytes = NON_UTF8_BODY,
    prompt_extra: str = "",
    llm_raw_text: str = ANALYZER_ANSWER,
    finish: bool = True,
) -> list[Event]:
    """Every event of one partial execution of PLAN (see the module docstring)."""
    script = ExecutionScript(execution_id or new_execution_id(), now=start_at)
    steps = {step["id"]: step for step in PLAN["steps"]}
    script.start(PLAN, secret=secret)

    # step-1: 429 with Retry-After, retried unchanged, then 200.
    step = steps["step-1"]
    params = {"city": "Paris", "days": 3}
    script.step_started(step)
    script.events.append(
        ParametersCoerced(
            execution_id=script.execution_id, step_id="step-1", n=1, at=script.tick(),
            coercions=({"key": "days", "from": "string", "to": "integer", "value": 3},),
        )
    )  # fmt: skip
    script.attempt(
        step, 1, parameters=params, status=429,
        response_body=b'{"success":false,"error":{"code":"RATE_LIMIT","message":"slow down",'
        b'"category":"RATE_LIMIT"}}',
        response_headers={"Content-Type": "application/json", "Retry-After": "1"},
        decided=decision(
            "retry_same", "transient.retry_same", "HTTP 429 is transient; 2 attempts left",
            not_matched=(("success.2xx", "HTTP 429 is not 2xx"),
                         ("refused.explicit_false", "retryable is unspecified"),
                         ("terminal.auth_or_method", "HTTP 429 is not 401, 403 or 405")),
            delay_ms=1000.0, delay_source="retry_after_header", status=429,
        ),
    )  # fmt: skip
    script.backoff("step-1", 1, 1000.0, "retry_after_header")
    script.attempt(
        step, 2, parameters=params, status=200,
        response_body=b'{"success":true,"data":{"forecast":"sunny"}}',
        decided=decision("success", "success.2xx", "HTTP 200 is a success", status=200,
                         attempt_number=2),
    )  # fmt: skip
    script.step_finished(
        "step-1", "succeeded", dispatch_count=2, attempts=2, final_action="success",
        final_rule_id="success.2xx", result={"forecast": "sunny"},
    )  # fmt: skip

    # step-2: 400 corrected by the analyzer, then 200.
    step = steps["step-2"]
    script.step_started(step)
    bad = {"name": "Ada", "age": "thirty"}
    good = {"name": "Ada", "age": 30}
    script.attempt(
        step, 1, parameters=bad, status=400,
        response_body=b'{"success":false,"error":{"code":"INPUT_ERROR",'
        b'"message":"age must be an integer","category":"INPUT_ERROR"}}',
        decided=decision(
            "retry_corrected", "analyzer.accept", "analyzer correction accepted (attempt--)",
            not_matched=(("transient.retry_same", "HTTP 400 is not transient"),
                         ("budget.corrections", "0 of 2 corrections used")),
            layer="analyzer", corrected_parameters=good, status=400,
        ),
    )  # fmt: skip
    messages = analyzer_messages(prompt_extra)
    request_body = json.dumps({"model": "gpt-test", "messages": list(messages)}).encode()
    response_body = json.dumps(
        {"choices": [{"message": {"role": "assistant", "content": llm_raw_text}}],
         "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}}
    ).encode()  # fmt: skip
    script.events.append(
        LLMCall(
            execution_id=script.execution_id, step_id="step-2", n=1,
            call_id=f"{script.execution_id}-llm-1", site="error_analysis", at=script.tick(0.8),
            latency_ms=800.0, base_url="http://127.0.0.1:8200/v1", model="gpt-test",
            temperature=0.0, max_tokens=1024, messages=messages, request_body=request_body,
            response_status=200, response_body=response_body, raw_text=llm_raw_text,
            parsed={"should_retry": True, "suggested_changes": {"age": 30}},
            parse_error=None, error=None, prompt_tokens=120, completion_tokens=30,
            total_tokens=150,
            response_headers={"x-request-id": "req-llm-1", "content-type": "application/json"},
        )
    )  # fmt: skip
    script.attempt(
        step, 2, parameters=good, status=200, attempt_number=1, correction_layer="analyzer",
        response_body=b'{"success":true,"data":{"id":"c-1"}}',
        decided=decision("success", "success.2xx", "HTTP 200 is a success", status=200,
                         validation_retries=1),
    )  # fmt: skip
    script.step_finished(
        "step-2", "succeeded", dispatch_count=2, attempts=2, validation_retries=1,
        final_action="success", final_rule_id="success.2xx", result={"id": "c-1"},
    )  # fmt: skip

    # step-3: 401 stops at once; the body is not UTF-8.
    step = steps["step-3"]
    script.step_started(step)
    script.attempt(
        step, 1, parameters=step["parameters"], status=401, response_body=binary_body,
        decided=decision(
            "stop_terminal", "terminal.auth_or_method", "HTTP 401 is terminal",
            not_matched=(("success.2xx", "HTTP 401 is not 2xx"),
                         ("refused.explicit_false", "retryable is unspecified")),
            status=401,
        ),
    )  # fmt: skip
    script.step_finished(
        "step-3", "failed", dispatch_count=1, attempts=1, final_action="stop_terminal",
        final_rule_id="terminal.auth_or_method", error="HTTP 401 is terminal",
    )  # fmt: skip

    # step-4 never starts: its dependency failed.
    script.step_finished("step-4", "skipped", skip_reason="dependency step-3 failed")

    # step-5: rejected before any dispatch.
    step = steps["step-5"]
    script.step_started(step)
    script.events.append(
        Notice(
            execution_id=script.execution_id, step_id="step-5", n=1, at=script.tick(),
            name="guard.rejected", message="required key 'city' is missing",
            attrs={"violations": ["missing required key 'city'"]},
        )
    )  # fmt: skip
    script.events.append(
        AttemptDecided(
            execution_id=script.execution_id, step_id="step-5", n=1, at=script.tick(),
            dispatched=False, parameters=step["parameters"],
            decision=decision(
                "reject_predispatch", "guard.reject_predispatch",
                "pre-dispatch guard: missing required key 'city'",
                not_matched=(("circuit.open", "circuit closed or not enabled"),),
                dispatched=False, status=None,
                guard_violations=["missing required key 'city'"],
            ),
        )
    )  # fmt: skip
    script.step_finished(
        "step-5", "rejected", final_action="reject_predispatch",
        final_rule_id="guard.reject_predispatch", error="missing required key 'city'",
    )  # fmt: skip
    script.events.append(
        CircuitStateChanged(
            breaker="billing", at=script.tick(), from_state="closed", to_state="open",
            reason="5 failures in a row", execution_id=script.execution_id,
        )
    )  # fmt: skip
    if finish:
        script.finish("partial", incomplete=("step-3", "step-4", "step-5"), llm_calls=1, tokens=150)
    return script.events


REALISTIC_COUNTS = {"steps": 5, "attempts": 6, "llm_calls": 1, "events": 7}


def small_execution(
    execution_id: str | None = None, *, steps: int = 3, start_at: float = START_AT
) -> list[Event]:
    """A quick succeeded execution: `steps` steps, each a 503 retried once then a 200."""
    plan = {
        "query": "small",
        "tools": {"t": {"base_url": "http://127.0.0.1:8101"}},
        "steps": [
            {"id": f"step-{i}", "tool": "t", "capability": "c", "parameters": {"i": i},
             "depends_on": []}
            for i in range(1, steps + 1)
        ],
    }  # fmt: skip
    script = ExecutionScript(execution_id or new_execution_id(), now=start_at)
    script.start(plan)
    for step in plan["steps"]:
        script.step_started(step)
        script.attempt(
            step, 1, parameters=step["parameters"], status=503,
            response_body=b'{"success":false}',
            decided=decision("retry_same", "transient.retry_same", "HTTP 503 is transient",
                             delay_ms=542.0735, delay_source="backoff", status=503),
        )  # fmt: skip
        script.backoff(step["id"], 1, 542.0735, "backoff")
        script.attempt(
            step, 2, parameters=step["parameters"], status=200,
            response_body=b'{"success":true}',
            decided=decision("success", "success.2xx", "HTTP 200 is a success", status=200),
        )  # fmt: skip
        script.step_finished(
            step["id"], "succeeded", dispatch_count=2, attempts=2, final_action="success",
            final_rule_id="success.2xx",
        )  # fmt: skip
    script.finish("succeeded")
    return script.events


def exhausted_execution(
    execution_id: str | None = None, *, start_at: float = START_AT
) -> list[Event]:
    """A failed execution: one step gets 503, a connect error, 503, and runs out of attempts."""
    step = {"id": "step-1", "tool": "inventory", "capability": "reserve",
            "parameters": {"sku": "A-1", "quantity": 2}, "depends_on": []}  # fmt: skip
    plan = {"query": "reserve stock", "tools": {"inventory": {"base_url": "http://127.0.0.1:8105"}},
            "steps": [step]}  # fmt: skip
    script = ExecutionScript(execution_id or new_execution_id(), now=start_at)
    script.start(plan)
    script.step_started(step)
    outcomes = (
        (503, None, "retry_same", "transient.retry_same", "HTTP 503 is transient; 2 attempts left"),
        (0, "connect", "retry_same", "transient.retry_same", "connect error is transient"),
        (503, None, "stop_budget", "budget.attempts", "HTTP 503 is transient; no attempts left"),
    )
    for n, (status, transport_error, action, rule_id, reason) in enumerate(outcomes, start=1):
        delay_ms = 542.0735 * n if action == "retry_same" else None
        script.attempt(
            step, n, parameters=step["parameters"], status=status,
            response_body=b"" if transport_error else b'{"success":false}',
            transport_error=transport_error,
            decided=decision(action, rule_id, reason, delay_ms=delay_ms,
                             delay_source="backoff" if delay_ms else None, status=status,
                             attempt_number=n, transport_error=transport_error),
        )  # fmt: skip
        if delay_ms:
            script.backoff("step-1", n, delay_ms, "backoff")
    script.step_finished(
        "step-1", "failed", dispatch_count=3, attempts=3, final_action="stop_budget",
        final_rule_id="budget.attempts", error="HTTP 503 is transient; no attempts left",
    )  # fmt: skip
    script.finish("failed", incomplete=("step-1",), stop_reason="step-1 ran out of attempts")
    return script.events


def _record_main(argv: list[str]) -> int:
    """Record executions into `--db` from this process, reporting progress on stdout.

    Prints `ready` once the recorder exists and `recorded <id>` after each execution. With
    `--hold`, records the start and first attempt of one more execution, prints
    `holding <id>`, and finishes it after reading a line from stdin.
    """
    from store.recorder import StoreRecorder

    parser = argparse.ArgumentParser(prog="events_factory")
    parser.add_argument("--db", required=True)
    parser.add_argument("--executions", type=int, default=10)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--flush-interval", type=float, default=0.25)
    parser.add_argument("--lock-timeout", type=float, default=2.0)
    parser.add_argument("--db-interval", type=float, default=1.0)
    parser.add_argument("--event-pace-s", type=float, default=0.0, help="pause after each event")
    parser.add_argument("--pace-s", type=float, default=0.0, help="pause between executions")
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--progress-every-event", action="store_true")
    args = parser.parse_args(argv)
    recorder = StoreRecorder(
        args.db,
        batch_size=args.batch_size,
        flush_interval_s=args.flush_interval,
        db_interval_s=args.db_interval,
        lock_timeout_s=args.lock_timeout,
    )
    print("ready", flush=True)
    for index in range(args.executions):
        if index and args.pace_s:
            time.sleep(args.pace_s)
        events = small_execution(steps=args.steps, start_at=START_AT + index)
        for event in events:
            recorder.record(event)
            if args.progress_every_event:
                print("event", flush=True)
            if args.event_pace_s:
                time.sleep(args.event_pace_s)
        print("recorded", events[0].execution_id, flush=True)
    if args.hold:
        events = small_execution(steps=1, start_at=START_AT + args.executions)
        first_attempt_end = 5  # started, step started, dispatched, responded, decided
        for event in events[:first_attempt_end]:
            recorder.record(event)
        print("holding", events[0].execution_id, flush=True)
        sys.stdin.readline()
        for event in events[first_attempt_end:]:
            recorder.record(event)
    recorder.close()
    print("closed", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_record_main(sys.argv[1:]))


def one_attempt_execution(
    execution_id: str, query: str, bodies: list[bytes], *, decided: Decision | None = None
) -> list[Any]:
    """A succeeded execution of one-attempt crm steps, step-s answering HTTP 200 with bodies[s]
    (each decided by `decided`, by default a success decision with few inputs)."""
    plan_steps = [{"id": f"step-{s}", "tool": "crm", "capability": "lookup",
                   "parameters": {"n": s}, "depends_on": []}
                  for s in range(len(bodies))]  # fmt: skip
    script = ExecutionScript(execution_id)
    script.start({"query": query, "steps": plan_steps,
                  "tools": {"crm": {"base_url": "http://127.0.0.1:8102"}}})  # fmt: skip
    for step, body in zip(plan_steps, bodies, strict=True):
        script.step_started(step)
        script.attempt(
            step,
            1,
            parameters=step["parameters"],
            status=200,
            response_body=body,
            decided=decided or decision("success", "success.2xx", "HTTP 200 is a success"),
        )
        script.step_finished(step["id"], "succeeded", dispatch_count=1, attempts=1,
                             final_action="success", final_rule_id="success.2xx")  # fmt: skip
    script.finish("succeeded")
    return script.events
