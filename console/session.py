"""One way to record: open the store recorder and telemetry, run, close the store, give the
notice, show the result, then let the telemetry export what remains.

`recording()` is used by `run`, `rerun`, `replay`, `probe`, `demo record` and the TUI's rerun
and replay; it is `store.recording.Recording` (the same wiring code using the Python API records
through) in the shape the commands want. No Textual here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.exits import run_cancellable

if TYPE_CHECKING:
    from executor.cancellation import Cancellable
    from executor.events import Recorder

__all__ = ["RecordedRun", "RecordingSession", "recording", "report_recorded", "run_recorded"]

EXPORT_CUT_SHORT = (
    "Ctrl-C: the telemetry export was cut short; spans and metrics not yet sent are not exported"
)


@dataclass(slots=True)
class RecordingSession:
    """What `recording()` yields: `recorder` to give the executor (store and telemetry fanned
    out), `store` (None when nothing is stored), and once the store is closed (`close_store()`,
    or the end of the block) `exit_notice`, one line for stderr when not everything recorded
    reached the database."""

    recorder: Recorder
    store: Any = None
    exit_notice: str | None = None
    _recording: Any = field(default=None, repr=False)

    def close_store(self) -> None:
        """Close and ingest the store and set `exit_notice`; the telemetry export stays open
        until the block ends, so the result can be shown before it finishes."""
        if self._recording is not None:
            self._recording.close_store()
            self.exit_notice = self._recording.exit_notice()

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

    Raises TelemetryConfigError when an OTEL_* value cannot be honoured and StoreError when the
    store cannot be opened for recording, both before the block runs. On exit, even when the
    block fails, the store is closed (`session.close_store()`, if the block has not) and then
    the telemetry is shut down, exporting what remains; a Ctrl-C during that export cuts it
    short with one line on stderr instead of raising, since the run is over and recorded.
    """
    from store.recording import Recording

    rec = Recording(db, telemetry=telemetry, env=env).open()
    session = RecordingSession(rec, rec.store_recorder, _recording=rec)
    try:
        yield session
    finally:
        try:
            session.close_store()
        finally:
            _export_rest(rec)


def _export_rest(rec: Any) -> None:
    """Shut the telemetry of `rec` down; a Ctrl-C only cuts the export short."""
    try:
        rec.close()
    except KeyboardInterrupt:
        print(f"truva-console: {EXPORT_CUT_SHORT}", file=sys.stderr, flush=True)


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


def report_recorded(
    build: Callable[[Recorder], Cancellable],
    db_path: Path | None,
    report: Callable[[RecordedRun], int],
) -> int:
    """`run_recorded`, with `report(recorded)` (which prints the result and returns the exit
    code) called once the store is closed and before the telemetry export finishes.

    So a completed run shows its result at once, even when the collector is slow or gone; a
    Ctrl-C during the export then cuts only the export short, and the exit code is `report`'s.
    Raises what `recording()` raises.
    """
    with recording(db_path) as session:
        runner = build(session.recorder)
        outcome = asyncio.run(run_cancellable(runner))
        session.close_store()
        code = report(RecordedRun(outcome, session, runner))
        sys.stdout.flush()
    return code
