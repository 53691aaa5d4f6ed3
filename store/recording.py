"""`Recording`: the debug store recorder plus the OTLP export the environment configures.

The one wiring of a recorded run: the `truva-console` commands (through
`console.session.recording`) and code using the API (`async with Recording(db) as rec:
await run_plan(plan, recorder=rec)`) both record through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from typing import Any, Self

from store.queries import ExecutionDetail, ExecutionRow, open_store
from store.recorder import StoreRecorder

__all__ = ["Recording"]


class Recording:
    """Records every event it is given into the store at `db_path` (None: no store) and, when
    `telemetry` and `OTEL_*` in `env` configure an exporter, as OpenTelemetry spans and metrics.

    Open it with `with`/`async with` (or `open()`/`close()`); pass it as the `recorder` of
    `run_plan`, `call_tool` or a `PlanExecutor`. Opening raises `StoreError` when the store
    cannot be recorded into, and `TelemetryConfigError` for an OTEL_* value that cannot be
    honoured, before the store file is made. Closing ingests what was recorded, so the console
    sees it, then exports what the telemetry has left.
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None,
        *,
        telemetry: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.db_path = db_path
        self.telemetry = telemetry
        self.env = os.environ if env is None else env
        self.store_recorder: StoreRecorder | None = None
        self.recorders: tuple[Any, ...] = ()
        self._store_stack: contextlib.ExitStack | None = None
        self._telemetry_stack: contextlib.ExitStack | None = None

    @property
    def exports_telemetry(self) -> bool:
        """True: `run_plan(..., telemetry=True)` leaves the export to this recording."""
        return self.telemetry

    def open(self) -> Self:
        """Check the OTEL_* values, open the store recorder, then the telemetry export."""
        from executor.telemetry import telemetry_settings_from_env, with_telemetry

        if self._telemetry_stack is not None:  # open already
            return self
        if self.telemetry:
            telemetry_settings_from_env(self.env)  # a refused value makes no store file
        store_stack, telemetry_stack = contextlib.ExitStack(), contextlib.ExitStack()
        try:
            if self.db_path is not None:
                self.store_recorder = store_stack.enter_context(StoreRecorder(self.db_path))
            if self.telemetry:
                fanout = telemetry_stack.enter_context(
                    with_telemetry(self.store_recorder, env=self.env)
                )
                self.recorders = (fanout,)
            else:
                self.recorders = (self.store_recorder,) if self.store_recorder else ()
        except BaseException:
            telemetry_stack.close()
            store_stack.close()
            raise
        self._store_stack, self._telemetry_stack = store_stack, telemetry_stack
        return self

    def record(self, event: Any) -> None:
        """Pass one event on; never raises into the executor."""
        for recorder in self.recorders:
            recorder.record(event)

    def flush(self) -> None:
        """Make everything recorded so far durable in the store's spool."""
        if self.store_recorder is not None:
            self.store_recorder.flush()

    def close_store(self) -> None:
        """Close the store recorder and ingest what it recorded (once); the telemetry stays
        open, so a command can show the run's result before the export finishes."""
        stack, self._store_stack = self._store_stack, None
        if stack is not None:
            stack.close()

    def close(self) -> None:
        """Close and ingest the store (`close_store`), then shut the telemetry down, which
        exports what remains (bounded by `TelemetryRecorder.shutdown`'s timeout)."""
        try:
            self.close_store()
        finally:
            stack, self._telemetry_stack = self._telemetry_stack, None
            if stack is not None:
                stack.close()

    def exit_notice(self) -> str | None:
        """After `close_store()`: one line when not everything recorded reached the database."""
        return self.store_recorder.exit_notice() if self.store_recorder is not None else None

    def execution(self, execution_id: str) -> ExecutionDetail:
        """Everything the store holds about one execution (a unique id prefix is enough), as
        typed records: `ExecutionDetail` with its `StepRecord`s and `AttemptRecord`s."""
        return open_store(self._store_path()).get_execution(execution_id)

    def executions(self, *, limit: int = 50) -> tuple[ExecutionRow, ...]:
        """The newest recorded executions, as `ls` lists them."""
        return open_store(self._store_path()).list_executions(limit=limit).executions

    def _store_path(self) -> str | os.PathLike[str]:
        if self.db_path is None:
            raise ValueError("this Recording has no store (db_path None)")
        self.flush()
        return self.db_path

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.open)

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.close)
