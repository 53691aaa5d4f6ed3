"""What the command modules share: registering a command, the store and execution arguments,
writing JSON or text, and the recording's exit notice."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.printable import printable

Handler = Callable[[argparse.Namespace], int]


def add_command(
    subparsers: Any, name: str, handler: Handler, *, help: str, description: str
) -> argparse.ArgumentParser:
    """Register the command `name`, run by `handler`, and return its parser."""
    parser = subparsers.add_parser(name, help=help, description=description)
    parser.set_defaults(handler=handler)
    return parser


def add_execution_argument(parser: argparse.ArgumentParser) -> None:
    """The positional EXECUTION: an execution id, or a unique prefix of one."""
    parser.add_argument("execution", metavar="EXECUTION", help="execution id, or a unique prefix")


def add_json_option(parser: argparse.ArgumentParser, help: str = "print a JSON document") -> None:
    """`--json`."""
    parser.add_argument("--json", action="store_true", help=help)


def store_path(args: argparse.Namespace) -> Path:
    """The store the command reads or writes: `--db`, else $TRUVA_DB, else the default."""
    from store.connection import resolve_db_path

    return resolve_db_path(getattr(args, "db", None))


def load_execution(args: argparse.Namespace) -> tuple[Path, Any]:
    """(the store path, the recorded `ExecutionDetail` of `args.execution`); raises StoreError."""
    from store.queries import open_store

    db_path = store_path(args)
    return db_path, open_store(db_path).get_execution(args.execution)


def print_json(document: Any, *, ensure_ascii: bool = False) -> None:
    """`document` as indented JSON on stdout, whole or not at all. A lone surrogate in a value
    (recorded text that was never UTF-8) cannot be written as UTF-8: then every non-ASCII
    character is written as a JSON escape, which carries it."""
    text = json.dumps(document, indent=2, ensure_ascii=ensure_ascii, default=str)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(document, indent=2, ensure_ascii=True, default=str)
    sys.stdout.write(text + "\n")


def emit(
    as_json: bool,
    document: Callable[[], Any],
    text: Callable[[], str],
    *,
    ensure_ascii: bool = False,
) -> None:
    """Write `document()` as JSON when `as_json`, else `text()` made printable."""
    if as_json:
        print_json(document(), ensure_ascii=ensure_ascii)
    else:
        print(printable(text()))


def print_exit_notice(notice: str | None) -> None:
    """The recording's exit notice, if any, as one line on stderr."""
    if notice:
        print(f"truva-console: {notice}", file=sys.stderr)
