"""One way to record: open the store recorder and telemetry, run, close both, give the notice.

`recording()` is used by `run`, `rerun`, `replay`, `demo record` and the TUI's rerun; it is
`store.recording.Recording` (the same wiring code using the Python API records through) in the
shape the commands want. No Textual here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.exits import run_cancellable

if TYPE_CHECKING:
    from executor.cancellation import Cancellable
    from executor.events import Recorder

__all__ = ["RecordedRun", "RecordingSession", "recording", "run_recorded"]


@dataclass(slots=True)
class RecordingSession:
    """What `recording()` yields: `recorder` to give the executor (store and telemetry fanned
    out), `store` (None when nothing is stored), and after the block `exit_notice`, one line
    for stderr when not everything recorded reached the database."""

    recorder: Recorder
    store: Any = None
    exit_notice: str | None = None

    @property
    def stored(self) -> bool:
        """Whether the run is recorded into a store."""
        return self.store is not None


@contextlib.contextmanager
def recording(
    db: str | os.PathLike[str] | None,
    *,
    telemetry: bool = True,
    env: Mapping[str, str] | None = None,
) -> Iterator[RecordingSession]:
    """Record into the store at `db` (None: not stored) and, with `telemetry`, the OTLP exporter
    the OTEL_* variables of `env` (default os.environ) configure.

    Raises StoreError when the store cannot be opened for recording and TelemetryConfigError
    when an OTEL_* value cannot be honoured, both before the block runs. On exit, even when the
    block fails, the telemetry is shut down (exporting what remains) and the store recorder is
    closed; then `exit_notice` is set.
    """
    from store.recording import Recording

    rec = Recording(db, telemetry=telemetry, env=env).open()
    session = RecordingSession(rec, rec.store_recorder)
    try:
        yield session
    finally:
        rec.close()
        session.exit_notice = rec.exit_notice()


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """How a run ended, the runner that ran it, and its recording (for the exit notice)."""

    outcome: Any
    session: RecordingSession
    executor: Any = None

    @property
    def recorder(self) -> Any:
        """The store recorder that recorded the run, None when it was not stored."""
        return self.session.store


def run_recorded(build: Callable[[Recorder], Cancellable], db_path: Path | None) -> RecordedRun:
    """Run what `build(recorder)` returns (an executor or a replayer) inside `recording(db_path)`.

    Ctrl-C and SIGTERM cancel the run. Raises what `recording()` raises.
    """
    with recording(db_path) as session:
        runner = build(session.recorder)
        outcome = asyncio.run(run_cancellable(runner))
    return RecordedRun(outcome, session, runner)
