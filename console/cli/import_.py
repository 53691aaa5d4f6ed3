"""`truva-console import`: load a trace bundle into the store, validated first, idempotently."""

from __future__ import annotations

import argparse
from typing import Any

from console.cli.common import add_command, add_json_option, emit, store_path
from console.exits import fail, sigterm_as_ctrl_c
from store.bundle import BundleLimits, ImportResult, import_bundle
from store.errors import StoreError

_DEFAULT_LIMITS = BundleLimits()


def add_parser(subparsers: Any) -> None:
    """Register `import` on an argparse subparsers object."""
    parser = add_command(
        subparsers, "import", run,
        help="load a trace bundle into the store",
        description="Load a bundle written by `truva-console export`. The whole bundle is "
        "checked first (versions, member paths, sizes, SHA-256 digests, every row); a bad "
        "bundle is refused and nothing is written. Executions already in the store with the "
        "same rows are skipped. See docs/bundles.md.",
    )  # fmt: skip
    parser.add_argument("bundle", metavar="FILE", help="the bundle (.zip) to load")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="overwrite executions the store holds with different rows (default: refuse)",
    )
    for option, default, meaning in (
        ("--max-bytes", _DEFAULT_LIMITS.max_total_bytes,
         "refuse bundles over N bytes uncompressed (default 2 GiB)"),
        ("--max-members", _DEFAULT_LIMITS.max_members,
         "refuse bundles of over N files (default 10000)"),
        ("--max-ratio", _DEFAULT_LIMITS.max_ratio,
         "refuse bundles expanding to over N times their size, past 64 MiB (default 200)"),
        ("--max-row-bytes", _DEFAULT_LIMITS.max_line_bytes,
         "refuse bundles with a row (or span value) over N bytes (default 64 MiB); "
         "the import needs a few times the longest row in memory"),
    ):  # fmt: skip
        parser.add_argument(option, type=int, default=default, metavar="N", help=meaning)
    add_json_option(parser, "print what was imported as JSON")


def run(args: argparse.Namespace) -> int:
    """Import a bundle; 0 on success, 2 with one line on stderr when refused."""
    for option, value in (("--max-bytes", args.max_bytes), ("--max-members", args.max_members),
                          ("--max-ratio", args.max_ratio),
                          ("--max-row-bytes", args.max_row_bytes)):  # fmt: skip
        if value < 1:
            return fail(f"{option} must be at least 1, got {value}")
    limits = BundleLimits(
        max_total_bytes=args.max_bytes, max_members=args.max_members, max_ratio=args.max_ratio,
        max_line_bytes=args.max_row_bytes,
    )
    try:
        with sigterm_as_ctrl_c():
            result = import_bundle(
                store_path(args),
                args.bundle,
                replace=args.replace,
                limits=limits,
            )
    except StoreError as error:
        return fail(error)
    emit(args.json, lambda: import_document(result), lambda: render_import(result),
         ensure_ascii=True)  # fmt: skip
    return 0


def import_document(result: ImportResult) -> dict[str, Any]:
    """What was imported, skipped and replaced, as JSON-able data."""
    return {
        "bundle": str(result.bundle),
        "db": str(result.db),
        "imported": list(result.imported),
        "skipped": list(result.skipped),
        "replaced": list(result.replaced),
        "rows": dict(result.row_counts),
        "redacted": result.redacted,
        "tool_version": result.tool_version,
    }


def render_import(result: ImportResult) -> str:
    """A line for the store, then one per outcome that happened."""
    lines = [f"{result.bundle} → {result.db}"]
    for label, ids in (
        ("imported", result.imported),
        ("replaced", result.replaced),
        ("skipped (already in the store, identical)", result.skipped),
    ):
        if ids:
            lines.append(f"  {label}: {len(ids)} — {', '.join(ids)}")
    if result.redacted:
        lines.append("  the bundle's secrets were redacted when it was exported")
    return "\n".join(lines)
