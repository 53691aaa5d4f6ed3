"""The `truva-console` argument parser and the dispatch of its subcommands (the CLI twins).

The TUI is opened by `console.entry`, the only module that imports `console.tui`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path

from console.exits import fail

PACKAGES = ("console", "executor", "store")
Handler = Callable[[argparse.Namespace], int]
DB_HELP = "debug store file (default: $TRUVA_DB or ./.truva/debug.duckdb)"


class ShadowedPackageError(RuntimeError):
    """Another distribution's package of the same name is imported instead of ours."""


def check_package_origins() -> None:
    """Fail when `executor` or `store` do not come from the same installation as `console`.

    PyPI has unrelated distributions that install top-level packages named `executor`, `store`
    and `console`; installed beside ours, they shadow it (SPEC §4).
    """
    here = Path(__file__).resolve().parents[2]
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        origin = Path(spec.origin).resolve() if spec and spec.origin else None
        if origin is None or origin.parent.parent != here:
            where = str(origin) if origin else "nowhere (not importable)"
            raise ShadowedPackageError(
                f"package {name!r} is imported from {where}, not from this truva-console "
                f"installation ({here}); another distribution named {name!r} shadows it — "
                f"uninstall it (pip uninstall {name}) or use a separate virtualenv"
            )


# ---------------------------------------------------------------------- main


def build_parser(default_handler: Handler) -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered; no command runs `default_handler`."""
    parser = argparse.ArgumentParser(
        prog="truva-console",
        description="Debugging console for AI-agent tool calls: see why each error was retried, "
                    "corrected or stopped.",
    )
    parser.add_argument("--db", help=DB_HELP)
    parser.add_argument("--samples", action="store_true",
                        help="open the bundled sample traces (read-only copy)")
    parser.set_defaults(handler=default_handler)
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for module_name in ("console.cli.run", "console.cli.publish",
                        "console.cli.ls", "console.cli.explain", "console.cli.demo",
                        "console.cli.replay", "console.cli.export", "console.cli.import_",
                        "console.cli.rerun", "console.cli.sql"):
        importlib.import_module(module_name).add_parser(subparsers)
    for subparser in subparsers.choices.values():
        if not any("--db" in action.option_strings for action in subparser._actions):
            subparser.add_argument("--db", default=argparse.SUPPRESS, help=DB_HELP)
    return parser


def main(argv: Sequence[str] | None = None, *, default_handler: Handler) -> int:
    """Parse `argv` and run its command (`default_handler` when none is named)."""
    try:
        check_package_origins()
    except ShadowedPackageError as exc:
        return fail(str(exc))
    parser = build_parser(default_handler)
    args = parser.parse_args(argv)
    from executor.telemetry import TelemetryConfigError

    try:
        return int(args.handler(args) or 0)
    except TelemetryConfigError as exc:  # a bad OTEL_* value, found before anything ran
        return fail(str(exc))

