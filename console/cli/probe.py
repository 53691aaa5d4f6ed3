"""`truva-console probe`: send deliberately bad requests to a live tool and grade its answers.

See docs/contract.md. Exit 0 when every check passes or warns, 1 when one fails, 2 for bad
input (nothing is sent or recorded), 130 when cancelled.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from console.cli.common import add_command, add_json_option, emit, print_exit_notice, store_path
from console.exits import EXIT_CANCELLED, fail
from console.words import on_one_line

EXIT_FAILING_CHECK = 1
_MARK = {"pass": "pass", "warn": "WARN", "fail": "FAIL"}


def add_parser(subparsers: Any) -> None:
    """Register `probe` on an argparse subparsers object."""
    parser = add_command(
        subparsers, "probe", run,
        help="send deliberately bad requests to a live tool and grade its error contract",
        description="Derive a few deliberately bad requests from a capability's schema (missing "
        "required key, wrong type, empty body, not JSON, unknown enum value), send each once "
        "to the live tool, grade every answer with lint's checks (a bad request must get a 4xx "
        "input error, not 2xx or 5xx) and record them as an execution labelled probe. Either "
        "PLAN --step STEP, or --url URL --capability PATH --schema FILE. Exit 1 when a check "
        "fails.",
    )  # fmt: skip
    parser.add_argument("plan", nargs="?", help="plan file whose step names the capability")
    parser.add_argument("--step", help="the step of PLAN to probe (its tool, capability, "
                        "headers and parameters)")  # fmt: skip
    parser.add_argument("--url", help="the tool's base URL (instead of PLAN)")
    parser.add_argument("--capability", metavar="PATH",
                        help="the capability's path, e.g. /capabilities/lookup (with --url)")
    parser.add_argument("--schema", metavar="FILE",
                        help="JSON Schema file of the capability's parameters (with --url)")
    parser.add_argument("--tool", help="tool name to record (with --url; default: tool)")
    parser.add_argument("--side-effects", choices=("none", "idempotent", "unsafe"),
                        help="what the capability changes (with --url; unknown needs --yes)")
    parser.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                        help="header sent with every probe (with --url; repeatable)")
    parser.add_argument("--yes", action="store_true",
                        help="probe a capability whose side_effects is not none, or unknown")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="per-request timeout (default 10)")
    add_json_option(parser)
    parser.add_argument("--no-store", action="store_true", help="do not record to the store")


def run(args: argparse.Namespace) -> int:
    """Probe the target; 0 all pass or warn, 1 a check fails, 2 bad input, 130 cancelled."""
    from console.probe import DEFAULT_TIMEOUT_S, ProbeError, Prober, check_reachable, derive_cases
    from console.session import report_recorded
    from executor.plan import header_value_problem
    from executor.telemetry import telemetry_settings_from_env
    from store.errors import StoreError

    timeout_s = DEFAULT_TIMEOUT_S if args.timeout is None else args.timeout
    if not 0 < timeout_s <= 3600:
        return fail(f"--timeout {args.timeout:g}: expected seconds > 0 and <= 3600")
    token = os.environ.get("TRUVAG3_OAUTH_TOKEN", "")
    problem = header_value_problem(f"Bearer {token}") if token else None
    if problem is not None:
        return fail(f"TRUVAG3_OAUTH_TOKEN cannot be sent as an Authorization header: {problem}")
    telemetry_settings_from_env()  # a bad OTEL_* value is refused before the tool is reached
    try:
        target = _target(args)
        if target.refusal is not None and not args.yes:
            return fail(target.refusal)
        cases, skipped = derive_cases(target.capability.schema, target.step.parameters)
        check_reachable(target.url, min(timeout_s, 5.0))
    except ProbeError as error:
        return fail(error)
    db_path = None if args.no_store else store_path(args)
    try:
        return report_recorded(
            lambda recorder: Prober(target, cases, recorder=recorder, skipped=skipped,
                                    env=os.environ, timeout_s=timeout_s),
            db_path,
            lambda recorded: _report(recorded, len(cases), as_json=args.json),
        )  # fmt: skip
    except StoreError as error:
        return fail(error)


def _report(recorded: Any, case_count: int, *, as_json: bool) -> int:
    outcome = recorded.outcome
    card = outcome.card()
    stored = recorded.session.stored
    emit(as_json, lambda: _document(outcome, card, stored),
         lambda: render_probe(outcome, card, stored))  # fmt: skip
    print_exit_notice(recorded.session.exit_notice)
    if outcome.cancelled:
        graded = sum(1 for result in outcome.results if result.findings)
        print(f"truva-console: cancelled; {graded} of {case_count} probes graded",
              file=sys.stderr)
        return EXIT_CANCELLED
    return EXIT_FAILING_CHECK if card.grade.value == "fail" else 0


def _target(args: argparse.Namespace) -> Any:
    """The probe target named by PLAN --step or by --url/--capability/--schema."""
    from console.probe import ProbeError, target_from_plan, target_from_url
    from executor.plan import PlanError, load_plan

    url_options = [name for name, value in (("--url", args.url), ("--capability",
                   args.capability), ("--schema", args.schema)) if value]  # fmt: skip
    if args.plan is not None:
        if url_options:
            raise ProbeError(f"PLAN and {', '.join(url_options)} name two targets; give PLAN "
                             "--step STEP, or --url URL --capability PATH --schema FILE")
        if not args.step:
            raise ProbeError(f"{args.plan}: --step STEP is required with PLAN (the step "
                             "whose capability is probed)")  # fmt: skip
        url_only = [name for name, value in (("--tool", args.tool), ("--header", args.header),
                    ("--side-effects", args.side_effects)) if value]  # fmt: skip
        if url_only:
            raise ProbeError(f"{', '.join(url_only)} go with --url; with PLAN the tool, its "
                             "headers and side_effects come from the plan")  # fmt: skip
        try:
            return target_from_plan(load_plan(args.plan), args.step)
        except PlanError as error:
            raise ProbeError(str(error)) from error
    missing = [name for name in ("--url", "--capability", "--schema") if name not in url_options]
    if len(missing) == 3:
        raise ProbeError("nothing to probe: give PLAN --step STEP, or --url URL --capability "
                         "PATH --schema FILE")
    if missing:
        raise ProbeError(f"{', '.join(url_options)} without {', '.join(missing)}: --url, "
                         "--capability and --schema go together")
    if args.step:
        raise ProbeError("--step names a step of PLAN; with --url there is no plan")
    return target_from_url(args.url, args.capability, _read_schema(args.schema),
                           schema_file=args.schema, tool=args.tool or "tool",
                           side_effects=args.side_effects, headers=_headers(args.header))


def _read_schema(path: str) -> Any:
    from console.probe import ProbeError
    from executor.files import read_regular_file

    try:  # a regular file only: /dev/zero read forever (memory), a pipe waited for a writer
        text = read_regular_file(path).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise ProbeError(f"--schema {path}: cannot read the schema file: {reason}") from error
    try:
        schema = json.loads(text)
    except ValueError as error:
        raise ProbeError(f"--schema {path}: invalid JSON: {error}") from error
    except RecursionError:
        raise ProbeError(f"--schema {path}: nested too deeply to be a schema (Python's "
                         "recursion limit was reached)") from None
    if not isinstance(schema, dict):
        raise ProbeError(f"--schema {path}: expected a JSON Schema object, got "
                         f"{type(schema).__name__}")  # fmt: skip
    return schema


def _headers(values: list[str]) -> dict[str, str]:
    from console.probe import ProbeError

    headers: dict[str, str] = {}
    for value in values:
        name, colon, text = value.partition(":")
        if not colon or not name.strip():
            raise ProbeError(f"--header {value!r}: expected 'NAME: VALUE'")
        headers[name.strip()] = text.strip()
    return headers


def _document(outcome: Any, card: Any, stored: bool) -> dict[str, Any]:
    return {
        "execution_id": outcome.execution_id if stored else None,
        "status": outcome.status,
        "capability": outcome.target.capability.key,
        "url": outcome.target.url,
        "requests": [result.to_dict() for result in outcome.results],
        "skipped": [case.to_dict() for case in outcome.skipped],
        "card": card.to_dict(),
    }


def render_probe(outcome: Any, card: Any, stored: bool) -> str:
    """Each probe with its answer, grade and the findings that did not pass; what was skipped;
    then the report card as `lint` prints it."""
    from console.cli.lint import render_cards
    from console.words import counted, received_text

    target = outcome.target
    where = f"recorded as execution {outcome.execution_id}" if stored else "not recorded"
    lines = [f"probe {target.capability.key} at {target.url}: "
             f"{counted(len(outcome.results), 'bad request')}, {where}"]  # fmt: skip
    for result in outcome.results:
        answer = received_text(True, result.outcome.status or None,
                               result.outcome.transport_error)
        mark = _MARK[result.grade.value] if result.graded else "-"
        lines.append(f"  {mark:<4}  {result.case.name} → {answer} → "
                     f"{result.decision.action} [{result.decision.rule_id}]"
                     f"{'' if result.graded else ' (not graded)'}")  # fmt: skip
        for finding in result.findings:
            if finding.grade.value != "pass":
                lines.append(f"        {finding.grade.value} {finding.check}: "
                             f"{on_one_line(finding.message)}")  # fmt: skip
    for case in outcome.skipped:
        lines.append(f"  skip  {case.kind.replace('_', ' ')}: {case.reason}")
    lines.append("")
    if card.responses:
        lines.append(render_cards([card]))
    else:  # cancelled before any answer: a card of nothing would read "pass"
        lines.append(f"{card.tool}: not graded — no answer before the probe was cancelled")
    return "\n".join(lines)
