"""`truva-console sql`: DuckDB SQL on the store, read-only, as a table, CSV, JSON or Parquet."""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from console.cli.common import add_command, store_path
from console.exits import EXIT_CANCELLED, fail
from console.printable import printable
from console.render.sql_values import cell_text, jsonable, value_text
from console.words import counted
from store.errors import StoreBusyError, StoreError
from store.sql import QueryResult, SqlError, SqlSession, output_file, replacement_mode

FORMATS = ("table", "csv", "json", "parquet")
# What `SqlSession.batches` gives: the column names and the batches, or None (no relation).
Streamed = tuple[tuple[str, ...], Iterator[QueryResult]] | None
PROMPT, CONTINUATION = "sql> ", "...> "
QUIT = "\\q"


def add_parser(subparsers: Any) -> None:
    """Register `sql` on an argparse subparsers object."""
    parser = add_command(
        subparsers, "sql", run,
        help="run DuckDB SQL on the store (read-only)",
        description="Run DuckDB SQL on the debug store, read-only, after ingesting its spool. "
        "Without QUERY, read statements ending in ';' from a prompt (or stdin) until \\q or "
        "end of input. Tables and columns: docs/store.md.",
    )  # fmt: skip
    parser.add_argument("query", nargs="?", metavar="QUERY", help="the SQL to run")
    parser.add_argument(
        "--format", choices=FORMATS, default="table", help="how to write rows (default table)"
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write rows to FILE (replaced, its permissions kept) instead of stdout; - is stdout",
    )


def run(args: argparse.Namespace) -> int:
    """Run the query, or the prompt; 0 on success, 2 with one line on stderr for an error."""
    if args.output == "-":  # the usual name of stdout, never a file called "-"
        args.output = None
    if args.format == "parquet" and not args.output:
        return fail("sql: --format parquet needs -o FILE (Parquet is not written to a terminal)")
    if args.query is not None and not args.query.strip():
        return fail("sql: QUERY is empty")
    if args.output is not None:
        try:
            args.output = str(output_file(Path(args.output)))
        except SqlError as error:
            return fail(f"sql: {error}")
    try:
        sql = SqlSession(store_path(args))
    except StoreError as error:
        return fail(_without_sql_advice(error))
    try:
        if args.query is not None:
            return run_one(sql, args.query, args.format, args.output)
        return run_prompt(sql, args.format, args.output, sys.stdin)
    except KeyboardInterrupt:
        print("truva-console: sql: interrupted", file=sys.stderr)
        return EXIT_CANCELLED


def run_one(sql: SqlSession, query: str, output_format: str, output: str | None) -> int:
    """Run one query and write its rows; the exit code."""
    try:
        if output_format == "parquet":
            assert output is not None
            rows = sql.write_parquet(query, output)
            print(f"wrote {counted(rows, 'row')} to {output}", file=sys.stderr)
            return 0
        if output is not None and output_format in ("csv", "json"):
            return _stream_to_file(sql, query, output_format, Path(output))
        result = sql.run(query)
    except SqlError as error:
        return fail(f"sql: {error}")
    except StoreError as error:
        return fail(_without_sql_advice(error))
    text = render(result, output_format)
    if output is None:
        sys.stdout.write(text)
        return 0
    try:
        write_text_file(Path(output), text)
    except OSError as error:
        return fail(f"sql: {output}: cannot write: {error.strerror}")
    return 0


def run_prompt(sql: SqlSession, output_format: str, output: str | None, stdin: TextIO) -> int:
    """Read statements until `\\q` or end of input; exit code 2 if any of them failed."""
    interactive = stdin.isatty()
    if interactive:
        print(f"truva-console sql on {sql.store.path}: end statements with ';', \\q quits",
              file=sys.stderr)  # fmt: skip
    failed = False
    for statement in statements(stdin, prompt=interactive):
        if run_one(sql, statement, output_format, output) != 0:
            failed = True
    return 2 if failed else 0


