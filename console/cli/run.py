"""`truva-console run PLAN`: run a plan file, record it, print the outcome."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.cli.common import add_command, add_json_option, emit, print_exit_notice, store_path
from console.exits import EXIT_CANCELLED, EXIT_OK, fail
from console.session import report_recorded
from console.words import compact_json, counted, on_one_line, reached_wire, received_text


def add_parser(subparsers: Any) -> None:
    """Register `truva-console run PLAN`."""
    parser = add_command(
        subparsers, "run", run, help="run a plan file and record it",
        description="Run a plan file (docs/plan-file.md) against its tools and record every "
                    "attempt, decision, backoff and LLM call in the debug store.",
    )  # fmt: skip
    parser.add_argument("plan", help="path to the plan JSON file")
    add_json_option(parser, "print the SPEC §3.2 JSON document")
    parser.add_argument("--no-store", action="store_true", help="do not record to the store")


def run(args: argparse.Namespace) -> int:
    """Load the plan, run it with the store recorder, and print the outcome."""
    from executor.llm.client import LLMSettingsError, resolve_llm_settings
    from executor.plan import PlanError, load_plan
    from executor.runtime import PlanExecutor

    try:
        plan = load_plan(args.plan)
        resolve_llm_settings(plan.llm)  # a bad OPENAI_BASE_URL before the store is opened
    except (PlanError, LLMSettingsError) as exc:
        return fail(str(exc))
    db_path = None if args.no_store else store_path(args)
    return run_and_report(
        lambda recorder: PlanExecutor(plan, recorder=recorder), db_path, as_json=args.json
    )


def run_and_report(build: Callable[[Any], Any], db_path: Path | None, *, as_json: bool) -> int:
    """`report_recorded`: run, print the outcome as `run` does (before the telemetry export
    finishes); the exit code of `run`."""
    from executor.llm.client import LLMSettingsError
    from executor.plan import header_value_problem
    from store.errors import StoreError

    token = os.environ.get("TRUVAG3_OAUTH_TOKEN", "")
    problem = header_value_problem(f"Bearer {token}") if token else None
    if problem is not None:
        return fail(f"TRUVAG3_OAUTH_TOKEN cannot be sent as an Authorization header: {problem}")
    try:
        return report_recorded(build, db_path, lambda recorded: report(recorded, as_json=as_json))
    except (StoreError, LLMSettingsError) as exc:
        return fail(str(exc))


def report(recorded: Any, *, as_json: bool) -> int:
    """Print a recorded run's outcome as `run` does; the exit code of `run`."""
    outcome = recorded.outcome
    settings = getattr(recorded.executor, "llm_settings", None)
    if settings is not None and not settings.has_credential:
        print("truva-console: note: no LLM API key (llm.api_key, OPENAI_API_KEY or userinfo in "
              "the LLM base URL); LLM calls sent the placeholder 'Bearer unused'", file=sys.stderr)
    emit(as_json, outcome.to_dict, lambda: render_outcome(outcome))
    # The run itself completed (its tool calls happened), so the exit code stays the run's.
    print_exit_notice(recorded.session.exit_notice)
    if outcome.status == "cancelled":
        incomplete = ", ".join(outcome.incomplete_steps) or "none"
        print(f"truva-console: cancelled; incomplete steps: {incomplete}", file=sys.stderr)
        return EXIT_CANCELLED
    return EXIT_OK


def render_outcome(outcome: Any) -> str:
    """A readable summary of a run: each step, then each attempt's parameters, decision and rule.

    One item per line: line breaks inside a reason (an LLM endpoint's error text, say) are
    written as escapes.
    """
    lines = [f"execution {outcome.execution_id}: {outcome.status}"]
    if getattr(outcome, "rerun_of", None):
        lines.append(f"  rerun of {outcome.rerun_of}")
    if outcome.stop_reason:
        lines.append(f"  stopped: {on_one_line(outcome.stop_reason)}")
    for step in outcome.steps:
        counts = (f"{counted(step.dispatch_count, 'dispatch', 'dispatches')}, "
                  f"{counted(step.validation_retries, 'correction')}")  # fmt: skip
        lines.append(f"  {step.id}: {step.status} — {counts}")
        if step.skip_reason:
            lines.append(f"    {on_one_line(step.skip_reason)}")
        if getattr(step, "reused_from", None):
            lines.append(f"    result reused from execution {step.reused_from}; not resent")
        for attempt in step.attempts:
            got = received_text(attempt.dispatched, attempt.status, attempt.transport_error)
            wait = f", wait {attempt.delay_ms:.1f} ms ({attempt.delay_source})" \
                if attempt.delay_ms is not None else ""
            lines.append(f"    #{attempt.n} {got} → {attempt.action} [{attempt.rule}]{wait}")
            verb = "sent" if reached_wire(attempt.dispatched, attempt.transport_error) \
                else "parameters"
            lines.append(f"       {verb} {on_one_line(compact_json(attempt.parameters))}")
            lines.append(f"       {on_one_line(attempt.reason)}")
            if attempt.impact and attempt.action not in ("success", "retry_same"):
                lines.append(f"       recovery: {attempt.recovery} — {on_one_line(attempt.impact)}")
    return "\n".join(lines)
