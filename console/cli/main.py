"""The `truva-console` argument parser and the dispatch of its subcommands (the CLI twins).

The TUI is opened by `console.entry`, the only module that imports `console.tui`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from console.exits import EXIT_BAD_INPUT, EXIT_CANCELLED, Terminated, fail
from console.printable import printable_line

PACKAGES = ("console", "executor", "store")
Handler = Callable[[argparse.Namespace], int]
# What a shell reports for a process ended by SIGPIPE (128 + 13), as `cat` is under `head`.
EXIT_STDOUT_CLOSED = 141
# The commands that take `--samples`: they read the store, or (replay, rerun) record into the copy.
SAMPLES_COMMANDS = ("ls", "explain", "sql", "export", "replay", "rerun", "whatif", "lint")
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

# argparse's "argument --status: invalid choice: 'nope' (choose from 'ok', 'failed')".
_INVALID_CHOICE = re.compile(r"invalid choice: (?P<value>'.*?') \(choose from (?P<choices>.*)\)$")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line naming the command, option and value (exit
    2), not the usage; `--help` is argparse's. Subparsers are made with this class too."""

    def error(self, message: str) -> NoReturn:
        message = message.removeprefix("argument ")
        choice = _INVALID_CHOICE.search(message)
        if choice:
            choices = ", ".join(word.strip("'") for word in choice["choices"].split(", "))
            message = (f"{message[: choice.start()]}invalid choice {choice['value']} "
                       f"(choose from {choices})")  # fmt: skip
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {printable_line(message)}\n")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self._command_parser(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _command_parser(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The (sub)parser of the command `parsed` runs, so its error names that command."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for subparser in action.choices.values():
                    if isinstance(subparser, OneLineParser):
                        found = subparser._command_parser(parsed)
                        if found is not subparser or subparser.get_default("handler") is \
                                getattr(parsed, "handler", None):
                            return found
        return self


class _VersionAction(argparse.Action):
    """`--version`: `truva-console 0.1.0 (DuckDB 2.0.0, Python 3.11.7)`, what a bug report
    needs (looked up when asked, not at every start)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        import platform
        from importlib.metadata import version

        from executor import __version__

        print(f"truva-console {__version__} (DuckDB {version('duckdb')}, Python "
              f"{platform.python_version()})")
        parser.exit()


def build_parser(default_handler: Handler) -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered; no command runs `default_handler`."""
    parser = OneLineParser(
        prog="truva-console",
        description="Debugging console for AI-agent tool calls: see why each error was retried, "
                    "corrected or stopped.",
    )
    parser.add_argument("--db", help=DB_HELP)
    parser.add_argument("--samples", action="store_true",
                        help="open the bundled sample traces (read-only copy)")
    parser.add_argument("--version", action=_VersionAction,
                        help="print the version of truva-console and of DuckDB, and exit")
    parser.set_defaults(handler=default_handler)
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for module_name in ("console.cli.run", "console.cli.publish",
                        "console.cli.ls", "console.cli.explain", "console.cli.demo",
                        "console.cli.replay", "console.cli.export", "console.cli.import_",
                        "console.cli.rerun", "console.cli.sql", "console.cli.whatif",
                        "console.cli.lint", "console.cli.probe"):
        importlib.import_module(module_name).add_parser(subparsers)
    for subparser in subparsers.choices.values():
        if not any("--db" in action.option_strings for action in subparser._actions):
            subparser.add_argument("--db", default=argparse.SUPPRESS, help=DB_HELP)
    return parser


def main(argv: Sequence[str] | None = None, *, default_handler: Handler) -> int:
    """Parse `argv` and run its command (`default_handler` when none is named).

    Ctrl-C in a command that does not cancel on its own (`export`, `import`, `ls`, … or while
    the command is still starting) is one line and exit 130, not a traceback; the command's
    own clean-up (a partial file removed, a transaction rolled back) runs on the way out.
    """
    try:
        return dispatch(argv, default_handler)
    except Terminated:
        return fail("terminated (SIGTERM)", EXIT_CANCELLED)
    except KeyboardInterrupt:
        return fail("interrupted (Ctrl-C)", EXIT_CANCELLED)
    except Exception as error:  # DuckDB turns a Ctrl-C inside a query into its own error
        from store.connection import is_query_interrupt

        if is_query_interrupt(error):
            return fail("interrupted (Ctrl-C)", EXIT_CANCELLED)
        raise


def dispatch(argv: Sequence[str] | None, default_handler: Handler) -> int:
    """`main` without its Ctrl-C guard."""
    try:
        check_package_origins()
    except ShadowedPackageError as exc:
        return fail(str(exc))
    parser = build_parser(default_handler)
    args = parser.parse_args(argv)
    from executor.telemetry import TelemetryConfigError

    try:
        if args.samples and args.handler is not default_handler:
            code = run_on_samples(args)
        else:
            code = int(args.handler(args) or 0)
        sys.stdout.flush()
    except TelemetryConfigError as exc:  # a bad OTEL_* value, found before anything ran
        return fail(str(exc))
    except BrokenPipeError:
        return stdout_closed()
    return code


def run_on_samples(args: argparse.Namespace) -> int:
    """Run a command on a temporary store of the bundled sample traces, deleted afterwards."""
    from console.samples import SampleStoreError, prepare_sample_store

    command = args.handler.__module__.rsplit(".", 1)[-1].rstrip("_")
    if command not in SAMPLES_COMMANDS:
        return fail(f"--samples works with {', '.join(SAMPLES_COMMANDS)}, not with {command!r}: "
                    "the sample store is a temporary copy, deleted when the command ends; "
                    "use --db PATH")  # fmt: skip
    if getattr(args, "db", None):
        return fail("--samples and --db name two stores; give one of them")
    with tempfile.TemporaryDirectory(prefix="truva-samples-") as directory:
        try:
            args.db = str(prepare_sample_store(Path(directory) / "samples.duckdb"))
        except SampleStoreError as error:
            return fail(error)
        return int(args.handler(args) or 0)


def stdout_closed() -> int:
    """The reader of stdout went away (`ls --json | head`): exit quietly, as `cat` would.

    Later writes and the interpreter's final flush go to /dev/null instead of raising again;
    the exit code is the shell's for a process ended by SIGPIPE (141).
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_STDOUT_CLOSED

