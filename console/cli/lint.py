"""`truva-console lint`: grade every tool's error contract from its recorded responses.

See docs/contract.md. Exit 0 when no tool fails a check, 1 when one does, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from console.cli.common import add_command, add_json_option, store_path
from console.exits import fail
from console.lint import ReportCard, lint_store
from console.printable import printable
from console.words import counted, on_one_line
from executor.tool_contract import Grade
from store.errors import StoreError
from store.queries import open_store

EXIT_FAILING_TOOL = 1
_MARK = {Grade.PASS: "pass", Grade.WARN: "WARN", Grade.FAIL: "FAIL"}


def add_parser(subparsers: Any) -> None:
    """Register `lint` on an argparse subparsers object."""
    parser = add_command(
        subparsers, "lint", run,
        help="grade each tool's error contract from its recorded responses",
        description="Grade every recorded tool response against the seeds' best practices for "
        "tool developers (error envelope, status codes, retryable, hints, redaction, "
        "Retry-After) and print a report card per tool. Exit 1 when a tool fails a check.",
    )  # fmt: skip
    parser.add_argument("--tool", help="only this tool")
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    """Print the report cards; 0 all pass or warn, 1 a tool fails, 2 bad input."""
    try:
        cards = lint_store(open_store(store_path(args)), tool=args.tool)
    except StoreError as error:
        return fail(error)
    if args.tool and not cards:
        return fail(f"--tool {args.tool}: no recorded response from a tool of that name")
    if args.json:
        json.dump({"tools": [card.to_dict() for card in cards]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(printable(render_cards(cards)))
    return EXIT_FAILING_TOOL if any(card.grade is Grade.FAIL for card in cards) else 0


def render_cards(cards: list[ReportCard]) -> str:
    """Each tool's card: its grade, then one line per check with counts and an example."""
    if not cards:
        return "no tool responses recorded yet (run a plan, or probe a tool)"
    lines: list[str] = []
    for card in cards:
        capabilities = ", ".join(sorted(card.capabilities)) or "-"
        lines.append(f"{card.tool}: {_MARK[card.grade]} — {counted(card.responses, 'response')}"
                     f" ({capabilities})")  # fmt: skip
        for tally in card.ordered_tallies():
            counts = ", ".join(f"{tally.counts[g]} {g.value}" for g in Grade if tally.counts[g])
            lines.append(f"  {_MARK[tally.grade]:<4}  {tally.title}  ({counts})")
            if tally.example is not None:
                example = tally.example
                answer = f"HTTP {example.status}" if example.status else "no answer"
                lines.append(f"        e.g. {example.execution_id} {example.step_id} "
                             f"#{example.n} ({answer}): "
                             f"{on_one_line(example.message)}")  # fmt: skip
        lines.append("")
    return "\n".join(lines).rstrip()
