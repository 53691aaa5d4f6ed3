"""`truva-console ls`: list recorded executions, filtered, as a table or as JSON."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

from console.exits import fail
from console.printable import printable
from console.render.formats import ArgumentProblem, format_duration, format_time, parse_time
from executor.contract import WARNING_CODES
from store.connection import resolve_db_path
from store.errors import StoreError
from store.queries import (
    ACTIONS,
    EXECUTION_STATUSES,
    ExecutionFilter,
    ExecutionRow,
    Page,
    open_store,
    to_jsonable,
)

_QUERY_WIDTH = 48
# The store's row counts and offsets are 64-bit integers.
_MAX_ROWS = 2**63 - 1


def add_parser(subparsers: Any) -> None:
    """Register `ls` on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "ls",
        help="list recorded executions",
        description="List recorded executions, newest first. Filters combine with AND; "
        "--tool/--capability/--action/--rule/--http-status must hold for the same attempt.",
    )
    parser.add_argument("--status", choices=EXECUTION_STATUSES, help="execution status")
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
    parser.add_argument(
        "--warning", nargs="?", const="any", choices=("any", *WARNING_CODES), metavar="KIND",
        help="a response broke the tool contract (any, or one of: "
        f"{', '.join(WARNING_CODES)}); KIND defaults to any",
    )
    parser.add_argument("--limit", type=int, default=50, help="rows per page (default 50)")
    parser.add_argument("--offset", type=int, default=0, help="rows to skip (default 0)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """List executions; 0 on success, 2 with one line on stderr for bad input."""
    try:
        filters = filters_from_args(args)
        for option, value, lowest in (("--limit", args.limit, 1), ("--offset", args.offset, 0)):
            if not lowest <= value <= _MAX_ROWS:
                raise ArgumentProblem(
                    f"{option} must be at least {lowest} and at most {_MAX_ROWS}, got {value}"
                )
        store = open_store(resolve_db_path(getattr(args, "db", None)))
        page = store.list_executions(filters, limit=args.limit, offset=args.offset)
    except (StoreError, ArgumentProblem) as error:
        return fail(error)
    if args.json:
        document = {
            "executions": [to_jsonable(row) for row in page.executions],
            "total": page.total,
            "limit": page.limit,
            "offset": page.offset,
        }
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        write_table(page, sys.stdout, filtered=filters != ExecutionFilter(), db_path=store.path)
    return 0


def filters_from_args(args: argparse.Namespace, *, now: float | None = None) -> ExecutionFilter:
    """The ExecutionFilter the options describe; ArgumentProblem for an unusable time."""
    now = time.time() if now is None else now
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
        warning=getattr(args, "warning", None),
    )


def _steps_cell(row: ExecutionRow) -> str:
    planned = max(row.steps_planned, row.steps_total)
    cell = f"{row.steps_succeeded}/{planned} ok"
    problems = [
        f"{count} {label}"
        for count, label in (
            (row.steps_failed, "failed"),
            (row.steps_rejected, "rejected"),
            (row.steps_skipped, "skipped"),
            (row.steps_unfinished, "unfinished"),
        )
        if count
    ]
    return cell + (f" ({', '.join(problems)})" if problems else "")


def _rerun_marker(row: ExecutionRow) -> str:
    """`↻ rerun of <id>  ` before the query of a re-run, else nothing."""
    return f"↻ rerun of {row.rerun_of}  " if row.rerun_of else ""


def _one_line(text: str | None, width: int) -> str:
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


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
    header = ("EXECUTION", "STATUS", "STARTED (UTC)", "DURATION", "STEPS", "ATTEMPTS", "LLM",
              "TOKENS", "LAST FAILING RULE", "QUERY")  # fmt: skip
    rows = [
        (
            row.execution_id,
            row.status + (f" ⚠{row.contract_warnings}" if row.contract_warnings else ""),
            format_time(row.started_at),
            format_duration(row.duration_ms) if row.status != "running" else "running",
            _steps_cell(row),
            str(row.attempts),
            str(row.llm_calls),
            str(row.llm_total_tokens),
            row.last_failing_rule or "-",
            _rerun_marker(row) + _one_line(row.query, _QUERY_WIDTH),
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