def statements(stdin: TextIO, *, prompt: bool) -> Iterator[str]:
    """Statements read line by line: each ends at a line ending with `;`; `\\q` or EOF stops.

    What is left without a `;` at the end of input is run as a last statement.
    """
    pending: list[str] = []
    while True:
        if prompt:
            sys.stderr.write(CONTINUATION if pending else PROMPT)
            sys.stderr.flush()
        line = stdin.readline()
        if not line:
            break
        if not pending and line.strip() == QUIT:
            return
        if not pending and not line.strip():
            continue
        pending.append(line)
        if line.rstrip().endswith(";"):
            yield "".join(pending)
            pending = []
    if prompt:
        sys.stderr.write("\n")
    if "".join(pending).strip():
        yield "".join(pending)


def render(result: QueryResult | None, output_format: str) -> str:
    """The rows as an aligned table, CSV with a header, or a JSON array of objects."""
    if output_format == "csv":
        return render_csv(result)
    if output_format == "json":
        return render_json(result)
    return render_table(result)


def render_table(result: QueryResult | None) -> str:
    """An aligned table with a row count; long or multi-line cells on one cut line."""
    if result is None:
        return "ok\n"
    header = list(result.columns)
    rows = [[cell_text(value) for value in row] for row in result.rows]
    header = [printable(name) for name in header]
    widths = [max(len(cells[i]) for cells in [header, *rows]) for i in range(len(header))]
    out = io.StringIO()
    for cells in [header, ["-" * width for width in widths], *rows]:
        line = "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
        out.write(line.rstrip() + "\n")
    out.write(f"({counted(len(result.rows), 'row')})\n")
    return out.getvalue()


def render_csv(result: QueryResult | None) -> str:
    """CSV with a header row; NULL is an empty field, values are whole."""
    out = io.StringIO()
    _write_csv(out, _one_batch(result))
    return out.getvalue()


def render_json(result: QueryResult | None) -> str:
    """A JSON array with one object per row, keyed by column name."""
    out = io.StringIO()
    _write_json(out, _one_batch(result))
    return out.getvalue()


def _one_batch(result: QueryResult | None) -> Streamed:
    """A whole result as `SqlSession.batches` gives one: its columns and one batch."""
    return None if result is None else (result.columns, iter((result,)))


def _stream_to_file(sql: SqlSession, query: str, output_format: str, target: Path) -> int:
    """Write the rows to `target` batch by batch, as `render` would write them whole (memory
    stays one batch); beside `target`, renamed onto it, so nothing is half-written."""
    try:
        with sql.batches(query) as results, _partial_text_file(target) as out:
            if output_format == "csv":
                _write_csv(out, results)
            else:
                _write_json(out, results)
    except OSError as error:
        return fail(f"sql: {target}: cannot write: {error.strerror}")
    return 0


def _write_csv(out: TextIO, streamed: Streamed) -> None:
    """The text of `render_csv`, one batch at a time."""
    if streamed is None:
        return
    columns, results = streamed
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for result in results:
        for row in result.rows:
            writer.writerow(["" if value is None else value_text(value) for value in row])


def _write_json(out: TextIO, streamed: Streamed) -> None:
    """The text of `render_json` (`json.dumps(rows, indent=2)`), one object at a time."""
    first = True
    for result in streamed[1] if streamed else ():
        for row in result.rows:
            item = {name: jsonable(value) for name, value in zip(result.columns, row, strict=True)}
            # JSON text holds no raw line break, so each of its lines is indented one level.
            text = json.dumps(item, indent=2, ensure_ascii=False).replace("\n", "\n  ")
            out.write(("[\n  " if first else ",\n  ") + text)
            first = False
    out.write("[]\n" if first else "\n]\n")


@contextlib.contextmanager
def _partial_text_file(target: Path) -> Iterator[TextIO]:
    """A text file beside `target`, renamed onto it when the block ends without an error."""
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as partial:
            yield partial
        os.chmod(name, replacement_mode(target))
        os.replace(name, target)
    finally:
        Path(name).unlink(missing_ok=True)


def write_text_file(target: Path, text: str) -> None:
    """Write `text` beside `target` and rename it onto `target`, so nothing is half-written."""
    with _partial_text_file(target) as out:
        out.write(text)


def _without_sql_advice(error: StoreError) -> StoreError | str:
    """A held store's line without "or use 'truva-console sql'": this is that command, and it
    waited for the file as every command does."""
    if isinstance(error, StoreBusyError) and error.holder is not None:
        return f"{error.holder}; close it, then run the query again"
    return error
