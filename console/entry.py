"""The `truva-console` script: the TUI when no command is named, else the CLI twin.

The only module that imports `console.tui` (an import-linter contract in pyproject).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from console.cli.main import main as cli_main


def open_tui(args: argparse.Namespace) -> int:
    """Open the Textual console on the store (or the bundled sample traces)."""
    from console.tui.app import run_app

    return run_app(db=args.db, samples=args.samples)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `truva-console` script."""
    return cli_main(argv, default_handler=open_tui)


if __name__ == "__main__":
    sys.exit(main())
