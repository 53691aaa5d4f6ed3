"""`truva-console whatif`: recorded decisions re-decided under changed config (docs/whatif.md)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from console.cli.ls import add_filter_arguments, filters_from_args
from console.exits import fail
from console.printable import printable
from console.render.formats import ArgumentProblem
from console.render.whatif_view import whatif_text, whatif_view
from console.replay.edits import ReplayError
from console.whatif import WhatIfReport, parse_overrides, what_if
from executor.config import ConfigError
from store.connection import resolve_db_path
from store.errors import StoreError
from store.queries import ExecutionFilter, open_store


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
        overrides = parse_overrides(args.config)
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
        text = render_report(
            report, filtered=filters != ExecutionFilter(), store_option=store_option(args)
        )
        print(printable(text))
    return 0


def render_report(
    report: WhatIfReport, *, filtered: bool = False, store_option: str = ""
) -> str:
    """The report as text: totals, the before → after table, the first change of each step."""
    return whatif_text(whatif_view(report, filtered=filtered), store_option=store_option)


def store_option(args: argparse.Namespace) -> str:
    """The option that names the store the report was read from, for the replay hint."""
    if getattr(args, "samples", False):
        return " --samples"
    db = getattr(args, "db", None)
    return f" --db {shlex.quote(db)}" if db else ""
