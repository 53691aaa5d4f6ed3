"""`truva-console ls`: list recorded executions, filtered, as a table or as JSON."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from console.cli.common import add_command, add_json_option, print_json, store_path
from console.exits import fail
from console.printable import printable
from console.render.execution_columns import (
    DEFAULT_PAGE_SIZE,
    EXECUTION_COLUMNS,
    RowOrder,
    parse_sort,
    query_cell,
    query_markers,
    sort_rows,
)
from console.render.formats import ArgumentProblem, parse_time, unknown_rule
from executor.contract import WARNING_CODES
from store.errors import StoreError
from store.queries import (
    ACTIONS,
    EXECUTION_STATUSES,
    ExecutionFilter,
    Page,
    open_store,
    to_jsonable,
)

_QUERY_WIDTH = 48
# The store's row counts and offsets are 64-bit integers.
_MAX_ROWS = 2**63 - 1


def add_parser(subparsers: Any) -> None:
    """Register `ls` on an argparse subparsers object."""
    parser = add_command(
        subparsers, "ls", run,
        help="list recorded executions",
        description="List recorded executions, newest first. Filters combine with AND; "
        "--tool/--capability/--action/--rule/--http-status must hold for the same attempt.",
    )  # fmt: skip
    add_filter_arguments(parser)
    parser.add_argument("--limit", type=int, default=DEFAULT_PAGE_SIZE,
                        help=f"rows per page (default {DEFAULT_PAGE_SIZE}, as the list screen)")
    parser.add_argument("--sort", metavar="COLUMN[:asc|:desc]",
                        help="order the page by a column (" + ", ".join(
                            column.key for column in EXECUTION_COLUMNS)
                        + "); numbers and times largest first unless :asc; default newest first")
    parser.add_argument("--offset", type=int, default=0, help="rows to skip (default 0)")
    add_json_option(parser, "print JSON instead of a table")


def _statuses(value: str) -> str:
    """`failed` or `failed,partial`: each an execution status (argparse names a bad one)."""
    for part in value.split(","):
        if part not in EXECUTION_STATUSES:
            raise argparse.ArgumentTypeError(
                f"invalid choice {part!r} (choose from {', '.join(EXECUTION_STATUSES)})"
            )
    return value


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """The execution filters of `ls` (read back by `filters_from_args`), for every command
    that selects executions as `ls` lists them."""
    parser.add_argument(
        "--status",
        type=_statuses,
        metavar="STATUS[,STATUS…]",
        help=f"execution status, or several joined by commas: {', '.join(EXECUTION_STATUSES)}",
    )
    parser.add_argument("--tool", help="a step used this tool")
    parser.add_argument("--capability", help="a step used this capability (NAME or TOOL.NAME)")
    parser.add_argument("--action", choices=ACTIONS, help="an attempt was decided with this action")
    parser.add_argument("--rule", dest="rule_id", metavar="RULE_ID", help="an attempt's rule id")
    parser.add_argument("--http-status", type=int, metavar="CODE", help="an attempt's HTTP status")
    parser.add_argument(
        "--since",
        metavar="TIME",
        help="started at or after TIME: ISO date/time (UTC unless it has an offset), "
        "epoch seconds, or an age such as 30m, 2h, 7d",
    )
    parser.add_argument("--until", metavar="TIME", help="started before TIME (same forms)")
    parser.add_argument("--text", help="text in request/response bodies, LLM prompts or answers")
    parser.add_argument("--test", metavar="NODEID",
                        help="recorded by a pytest test whose node id contains NODEID")
    parser.add_argument(
        "--warning", nargs="?", const="any", choices=("any", *WARNING_CODES), metavar="KIND",
        help="a response broke the tool contract (any, or one of: "
        f"{', '.join(WARNING_CODES)}); KIND defaults to any",
    )


def run(args: argparse.Namespace) -> int:
    """List executions; 0 on success, 2 with one line on stderr for bad input."""
    try:
        filters = filters_from_args(args)
        for option, value, lowest in (("--limit", args.limit, 1), ("--offset", args.offset, 0)):
            if not lowest <= value <= _MAX_ROWS:
                raise ArgumentProblem(
                    f"{option} must be at least {lowest} and at most {_MAX_ROWS}, got {value}"
                )
        order = parse_sort(args.sort) if args.sort else RowOrder()
        store = open_store(store_path(args))
        page = store.list_executions(filters, limit=args.limit, offset=args.offset)
    except (StoreError, ArgumentProblem) as error:
        return fail(error)
    page = Page(executions=sort_rows(page.executions, order), total=page.total,
                limit=page.limit, offset=page.offset)  # fmt: skip
    if args.json:
        document = {
            "executions": [to_jsonable(row) for row in page.executions],
            "total": page.total,
            "limit": page.limit,
            "offset": page.offset,
        }
        print_json(document, ensure_ascii=True)
    else:
        write_table(page, sys.stdout, filtered=filters != ExecutionFilter(), db_path=store.path)
    return 0


def filters_from_args(args: argparse.Namespace, *, now: float | None = None) -> ExecutionFilter:
    """The ExecutionFilter the options describe; ArgumentProblem for an unusable time or rule."""
    now = time.time() if now is None else now
    if args.rule_id is not None and (problem := unknown_rule(args.rule_id)):
        raise ArgumentProblem(f"--rule: {problem}")
    return ExecutionFilter(
        status=args.status,
        tool=args.tool,
        capability=args.capability,
        action=args.action,
        rule_id=args.rule_id,
        http_status=args.http_status,
        since=None if args.since is None else parse_time("--since", args.since, now=now),
        until=None if args.until is None else parse_time("--until", args.until, now=now),
        text=args.text or None,
        test=getattr(args, "test", None) or None,
        warning=getattr(args, "warning", None),
    )


def write_table(
    page: Page, out: TextIO, *, filtered: bool = False, db_path: str | None = None
) -> None:
    """Write a page of executions as an aligned table with a paging footer."""
    if not page.executions:
        if page.total:
            out.write(f"no executions at offset {page.offset} (there are {page.total})\n")
        elif filtered:
            out.write("no executions match these filters\n")
        else:
            out.write(f"no executions recorded{f' in {db_path}' if db_path else ''}\n")
        return
    header = tuple(column.header for column in EXECUTION_COLUMNS)
    rows = [
        tuple(
            query_cell(row, _QUERY_WIDTH + len(query_markers(row))) if column.key == "query"
            else column.cell(row)
            for column in EXECUTION_COLUMNS
        )
        for row in page.executions
    ]
    rows = [tuple(printable(cell) for cell in cells) for cells in rows]
    widths = [max(len(cells[i]) for cells in [header, *rows]) for i in range(len(header))]
    for cells in [header, *rows]:
        line = "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
        out.write(line.rstrip() + "\n")
    first, last = page.offset + 1, page.offset + len(page.executions)
    footer = f"{first}-{last} of {page.total}"
    if last < page.total:
        footer += f" (next page: --offset {last})"
    out.write(footer + "\n")
