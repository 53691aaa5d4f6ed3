"""`truva-console explain`: per attempt, what was sent, what came back, and why it was routed."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from console.cli.common import (
    add_command,
    add_execution_argument,
    add_json_option,
    print_json,
    store_path,
)
from console.exits import fail
from console.printable import printable
from console.render.formats import format_duration, format_time
from console.render.request_diff import RequestDiff, request_diffs
from console.render.text import Lines, draw_attempt, draw_event, draw_llm_call, draw_step_head
from console.render.timeline import (
    LEGEND,
    execution_timeline,
    step_in_execution_timeline,
    step_timeline,
)
from console.render.views import attempt_view, event_view, llm_call_view, split_inputs, step_view
from console.render.warnings import attempt_warnings
from console.words import counted
from store.errors import StoreError
from store.queries import (
    AttemptRecord,
    ExecutionDetail,
    ExecutionOutline,
    ExecutionRow,
    StepRecord,
    Store,
    body_view,
    to_jsonable,
)


def add_parser(subparsers: Any) -> None:
    """Register `explain` on an argparse subparsers object."""
    parser = add_command(
        subparsers, "explain", run,
        help="explain an execution attempt by attempt",
        description="Show, for every attempt, what was sent, what came back, the decision with "
        "its rule, reason and inputs, the rules that did not match, LLM calls and backoff.",
    )  # fmt: skip
    add_execution_argument(parser)
    parser.add_argument("step", metavar="STEP", nargs="?", help="only this step")
    add_json_option(parser)
    parser.add_argument("--timeline", action="store_true",
                        help="draw the attempts, LLM calls and backoff waits on one time axis "
                             "(the execution, then each step) instead of the full explanation")
    parser.add_argument("--attempt", metavar="N", type=int,
                        help="with --timeline and STEP: mark attempt N's rows with ▶")


def run(args: argparse.Namespace) -> int:
    """Explain one execution; 0 on success, 2 with one line on stderr for bad input.

    The text of a whole execution is read and written a few hundred steps at a time, and one
    step (STEP) is read alone, so memory follows what is printed, not the execution's size;
    STEP with --timeline reads the whole execution, whose waterfall has a lane per step.
    """
    from store.queries import open_store

    timeline = getattr(args, "timeline", False) and not args.json
    selected_n = getattr(args, "attempt", None)
    try:
        store = open_store(store_path(args))
        if not args.step and not timeline and not args.json and selected_n is None:
            outline = store.execution_outline(args.execution)
            write_explain(store, outline, sys.stdout.write)
            return 0
        if args.step and timeline:  # the Timeline tab's twin: every step has a lane
            detail = store.get_execution(args.execution, llm_texts=False)
            steps, every_step = (detail.step(args.step),), False
        elif args.step:
            outline = store.execution_outline(args.execution)
            steps = (store.execution_step(outline, args.step),)
            every_step = len(outline.step_ids) == 1
            detail = replace(outline.detail, steps=steps) if every_step else outline.detail
        else:
            detail = store.get_execution(args.execution)
            steps, every_step = detail.steps, True
    except StoreError as error:
        return fail(error)
    if selected_n is not None:
        problem = _attempt_problem(args, steps, selected_n)
        if problem:
            return fail(f"explain: --attempt {selected_n}: {problem}")
    if timeline and args.step:
        sys.stdout.write(printable(render_step_timeline(detail, steps[0],
                                                        selected_n=selected_n)))  # fmt: skip
    elif timeline:
        sys.stdout.write(printable(render_timelines(detail, steps, every_step=every_step)))
    elif args.json:
        print_json(explain_document(detail, steps))
    else:
        sys.stdout.write(printable(render_explain(detail, steps, every_step=every_step)))
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


def _attempt_problem(args: argparse.Namespace, steps: tuple[StepRecord, ...], n: int) -> str:
    """Why `--attempt n` cannot be shown, or ''."""
    if not getattr(args, "timeline", False) or args.json:
        return "it marks an attempt in the timeline; add --timeline (and no --json)"
    if not args.step:
        return "name the STEP it belongs to (explain EXECUTION STEP --timeline --attempt N)"
    numbers = [attempt.n for attempt in steps[0].attempts]
    if n not in numbers:
        made = ", ".join(f"#{number}" for number in numbers) or "none"
        return f"{steps[0].step_id} has no attempt {n} (its attempts: {made})"
    return ""


def render_step_timeline(detail: ExecutionDetail, step: StepRecord, *, width: int | None = None,
                         selected_n: int | None = None) -> str:  # fmt: skip
    """What the Timeline tab shows for `step` with attempt `selected_n` selected: the step's
    waterfall, then the execution's, and a legend."""
    width = width or max(60, shutil.get_terminal_size((80, 24)).columns)
    lines = step_in_execution_timeline(step, detail, width=width, selected_n=selected_n)
    return "\n".join(lines) + "\n"


