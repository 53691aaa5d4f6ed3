"""`truva-console replay`: re-run one recorded step locally with edited tool responses."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from console.cli.common import (
    add_command,
    add_execution_argument,
    add_json_option,
    emit,
    load_execution,
    print_exit_notice,
)
from console.exits import EXIT_CANCELLED, EXIT_OK, fail
from console.render.replay_text import (
    describe_comparison,
    describe_divergence,
    describe_original,
    describe_replay,
)
from console.replay.edits import (
    ReplayError,
    ResponseSpecError,
    load_edits,
    load_parameter_edits,
    parse_config_override,
)
from console.replay.setup import LLM_LIVE, LLM_MODES, LLM_RECORDED, live_endpoint, prepare_replay
from console.session import report_recorded
from console.words import compact_json, counted
from store.errors import StoreError
from store.queries import AttemptRecord, StepRecord

if TYPE_CHECKING:  # the engine needs httpx, which only a replay does (every command parses)
    from console.replay.engine import ReplayResult


def add_parser(subparsers: Any) -> None:
    """Register `replay` on an argparse subparsers object."""
    parser = add_command(
        subparsers, "replay", run,
        help="replay a recorded step with edited tool responses",
        description="Run one recorded step again, locally, through the real executor: each "
        "dispatch is answered with the edited response given for it, else with the original "
        "run's response, and the decisions are compared with the original ones "
        "(docs/replay.md).",
    )  # fmt: skip
    add_execution_argument(parser)
    parser.add_argument("step", metavar="STEP", help="the step to replay")
    for flag, metavar, repeatable, meaning in (
        ("--response", "N=FILE", True,
         'answer dispatch N (1 = first) with the JSON file {"status", "headers", "body"} or '
         '"drop"; repeatable'),
        ("--responses", "FILE", False,
         "a JSON array of responses; item i answers dispatch i (null keeps the recorded one)"),
        ("--param", "KEY=VALUE", True,
         "send the step's parameter KEY as VALUE (JSON, else text), e.g. city_code=PAR; "
         "repeatable"),
        ("--params", "FILE", False,
         "a JSON object of parameter → value replacing the step's recorded ones"),
        ("--config", "KEY=VALUE", True,
         "override a plan config key, e.g. max_attempts=5; repeatable"),
        ("--llm-base-url", "URL", False,
         "with --llm live: ask this OpenAI-compatible endpoint instead of the recorded one"),
        ("--llm-model", "NAME", False, "with --llm live: ask this model"),
    ):  # fmt: skip
        if repeatable:
            parser.add_argument(flag, metavar=metavar, help=meaning, action="append", default=[])
        else:
            parser.add_argument(flag, metavar=metavar, help=meaning)
    parser.add_argument(
        "--llm", choices=LLM_MODES, default=LLM_RECORDED,
        help="recorded: answer LLM layers with the original answers (default); live: ask the "
        "plan's endpoint; off: no LLM layers",
    )  # fmt: skip
    add_json_option(parser)
    parser.add_argument("--no-store", action="store_true", help="do not record the replay")


def run(args: argparse.Namespace) -> int:
    """Replay one step; 0 when it ran, 2 with one line on stderr for bad input, 130 on Ctrl-C."""
    try:
        edits = load_edits(args.response, args.responses)
        overrides = dict(parse_config_override(text) for text in args.config)
        parameter_edits = load_parameter_edits(args.param, args.params)
    except (ResponseSpecError, ReplayError) as error:
        return fail(str(error))
    try:
        db_path, detail = load_execution(args)
        setup = prepare_replay(
            detail, args.step, edits=edits, llm_mode=args.llm, config_overrides=overrides,
            parameter_edits=parameter_edits, llm_base_url=args.llm_base_url,
            llm_model=args.llm_model,
        )  # fmt: skip
    except (StoreError, ReplayError) as error:
        return fail(str(error))
    try:
        return report_recorded(
            lambda recorder: _replayer(setup, recorder),
            None if args.no_store else db_path,
            lambda recorded: _report(recorded, as_json=args.json),
        )
    except StoreError as error:
        return fail(str(error))


def _report(recorded: Any, *, as_json: bool) -> int:
    result, stored = recorded.outcome, recorded.session.stored
    emit(
        as_json,
        lambda: replay_document(result, stored=stored),
        lambda: render_replay(result, stored=stored),
    )
    print_exit_notice(recorded.session.exit_notice)
    if result.cancelled_by_user:
        print("truva-console: replay cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------


def _replayer(setup: Any, recorder: Any) -> Any:
    from console.replay.engine import Replayer

    return Replayer(setup, recorder=recorder)


def original_step_document(step: StepRecord) -> dict[str, Any]:
    """A recorded step in the shape `run --json` prints it (SPEC §3.2)."""
    return {
        "id": step.step_id,
        "status": step.status,
        "dispatch_count": step.dispatch_count,
        "validation_retries": step.validation_retries,
        "semantic_retries": step.semantic_retries,
        "attempts": [_attempt_document(attempt) for attempt in step.attempts],
        "tool": step.tool,
        "capability": step.capability,
        "parameters": step.parameters,
        "response": step.result,
        "success": step.status == "succeeded",
        "error": step.error,
        "final_action": step.final_action,
        "final_rule": step.final_rule_id,
        "skipped": step.status == "skipped",
        "skip_reason": step.skip_reason,
    }


def _attempt_document(attempt: AttemptRecord) -> dict[str, Any]:
    retried_same = attempt.action == "retry_same"
    return {
        "n": attempt.n,
        "attempt_number": attempt.attempt_number,
        "dispatched": bool(attempt.dispatched),
        "status": attempt.status,
        "parameters": attempt.parameters,
        "action": attempt.action,
        "rule": attempt.rule_id,
        "reason": attempt.reason,
        "delay_ms": attempt.delay_ms if retried_same else None,
        "delay_source": attempt.delay_source if retried_same else None,
        "layer": attempt.decision_layer,
        "transport_error": attempt.transport_error,
    }


def replay_document(result: ReplayResult, *, stored: bool) -> dict[str, Any]:
    """The `replay --json` document: both steps, whether the outcome changed, what was served."""
    setup = result.setup
    divergence = result.first_divergence
    replayed = result.step.to_dict() if result.step is not None else None
    if replayed is not None:
        replayed["execution_status"] = result.outcome.status
        replayed["dispatches"] = [served.to_dict() for served in result.dispatches]
        replayed["incomplete"] = result.unscripted_dispatch is not None
    return {
        "execution_id": result.execution_id,
        "stored": stored,
        "original_execution_id": setup.execution_id,
        "step_id": setup.step_id,
        "changed": result.changed,
        "first_divergence": None if divergence is None else divergence.to_dict(),
        "ran_out": result.ran_out,
        "summary": {
            "original": describe_original(setup.original),
            "replay": describe_replay(result),
            "comparison": describe_comparison(result),
        },
        "original": original_step_document(setup.original),
        "replay": replayed,
        "edited_dispatches": sorted(setup.edits),
        "config": setup.config.to_dict(),
        "edited_parameters": dict(setup.parameter_edits),
        "llm": {
            "mode": setup.llm_mode,
            "recorded_answers": len(setup.llm_answers),
            "answers_served": result.llm_answers_served,
            "calls_unanswered": list(result.llm_calls_unanswered),
            **(live_endpoint(setup) if setup.llm_mode == LLM_LIVE else {}),
        },
        "notes": list(result.notes),
    }


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------


def _delay(delay_ms: float | None) -> str:
    return "-" if delay_ms is None else f"{delay_ms:.1f} ms"


def _got(dispatched: bool | None, status: int | None, transport_error: str | None) -> str:
    if not dispatched:
        return "not sent"
    if transport_error:
        return transport_error
    return "-" if status is None else str(status)


def _original_cells(attempt: AttemptRecord) -> list[str]:
    delay = attempt.delay_ms if attempt.action == "retry_same" else None
    return [
        _got(attempt.dispatched, attempt.status, attempt.transport_error),
        attempt.action or "-",
        attempt.rule_id or "-",
        _delay(delay),
    ]


def render_replay(result: ReplayResult, *, stored: bool) -> str:
    """Original and replayed attempts side by side, then both endings and the notes."""
    setup = result.setup
    where = f"replay execution {result.execution_id}" + ("" if stored else " (not stored)")
    lines = [f"replay of {setup.step_id} from execution {setup.execution_id} → {where}"]
    llm = f"LLM: {setup.llm_mode}"
    if setup.llm_mode == LLM_RECORDED and setup.llm is not None:
        recorded = counted(len(setup.llm_answers), "recorded answer")
        llm += f" ({result.llm_answers_served} of {recorded} used)"
    elif setup.llm is None:
        llm += " (layers 3 and 4 off)"
    elif setup.llm_mode == LLM_LIVE:
        endpoint = live_endpoint(setup)
        url = endpoint["base_url"] or "OPENAI_BASE_URL"
        model = endpoint["model"] or "from TRUVAG3_LLM_MODEL or the default"
        llm += f" ({url}, model {model})"
    lines.append(llm)
    if setup.parameter_edits:
        edited = ", ".join(f"{key}={compact_json(value)}"
                           for key, value in setup.parameter_edits.items())  # fmt: skip
        lines.append(f"edited parameters: {edited}")
    if setup.edits:
        lines.append(
            "edited dispatches: "
            + ", ".join(str(n) for n in setup.edits)
            + "   (* marks an edited response)"
        )
    lines.append("")
    edited = {served.number for served in result.dispatches if served.source == "edited"}
    replayed = list(result.step.attempts) if result.step is not None else []
    rows: list[list[str]] = [
        ["n", "status", "action", "rule", "delay", "status", "action", "rule", "delay"]
    ]
    dispatch_number = 0
    for index in range(max(len(setup.original.attempts), len(replayed))):
        left = (
            _original_cells(setup.original.attempts[index])
            if index < len(setup.original.attempts)
            else ["", "", "", ""]
        )
        right = ["", "", "", ""]
        if index < len(replayed):
            attempt = replayed[index]
            got = _got(attempt.dispatched, attempt.status, attempt.transport_error)
            if attempt.dispatched:
                dispatch_number += 1
                if dispatch_number == result.unscripted_dispatch:
                    got = "unscripted"
                elif dispatch_number in edited:
                    got += "*"
            right = [got, attempt.action, attempt.rule, _delay(attempt.delay_ms)]
        rows.append([str(index + 1), *left, *right])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    left_width = sum(widths[1:5]) + 2 * 3
    lines.append(" " * (widths[0] + 2) + "original".ljust(left_width) + " │ replay")
    for row in rows:
        left = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[1:5], start=1))
        right = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[5:], start=5))
        lines.append(f"{row[0].rjust(widths[0])}  {left} │ {right}".rstrip())
    lines.append("")
    lines.append(f"original: {describe_original(setup.original)}")
    lines.append(f"replay:   {describe_replay(result)}")
    lines.append(describe_comparison(result))
    divergence = describe_divergence(result)
    if divergence is not None:
        lines.append(divergence)
    if result.notes:
        lines.append("notes:")
        lines.extend(f"  - {note}" for note in result.notes)
    return "\n".join(lines)
