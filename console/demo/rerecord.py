"""Regenerate `sample_traces/`: record every demo plan and write one event log per execution.

Run from a source checkout: `python -m console.demo.rerecord [--out DIR]`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from console.demo.runner import record_demo_events
from console.samples import SAMPLE_SUFFIX, checkout_sample_traces_dir
from executor.eventlog import write_event_log


def rerecord(out_dir: Path) -> list[Path]:
    """Record every demo plan (fast timing) into `out_dir/<plan>.events.jsonl`.

    Event logs of plans that no longer exist are removed; other files are left alone.
    Returns the files written, in plan order.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    recorded = record_demo_events(fast=True)
    written = [
        write_event_log(out_dir / f"{name}{SAMPLE_SUFFIX}", events)
        for name, events in recorded.items()
    ]
    for stale in sorted(set(out_dir.glob(f"*{SAMPLE_SUFFIX}")) - set(written)):
        stale.unlink()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; prints one line per file written."""
    parser = argparse.ArgumentParser(
        prog="python -m console.demo.rerecord",
        description="Record every demo plan against the demo tools and demo LLM on 127.0.0.1 "
        "and write the sample traces.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory to write (default: sample_traces/ of this checkout)",
    )
    args = parser.parse_args(argv)
    out_dir = args.out or checkout_sample_traces_dir()
    if out_dir is None:
        print("rerecord: not running from a source checkout; give --out DIR", file=sys.stderr)
        return 2
    for path in rerecord(out_dir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
