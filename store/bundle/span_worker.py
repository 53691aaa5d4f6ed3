"""The spans of an export's batches built in a child process, beside the parent's row lines.

The parent (`SpanWorker`) sends each batch's redacted rows; the child (`span_child.main`,
started with the parent's interpreter and `sys.path`) answers with `spans.keyed_span_lines`
of that batch, the very lines the parent would build itself, so the export's bytes do not
depend on where they were built.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from store.bundle.format import BundleExportError
from store.bundle.span_child import (
    BATCH_DONE,
    DONE,
    LINES,
    NEED_SDK,
    frame,
    frame_head,
    read_frame,
)
from store.bundle.spans import SpanKey, SpansNeedSdk

# Batches the child has not answered yet: the one it works on and one pickled, waiting.
_OUTSTANDING_BATCHES = 2


class SpanWorker:
    """A child process building the spans of the batches it is offered (`offer`), in order;
    each answer goes to `take` on a reader thread. `finish` waits for the last answer.

    Raises SpansNeedSdk (from `finish`) where the spans need the SDK, and BundleExportError,
    naming `output`, when the child fails.
    """

    def __init__(
        self,
        output: Path,
        resource: Any,
        take: Callable[[Sequence[tuple[SpanKey, bytes]]], None],
    ) -> None:
        self._output = output
        self._take = take
        self._batches: queue.Queue[bytes | None] = queue.Queue(maxsize=1)
        self._outstanding = threading.BoundedSemaphore(_OUTSTANDING_BATCHES)
        self._verdict: str | None = None
        self._error: BaseException | None = None
        self._take_error: BaseException | None = None  # this process's own failure, not the child's
        self._finished = False
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by __exit__
        # The parent's module path, so the child runs this very code whatever its directory.
        start = (
            f"import sys; sys.path[:] = {sys.path!r}; "
            "from store.bundle.span_child import main; sys.exit(main())"
        )
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", start],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
            )
        except BaseException:
            self._stderr.close()
            raise
        self._put(pickle.dumps((dict(resource.attributes), resource.schema_url)))
        self._writer = threading.Thread(target=self._write, name="bundle-spans-send", daemon=True)
        self._reader = threading.Thread(target=self._read, name="bundle-spans-take", daemon=True)
        self._writer.start()
        self._reader.start()

    def __enter__(self) -> SpanWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._finished:  # the export stopped early: the child is not needed
            if self._process.poll() is None:
                self._process.kill()
            self._put(None)
            self._stop()
        self._stderr.close()

    @property
    def stopped(self) -> bool:
        """Whether the child has stopped answering (the spans need the SDK, or it failed)."""
        return self._verdict == NEED_SDK or self._error is not None

    def offer(self, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> bool:
        """Send a batch's rows, unless the child is `_OUTSTANDING_BATCHES` behind: False, and
        the caller builds the batch's spans itself (the lines are the same either way)."""
        if not self._outstanding.acquire(blocking=False):
            return False
        self._put(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL))
        return True

    def _put(self, data: bytes | None) -> None:
        while True:
            try:
                self._batches.put(data, timeout=0.5)
                return
            except queue.Full:
                if not self._writer_alive():
                    return

    def _writer_alive(self) -> bool:
        writer = getattr(self, "_writer", None)
        return writer is None or writer.is_alive()

    def finish(self) -> None:
        """Wait for the child's last answer. Raises SpansNeedSdk or BundleExportError."""
        self._put(None)
        self._stop()
        self._finished = True  # only now: a Ctrl-C in the wait leaves `__exit__` to kill and join
        if isinstance(self._take_error, BundleExportError):
            raise self._take_error
        if self._take_error is not None:  # keeping the lines failed here, not in the child
            raise BundleExportError(
                f"{self._output}: keeping the spans failed: "
                f"{(str(self._take_error) or type(self._take_error).__name__).splitlines()[0]}"
            ) from self._take_error
        if self._verdict == NEED_SDK:
            raise SpansNeedSdk
        if isinstance(self._error, BundleExportError):
            raise self._error
        if self._verdict != DONE or self._process.returncode != 0:
            self._stderr.seek(0)
            lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
            detail = lines[-1] if lines else f"exit code {self._process.returncode}"
            raise BundleExportError(
                f"{self._output}: the process building the spans failed: {detail}"
            ) from self._error

    def _stop(self) -> None:
        self._writer.join()
        self._reader.join()
        self._process.wait()

    def _write(self) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        data: bytes | None = b""
        try:
            while (data := self._batches.get()) is not None:
                stdin.write(frame_head(data))
                stdin.write(data)
                data = b""  # let the batch go while waiting for the next
            stdin.write(frame(None))  # no more batches
            stdin.close()
        except OSError as error:  # the child stopped reading: its answer says why
            self._error = self._error or error
            with contextlib.suppress(OSError):
                stdin.close()
            while data is not None:  # take what is still put, up to the end (`finish`'s None)
                data = self._batches.get()

    def _read(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        try:
            with stdout:
                while True:
                    kind, payload = read_frame(stdout)
                    if kind == LINES:
                        try:
                            self._take(payload)
                        except BaseException as error:
                            self._take_error = error
                            raise
                    elif kind == BATCH_DONE:
                        self._outstanding.release()
                    else:
                        self._verdict = kind
                        return
        except BaseException as error:  # reported by `finish`
            self._error = self._error or error
            if self._process.poll() is None:
                self._process.kill()