def render_timelines(
    detail: ExecutionDetail, steps: tuple[StepRecord, ...], *, width: int | None = None,
    selected_n: int | None = None, every_step: bool | None = None,
) -> str:
    """The execution's waterfall (when every step is shown), then each step's, and a legend;
    `selected_n` marks that attempt of the (one) step shown. `every_step` says whether `steps`
    are all the execution's (default: whether they are all of `detail.steps`)."""
    width = width or max(60, shutil.get_terminal_size((80, 24)).columns)
    lines = [f"execution {detail.execution.execution_id}  {detail.execution.status}"]
    if len(steps) == len(detail.steps) if every_step is None else every_step:
        lines += ["", *execution_timeline(detail, width=width)]
    for step in steps:
        lines += ["", *step_timeline(step, width=width, selected_n=selected_n)]
    return "\n".join([*lines, "", LEGEND]) + "\n"


def render_explain(
    detail: ExecutionDetail, steps: tuple[StepRecord, ...], *, every_step: bool | None = None
) -> str:
    """The explanation as text: the execution, then each step attempt by attempt. `every_step`
    says whether `steps` are all the execution's (default: all of `detail.steps`); then what
    was recorded outside any step follows them."""
    out = Lines()
    _render_head(out, detail.execution)
    for step in steps:
        out.add()
        _render_step(out, step)
    if len(steps) == len(detail.steps) if every_step is None else every_step:
        _render_outside_steps(out, detail)
    return out.text()


# Steps read (and their text written) at a time by `write_explain`.
STEPS_PER_READ = 2000


def write_explain(store: Store, outline: ExecutionOutline, write: Callable[[str], Any]) -> None:
    """`render_explain` of every step of the outlined execution, made printable and given to
    `write` a few hundred steps at a time (the same text)."""
    for out in _explain_parts(store, outline):
        if out.lines:
            write(printable(out.text()))


def _explain_parts(store: Store, outline: ExecutionOutline) -> Iterator[Lines]:
    """The lines of `render_explain`, in parts: the head, the steps a few hundred at a time,
    and what was recorded outside any step."""
    head = Lines()
    _render_head(head, outline.detail.execution)
    yield head
    step_ids = outline.step_ids
    for start in range(0, len(step_ids), STEPS_PER_READ):
        out = Lines()
        for step in store.execution_steps(outline, step_ids[start:start + STEPS_PER_READ]):
            out.add()
            _render_step(out, step)
        yield out
    tail = Lines()
    _render_outside_steps(tail, outline.detail)
    yield tail


def _render_head(out: Lines, row: ExecutionRow) -> None:
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


def _render_outside_steps(out: Lines, detail: ExecutionDetail) -> None:
    if detail.events or detail.llm_calls:
        out.add()
        out.add("outside any step")
        for event in detail.events:
            draw_event(out, event_view(event), depth=1)
        for call in detail.llm_calls:
            draw_llm_call(out, llm_call_view(call), depth=1)


def _render_step(out: Lines, step: StepRecord) -> None:
    draw_step_head(out, step_view(step))
    for attempt in step.attempts:
        out.add()
        draw_attempt(out, attempt_view(attempt))
    if step.events or step.llm_calls:
        out.add()
        out.add("outside any recorded attempt", depth=1)
        for event in step.events:
            draw_event(out, event_view(event), depth=2)
        for call in step.llm_calls:
            draw_llm_call(out, llm_call_view(call), depth=2)
