"""`truva-console explain`: per attempt, what was sent, what came back, and why it was routed."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from typing import Any

from console.exits import fail
from console.printable import printable
from console.render.decision import split_inputs
from console.render.formats import format_duration, format_time
from console.render.request_diff import RequestDiff, diff_lines, request_diffs
from console.render.timeline import LEGEND, execution_timeline, step_timeline
from console.render.warnings import attempt_warnings
from console.words import counted, reached_wire, received_text, sent_parameters
from store.connection import resolve_db_path
from store.errors import StoreError
from store.queries import (
    AttemptRecord,
    EventRecord,
    ExecutionDetail,
    LLMCallRecord,
    StepRecord,
    body_view,
    open_store,
    to_jsonable,
)

_INDENT = "    "
_LABEL_WIDTH = 12
_WRAP_WIDTH = 88


def add_parser(subparsers: Any) -> None:
    """Register `explain` on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "explain",
        help="explain an execution attempt by attempt",
        description="Show, for every attempt, what was sent, what came back, the decision with "
        "its rule, reason and inputs, the rules that did not match, LLM calls and backoff.",
    )
    parser.add_argument("execution", metavar="EXECUTION", help="execution id, or a unique prefix")
    parser.add_argument("step", metavar="STEP", nargs="?", help="only this step")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--timeline", action="store_true",
                        help="draw the attempts, LLM calls and backoff waits on one time axis "
                             "(the execution, then each step) instead of the full explanation")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Explain one execution; 0 on success, 2 with one line on stderr for bad input."""
    try:
        store = open_store(resolve_db_path(getattr(args, "db", None)))
        detail = store.get_execution(args.execution)
        steps = (detail.step(args.step),) if args.step else detail.steps
    except StoreError as error:
        return fail(error)
    if getattr(args, "timeline", False) and not args.json:
        sys.stdout.write(printable(render_timelines(detail, steps)))
    elif args.json:
        json.dump(explain_document(detail, steps), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(printable(render_explain(detail, steps)))
    return 0


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------


def explain_document(detail: ExecutionDetail, steps: tuple[StepRecord, ...]) -> dict[str, Any]:
    """The explanation as JSON-able data: execution, then steps with their attempts."""
    return {
        "execution": to_jsonable(detail.execution),
        "plan": detail.plan,
        "config": detail.config,
        "llm": detail.llm,
        "steps": [_step_document(step) for step in steps],
        "events": [to_jsonable(event) for event in detail.events],
        "llm_calls": [to_jsonable(call) for call in detail.llm_calls],
    }


def _step_document(step: StepRecord) -> dict[str, Any]:
    return {
        "step_id": step.step_id,
        "tool": step.tool,
        "capability": step.capability,
        "status": step.status,
        "depends_on": list(step.depends_on),
        "parameters": step.parameters,
        "protected_keys": step.protected_keys,
        "side_effects": step.side_effects,
        "orchestrator": step.orchestrator,
        "dispatch_count": step.dispatch_count,
        "attempts_count": step.attempts_count,
        "validation_retries": step.validation_retries,
        "semantic_retries": step.semantic_retries,
        "final_action": step.final_action,
        "final_rule_id": step.final_rule_id,
        "error": step.error,
        "skip_reason": step.skip_reason,
        "result": step.result,
        "started_at": step.started_at,
        "finished_at": step.finished_at,
        "attempts": [_attempt_document(attempt) for attempt in step.attempts],
        "request_diffs": [_diff_document(diff) for diff in request_diffs(step)],
        "events": [to_jsonable(event) for event in step.events],
        "llm_calls": [to_jsonable(call) for call in step.llm_calls],
    }


def _diff_document(diff: RequestDiff) -> dict[str, Any]:
    return {
        "before": diff.before,
        "after": diff.after,
        "layer": diff.layer,
        "proposed_by": diff.proposed_by.call_id if diff.proposed_by else None,
        "changes": [to_jsonable(change) for change in diff.changes],
    }


def _attempt_document(attempt: AttemptRecord) -> dict[str, Any]:
    decision = attempt.decision if isinstance(attempt.decision, dict) else {}
    return {
        "n": attempt.n,
        "attempt_number": attempt.attempt_number,
        "dispatched": attempt.dispatched,
        "sent": None
        if not attempt.dispatched
        else {
            "method": attempt.method,
            "url": attempt.url,
            "parameters": attempt.parameters,
            "correction_layer": attempt.correction_layer,
            "headers": attempt.request_headers,
            "body": body_view(attempt.request_body),
            "at": attempt.started_at,
        },
        "parameters": attempt.parameters,
        "received": None
        if attempt.responded_at is None
        else {
            "status": attempt.status,
            "transport_error": attempt.transport_error,
            "transport_error_message": attempt.transport_error_message,
            "elapsed_ms": attempt.elapsed_ms,
            "retry_policy": attempt.retry_policy,
            "headers": attempt.response_headers,
            "body": body_view(attempt.response_body),
            "at": attempt.responded_at,
        },
        "decision": None
        if attempt.action is None
        else {
            "action": attempt.action,
            "rule_id": attempt.rule_id,
            "reason": attempt.reason,
            "inputs": decision.get("inputs"),
            "read_inputs": [key for key, _ in split_inputs(attempt.rule_id,
                                                          decision.get("inputs"))[0]],
            "delay_ms": attempt.delay_ms,
            "delay_source": attempt.delay_source,
            "layer": attempt.decision_layer,
            "corrected_parameters": attempt.corrected_parameters,
            "failure_class": decision.get("failure_class"),
            "recovery": decision.get("recovery"),
            "impact": decision.get("impact"),
            "budgets": decision.get("budgets"),
            "layers": decision.get("layers") or [],
            "at": attempt.decided_at,
        },
        "not_matched": decision.get("not_matched") or [],
        "contract_warnings": [to_jsonable(warning) for warning in attempt_warnings(attempt)],
        "backoff": to_jsonable(attempt.backoff),
        "llm_calls": [to_jsonable(call) for call in attempt.llm_calls],
        "events": [to_jsonable(event) for event in attempt.events],
    }


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------


class _Lines:
    """Collects labelled, indented lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str = "", *, depth: int = 0) -> None:
        self.lines.append((_INDENT * depth + text).rstrip())

    def field(self, label: str, text: str, *, depth: int) -> None:
        self.add(f"{label.ljust(_LABEL_WIDTH)}{text}", depth=depth)

    def block(self, text: str, *, depth: int) -> None:
        """Multi-line text, every line indented; shown in full."""
        for line in text.splitlines() or [""]:
            self.add(line, depth=depth)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _json_inline(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


def render_timelines(
    detail: ExecutionDetail, steps: tuple[StepRecord, ...], *, width: int | None = None
) -> str:
    """The execution's waterfall (when every step is shown), then each step's, and a legend."""
    width = width or max(60, shutil.get_terminal_size((80, 24)).columns)
    lines = [f"execution {detail.execution.execution_id}  {detail.execution.status}"]
    if len(steps) == len(detail.steps):
        lines += ["", *execution_timeline(detail, width=width)]
    for step in steps:
        lines += ["", *step_timeline(step, width=width)]
    return "\n".join([*lines, "", LEGEND]) + "\n"


def render_explain(detail: ExecutionDetail, steps: tuple[StepRecord, ...]) -> str:
    """The explanation as text: the execution, then each step attempt by attempt."""
    out = _Lines()
    row = detail.execution
    duration = "running" if row.status == "running" else format_duration(row.duration_ms)
    out.add(f"execution {row.execution_id}  {row.status}  started {format_time(row.started_at)}"
            f"  took {duration}")  # fmt: skip
    out.field("query", row.query or "-", depth=1)
    out.field("plan", f"{row.plan_path or '-'}  (tool version {row.tool_version or '-'})", depth=1)
    if row.rerun_of:
        out.field("rerun of", f"{row.rerun_of} (steps that succeeded there were not resent)",
                  depth=1)  # fmt: skip
    out.field(
        "steps",
        f"{max(row.steps_planned, row.steps_total)} planned: {row.steps_succeeded} succeeded, "
        f"{row.steps_failed} failed, {row.steps_rejected} rejected, {row.steps_skipped} skipped, "
        f"{row.steps_unfinished} unfinished",
        depth=1,
    )
    out.field("llm", f"{counted(row.llm_calls, 'call')}, {counted(row.llm_total_tokens, 'token')}",
              depth=1)  # fmt: skip
    if row.stop_reason:
        out.field("stopped", row.stop_reason, depth=1)
    if row.incomplete_steps:
        out.field("incomplete", ", ".join(row.incomplete_steps), depth=1)
    for step in steps:
        out.add()
        _render_step(out, step)
    if (detail.events or detail.llm_calls) and len(steps) == len(detail.steps):
        out.add()
        out.add("outside any step")
        for event in detail.events:
            _render_event(out, event, depth=1)
        for call in detail.llm_calls:
            _render_llm_call(out, call, depth=1)
    return out.text()


def _render_step(out: _Lines, step: StepRecord) -> None:
    name = f"{step.tool}.{step.capability}" if step.tool else "(tool unknown)"
    out.add(f"== step {step.step_id}  {name}  {step.status or 'unknown'}  "
            f"({counted(step.dispatch_count, 'dispatch', 'dispatches')}, "
            f"{counted(len(step.attempts), 'attempt')}, "
            f"{counted(step.validation_retries, 'correction')}, "
            f"{counted(step.semantic_retries, 're-resolution')})")  # fmt: skip
    out.field("depends on", ", ".join(step.depends_on) or "-", depth=1)
    out.field("planned", _json_inline(step.parameters), depth=1)
    for run in sent_parameters(step.attempts):
        label = f"{run.verb} {run.attempts_label}"
        out.add(f"{label.ljust(_LABEL_WIDTH - 1)} {_json_inline(run.parameters)}{run.note}",
                depth=1)  # fmt: skip
    for diff in request_diffs(step):
        if diff.changes:
            head, *changes = diff_lines(diff)
            out.field("changed", head, depth=1)
            for change in changes:
                out.add(change.strip(), depth=1 + 3)
    if step.protected_keys:
        out.field("protected", _json_inline(step.protected_keys), depth=1)
    if (step.side_effects and step.side_effects != "none") or step.orchestrator:
        out.field("contract", f"side effects {step.side_effects}, orchestrator "
                  f"{bool(step.orchestrator)}", depth=1)  # fmt: skip
    if step.final_action:
        out.field("outcome", f"{step.final_action} by rule {step.final_rule_id}", depth=1)
    if step.error:
        out.field("error", step.error, depth=1)
    if step.skip_reason:
        out.field("skipped", step.skip_reason, depth=1)
    if step.result is not None:
        out.field("result", _json_inline(step.result), depth=1)
    for attempt in step.attempts:
        out.add()
        _render_attempt(out, attempt)
    if step.events or step.llm_calls:
        out.add()
        out.add("outside any recorded attempt", depth=1)
        for event in step.events:
            _render_event(out, event, depth=2)
        for call in step.llm_calls:
            _render_llm_call(out, call, depth=2)


def _render_attempt(out: _Lines, attempt: AttemptRecord) -> None:
    decision = attempt.decision if isinstance(attempt.decision, dict) else {}
    inputs = decision.get("inputs") or {}
    counter = f"policy attempt {attempt.attempt_number}"
    if inputs.get("max_attempts") is not None:
        counter += f" of {inputs['max_attempts']}"
    out.add(f"-- attempt {attempt.n} ({counter})", depth=1)
    for event in attempt.events:
        if event.kind != "backoff":
            _render_event(out, event, depth=2)
    if attempt.dispatched:
        _render_sent(out, attempt)
        _render_received(out, attempt)
        for warning in attempt_warnings(attempt):
            out.field("warning", f"⚠ tool contract: {warning.message}", depth=2)
    else:
        out.field("sent", "nothing: the request was not dispatched", depth=2)
        out.field("parameters", _json_inline(attempt.parameters), depth=3)
        if attempt.transport_error:
            got = received_text(False, attempt.status, attempt.transport_error)
            message = attempt.transport_error_message or ""
            out.field("received", f"{got}: {message}".rstrip(": "), depth=2)
    _render_decision(out, attempt, decision, inputs)
    for call in attempt.llm_calls:
        _render_llm_call(out, call, depth=2)
    if attempt.backoff is not None:
        backoff = attempt.backoff
        waited = (
            f"waited {backoff.actual_ms:.1f} ms ({backoff.outcome})"
            if backoff.actual_ms is not None
            else "no end recorded"
        )
        planned = "?" if backoff.planned_ms is None else f"{backoff.planned_ms:.1f}"
        out.field("backoff", f"planned {planned} ms ({backoff.delay_source}), {waited}", depth=2)


def _render_headers(out: _Lines, headers: Any, *, depth: int) -> None:
    if not headers:
        out.field("headers", "-", depth=depth)
        return
    for index, (name, value) in enumerate(dict(headers).items()):
        out.field("headers" if index == 0 else "", f"{name}: {value}", depth=depth)


def _render_body(out: _Lines, body: bytes | None, *, depth: int) -> None:
    view = body_view(body)
    if view is None:
        out.field("body", "none recorded", depth=depth)
        return
    if view["size"] == 0:
        out.field("body", "empty", depth=depth)
        return
    if view["encoding"] == "utf-8":
        out.field("body", f"{view['size']} bytes, UTF-8", depth=depth)
    else:
        out.field("body", f"{view['size']} bytes, not valid UTF-8: shown as base64", depth=depth)
    out.block(view["text"], depth=depth + 1)


def _render_sent(out: _Lines, attempt: AttemptRecord) -> None:
    if reached_wire(attempt.dispatched, attempt.transport_error):
        out.field("sent", f"{attempt.method} {attempt.url}", depth=2)
    else:
        out.field("sent", f"nothing reached the wire: the connection for {attempt.method} "
                  f"{attempt.url} failed", depth=2)  # fmt: skip
    if attempt.correction_layer:
        out.field("corrected", f"parameters from the {attempt.correction_layer} layer", depth=3)
    out.field("parameters", _json_inline(attempt.parameters), depth=3)
    _render_headers(out, attempt.request_headers, depth=3)
    _render_body(out, attempt.request_body, depth=3)


def _render_received(out: _Lines, attempt: AttemptRecord) -> None:
    if attempt.responded_at is None:
        out.field("received", "nothing recorded (no response yet, or the writer stopped)",
                  depth=2)  # fmt: skip
        return
    elapsed = "" if attempt.elapsed_ms is None else f" after {attempt.elapsed_ms:.1f} ms"
    policy = f" (retry policy on the wire: {attempt.retry_policy})" if attempt.retry_policy else ""
    if attempt.transport_error:
        message = attempt.transport_error_message or ""
        out.field("received", f"transport error {attempt.transport_error}{elapsed}: {message}"
                  f"{policy}", depth=2)  # fmt: skip
    else:
        got = received_text(attempt.dispatched, attempt.status, None)
        out.field("received", f"{got}{elapsed}{policy}", depth=2)
    _render_headers(out, attempt.response_headers, depth=3)
    _render_body(out, attempt.response_body, depth=3)


def _render_decision(
    out: _Lines, attempt: AttemptRecord, decision: dict[str, Any], inputs: dict[str, Any]
) -> None:
    if attempt.action is None:
        out.field("decision", "none recorded", depth=2)
        return
    layer = f" (layer {attempt.decision_layer})" if attempt.decision_layer else ""
    out.field("decision", f"{attempt.action} by rule {attempt.rule_id}{layer}", depth=2)
    out.field("reason", attempt.reason or "-", depth=3)
    if decision.get("impact"):
        recovery = decision.get("recovery")
        out.field("impact", decision["impact"], depth=3)
        if recovery:
            out.field("recovery", recovery, depth=3)
    budgets = decision.get("budgets") or {}
    if budgets:
        left = ", ".join(
            f"{name.removesuffix('_left').replace('_', ' ')} left "
            f"{'unlimited' if value is None else value}"
            for name, value in budgets.items()
        )
        out.field("budgets", left, depth=3)
    read, rest = split_inputs(attempt.rule_id, inputs)
    for label, pairs in (("read", read), ("inputs", rest)):
        joined = " ".join(f"{key}={value}" for key, value in pairs)
        wrapped = textwrap.wrap(joined, width=_WRAP_WIDTH, break_long_words=False,
                                break_on_hyphens=False)  # fmt: skip
        for index, line in enumerate(wrapped):
            out.field(label if index == 0 else "", line, depth=3)
    if attempt.delay_ms is not None:
        out.field("delay", f"{attempt.delay_ms:.1f} ms ({attempt.delay_source})", depth=3)
    if attempt.corrected_parameters is not None:
        out.field("corrected", _json_inline(attempt.corrected_parameters), depth=3)
    not_matched = decision.get("not_matched") or []
    if not_matched:
        out.field("not matched", "", depth=2)
        for miss in not_matched:
            out.add(f"{miss.get('rule_id')}: {miss.get('reason')}", depth=3)
    layers = decision.get("layers") or []
    if layers:
        out.field("layers", "", depth=2)
        for note in layers:
            verdict = "consulted" if note.get("consulted") else "not consulted"
            out.add(f"{note.get('layer')}: {verdict} — {note.get('detail')}", depth=3)


def _render_llm_call(out: _Lines, call: LLMCallRecord, *, depth: int) -> None:
    tokens = call.tokens_text
    latency = "?" if call.latency_ms is None else f"{call.latency_ms:.0f}"
    out.field("llm call", f"{call.site}  model {call.model}  {call.status_text}  "
              f"{tokens}  latency {latency} ms", depth=depth)  # fmt: skip
    if not call.text_recorded:
        out.field("prompt", call.text_note or "not recorded", depth=depth + 1)
        out.field("raw answer", call.text_note or "not recorded", depth=depth + 1)
    else:
        out.field("prompt", "", depth=depth + 1)
        for message in call.messages or []:
            role = message.get("role", "?") if isinstance(message, dict) else "?"
            content = message.get("content", message) if isinstance(message, dict) else message
            text = content if isinstance(content, str) else _json_inline(content)
            out.add(f"[{role}]", depth=depth + 2)
            out.block(text, depth=depth + 3)
        out.field("raw answer", "" if call.raw_text is not None else "none", depth=depth + 1)
        if call.raw_text is not None:
            out.block(call.raw_text, depth=depth + 2)
    if call.parsed is not None:
        out.field("parsed", _json_inline(call.parsed), depth=depth + 1)
    if call.parse_error:
        out.field("parse error", call.parse_error, depth=depth + 1)
    if call.error:
        out.field("error", call.error, depth=depth + 1)


def _render_event(out: _Lines, event: EventRecord, *, depth: int) -> None:
    attrs = f"  {_json_inline(event.attrs)}" if event.attrs else ""
    out.field(event.kind, f"{event.name}: {event.message}{attrs}", depth=depth)
