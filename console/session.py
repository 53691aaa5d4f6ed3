"""One way to record a run: open the store recorder and telemetry, run, close, report.

Used by `run`, `rerun` and the TUI's rerun; no Textual here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.exits import run_cancellable


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """How a run ended, and the store recorder that recorded it (None with --no-store)."""

    outcome: Any
    recorder: Any
    executor: Any = None


def run_recorded(build: Callable[[Any], Any], db_path: Path | None) -> RecordedRun:
    """Run the executor `build(recorder)` returns, recorded into `db_path` and telemetry.

    The store recorder (when `db_path` is given) and the OpenTelemetry exporter (when
    configured) are opened first and closed after the run, even when it fails. Raises
    StoreError when the store cannot be opened for recording. Ctrl-C cancels the run.
    """
    from store.recording import Recording

    with Recording(db_path) as recording:
        executor = build(recording)
        outcome = asyncio.run(run_cancellable(executor))
    return RecordedRun(outcome, recording.store_recorder, executor)
