"""`truva-console rerun`: run a recorded plan again, reusing the results of steps that succeeded."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from console.cli.common import add_command, add_execution_argument, add_json_option, load_execution
from console.cli.run import run_and_report
from console.exits import fail
from store.errors import StoreError


def add_parser(subparsers: Any) -> None:
    """Register `rerun` on an argparse subparsers object."""
    parser = add_command(
        subparsers, "rerun", run,
        help="re-run the failed steps of a recorded execution",
        description="Run the recorded plan of EXECUTION again as a new execution linked to it "
        "(rerun_of). Steps that succeeded are not resent: their recorded results are reused "
        "and their dependents bind to them. Failed, rejected and skipped steps run again; a "
        "step that stopped with stop_unsafe_resend only with --include-unsafe (docs/run.md).",
    )  # fmt: skip
    add_execution_argument(parser)
    add_json_option(parser, "print the SPEC §3.2 JSON document")
    parser.add_argument(
        "--include-unsafe", action="store_true",
        help="also send again the steps that stopped with stop_unsafe_resend",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Re-run one execution; exit codes as `run`: 0, 2 for bad input, 130 on Ctrl-C."""
    # Imported here: the executor needs httpx, which the commands that do not run one do not.
    from console.replay.rerun import RerunError, prepare_rerun, rerun_executor

    try:
        db_path, detail = load_execution(args)
        setup = prepare_rerun(detail, include_unsafe=args.include_unsafe)
    except (StoreError, RerunError) as error:
        return fail(str(error))
    for note in setup.notes:
        print(f"truva-console: note: {note}", file=sys.stderr)
    return run_and_report(
        lambda recorder: rerun_executor(setup, recorder), db_path, as_json=args.json
    )
