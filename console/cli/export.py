"""`truva-console export`: write recorded executions to one self-describing trace bundle file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from console.cli.common import add_command, add_json_option, emit, print_json, store_path
from console.exits import fail, sigterm_as_ctrl_c
from console.printable import printable
from console.words import counted
from store.bundle import ExportResult, export_bundle
from store.errors import StoreError
from store.sql import export_parquet


def add_parser(subparsers: Any) -> None:
    """Register `export` on an argparse subparsers object."""
    parser = add_command(
        subparsers, "export", run,
        help="write executions to a trace bundle file",
        description="Write executions (their rows in every store table, and their spans as "
        "OTLP JSON) to one zip file that `truva-console import` loads elsewhere. Secrets are "
        "redacted unless --no-redact. See docs/bundles.md.",
    )  # fmt: skip
    parser.add_argument(
        "execution_ids", nargs="*", metavar="EXEC_ID", help="execution ids, or unique prefixes"
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="the bundle to write")
    parser.add_argument(
        "--parquet",
        metavar="DIR",
        help="instead of a bundle, write every table and view of the store as DIR/NAME.parquet "
        "(rows as stored: credentials redacted at rest, bodies exact) for pandas, polars or Spark",
    )
    parser.add_argument(
        "--all", dest="export_all", action="store_true", help="every finished execution"
    )
    parser.add_argument(
        "--no-redact",
        action="store_true",
        help="keep secrets in bodies, URLs, parameters and prompts (the manifest says so)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    add_json_option(parser, "print what was written as JSON")


def run(args: argparse.Namespace) -> int:
    """Export executions; 0 on success, 2 with one line on stderr for bad input."""
    if args.parquet is not None:
        return run_parquet(args)
    if not args.output:
        return fail("export: give -o FILE, the bundle to write (or --parquet DIR)")
    if bool(args.execution_ids) == bool(args.export_all):
        return fail("export: give execution ids or --all (one of the two)")
    try:
        with sigterm_as_ctrl_c():
            result = export_bundle(
                store_path(args),
                args.output,
                None if args.export_all else args.execution_ids,
                redact=not args.no_redact,
                overwrite=args.force,
            )
    except StoreError as error:
        return fail(error)
    emit(args.json, lambda: export_document(result), lambda: render_export(result),
         ensure_ascii=True)  # fmt: skip
    if result.skipped_running:
        print(
            f"truva-console: note: skipped {counted(len(result.skipped_running), 'execution')} "
            f"still running: {', '.join(result.skipped_running)}",
            file=sys.stderr,
        )
    return 0


def export_document(result: ExportResult) -> dict[str, Any]:
    """What was written, as JSON-able data."""
    return {
        "bundle": str(result.path),
        "execution_ids": list(result.execution_ids),
        "skipped_running": list(result.skipped_running),
        "redacted": result.redacted,
        "size_bytes": result.size_bytes,
        "rows": dict(result.row_counts),
        "spans": result.span_count,
    }


def render_export(result: ExportResult) -> str:
    """One line per fact: the file, its executions, row counts and redaction."""
    counts = result.row_counts
    secrets = "secrets redacted" if result.redacted else "NOT redacted (--no-redact)"
    return "\n".join(
        [
            f"wrote {result.path} ({result.size_bytes} bytes), {secrets}",
            f"  {counted(len(result.execution_ids), 'execution')}: "
            f"{', '.join(result.execution_ids)}",
            f"  {counted(counts.get('steps', 0), 'step')}, "
            f"{counted(counts.get('attempts', 0), 'attempt')}, "
            f"{counted(counts.get('llm_calls', 0), 'LLM call')}, "
            f"{counted(counts.get('events', 0), 'event')}, {counted(result.span_count, 'span')}",
        ]
    )


def run_parquet(args: argparse.Namespace) -> int:
    """`export --parquet DIR`: every table and view as a Parquet file; one line per file."""
    if args.execution_ids or args.export_all or args.output or args.no_redact:
        return fail(
            "export: --parquet DIR writes every table whole; it takes no execution ids, "
            "--all, -o or --no-redact"
        )
    try:
        written = export_parquet(store_path(args), args.parquet, overwrite=args.force)
    except StoreError as error:
        return fail(error)
    if args.json:
        document = {
            "directory": args.parquet,
            "files": [
                {"name": f.name, "kind": f.kind, "path": str(f.path), "rows": f.rows}
                for f in written
            ],
        }
        print_json(document, ensure_ascii=True)
        return 0
    print(printable(f"wrote {counted(len(written), 'Parquet file')} to {args.parquet}"))
    for parquet_file in written:
        print(printable(f"  {parquet_file.path.name}  {parquet_file.kind}, "
                        f"{counted(parquet_file.rows, 'row')}"))  # fmt: skip
    return 0
