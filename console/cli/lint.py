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
from console.render.lint_view import card_views, cards_text
from executor.tool_contract import Grade
from store.errors import StoreError
from store.queries import open_store

EXIT_FAILING_TOOL = 1


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
    return cards_text(card_views(cards))
