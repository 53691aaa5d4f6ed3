"""`truva-console whatif`: recorded decisions re-decided under changed config (docs/whatif.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from console.cli.ls import add_filter_arguments, filters_from_args
from console.exits import fail
from console.printable import printable
from console.render.formats import ArgumentProblem
from console.replay.edits import ReplayError, parse_config_override
from console.whatif import WhatIfReport, what_if
from console.words import counted, on_one_line
from executor.config import ConfigError
from store.connection import resolve_db_path
from store.errors import StoreError
from store.queries import ExecutionFilter, open_store

# Changed steps listed in the text output; --json lists all of them.
_SHOWN_CHANGES = 50


def add_parser(subparsers: Any) -> None:
    """Register `whatif` on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "whatif",
        help="re-decide recorded decisions under changed config",
        description="Run the current policy's decide() on the inputs of every recorded decision "
        "of the executions the filters select (as ls lists them), with --config keys changed, "
        "and list the decisions that come out differently. With no --config it lists what the "
        "installed policy code decides differently from the version that recorded them.",
    )
    parser.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE",
        help="a plan config key to change, e.g. max_attempts=5; repeatable",
    )
    add_filter_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Re-decide and report; 0 on success, 2 with one line on stderr for bad input."""
    try:
        overrides = dict(parse_config_override(text) for text in args.config)
        filters = filters_from_args(args)
        store = open_store(resolve_db_path(getattr(args, "db", None)))
        report = what_if(store, filters, overrides)
    except (ReplayError, ArgumentProblem, StoreError) as error:
        return fail(error)
    except (ValueError, ConfigError) as error:
        return fail(f"--config: {error}")
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(printable(render_report(report, filtered=filters != ExecutionFilter())))
    return 0


def render_report(report: WhatIfReport, *, filtered: bool = False) -> str:
    """The report as text: totals, the before → after table, the first change of each step."""
    config = ", ".join(f"{key}={json.dumps(value)}" for key, value in report.overrides.items())
    against = f"config {config}" if config else "the recorded config (policy code regression check)"
    scope = "matching executions" if filtered else "executions"
    lines = [
        f"what-if under {against}: {counted(report.decisions, 'decision')} in "
        f"{report.executions} {scope} re-decided",
        f"  {counted(report.changed, 'decision')} would change, in "
        f"{counted(report.changed_steps, 'step')}",
    ]
    if report.after_earlier_change:
        lines.append(
            f"  ({report.after_earlier_change} of them follow an earlier change in the same "
            "step: a run under this config would not have met them as recorded)"
        )
    if report.by_transition:
        lines.append("")
        lines.append("  first change in each step: before → after")
        for (before, after), count in report.transitions():
            lines.append(f"    {count:>6}  {before} → {after}")
        lines.append("")
        lines.append("  the steps")
        for change in report.changes[:_SHOWN_CHANGES]:
            lines.append(f"    {change.execution_id}  {change.step_id}  #{change.n}  "
                         f"{change.before} → {change.after}")
            lines.append(f"        {on_one_line(change.reason)}")
            lines.append(f"        {change.consequence}")
        if len(report.changes) > _SHOWN_CHANGES:
            lines.append(f"    … and {len(report.changes) - _SHOWN_CHANGES} more steps (--json "
                         "lists all)")
    if report.not_rerun:
        lines.append("")
        lines.append(
            f"  {counted(report.not_rerun, 'decision')} not re-run: their rules, and the rules "
            "before them, read none of the changed keys, so they stay as recorded (run "
            "whatif without --config to check the policy code itself)"
        )
    if report.incomplete:
        lines.append("")
        lines.append(
            f"  not re-decided: {counted(report.incomplete, 'decision')} recorded by an older "
            f"version that did not keep every input (missing: "
            f"{', '.join(sorted(report.missing_inputs))})"
        )
    if report.unreadable:
        lines.append(f"  not re-decided: {counted(report.unreadable, 'decision')} whose inputs "
                     f"cannot be read, e.g. {on_one_line(report.first_unreadable)}")
    lines.append("")
    lines.append(
        "  What this cannot know: the tool's answer to an attempt that was never made, an LLM "
        "layer's answer to a question never asked, and what follows a changed decision in the "
        "same step (later recorded attempts were made under the old decision). Replay a step "
        "to find out: truva-console replay EXECUTION STEP --config KEY=VALUE."
    )
    return "\n".join(lines)
