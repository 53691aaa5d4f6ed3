"""The spans of an export's batches built in a child process, beside the parent's row lines.

The parent (`SpanWorker`) sends each batch's redacted rows; the child (`main`, started with
the parent's interpreter and `sys.path`) answers with `spans.keyed_span_lines` of that batch, the
very lines the parent would build itself, so the export's bytes do not depend on where they
were built. Rows and lines cross the pipes as length-prefixed pickles.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from store.bundle.format import MIB, BundleExportError, paused_gc
from store.bundle.spans import SpanKey, SpansNeedSdk

_LENGTH = struct.Struct("<Q")
# The child's answers: lines of a batch, the spans need the SDK, or every batch answered.
_LINES, _NEED_SDK, _DONE = "lines", "need_sdk", "done"
_ANSWER_BYTES = MIB  # lines are sent about this much at a time
_QUEUED_BATCHES = 1  # batches pickled and waiting for the pipe, beyond the one being written


def _write_frame(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    """`size` bytes, or None at the end of the stream before any of them."""
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            if left == size:
                return None
            raise EOFError(f"a frame cut short ({size - left} of {size} bytes)")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_frame(stream: IO[bytes]) -> Any:
    """The next value, or EOFError at the end of the stream."""
    head = _read_exactly(stream, _LENGTH.size)
    if head is None:
        raise EOFError("the stream ended")
    data = _read_exactly(stream, _LENGTH.unpack(head)[0])
    if data is None:
        raise EOFError("a frame without its body")
    return pickle.loads(data)


class SpanWorker:
    """A child process building the spans of the batches sent to it (`send`), in order; each
    answer goes to `take` on a reader thread. `finish` waits for the last answer.

    Raises SpansNeedSdk (from `finish`) where the spans need the SDK, and BundleExportError,
    naming `output`, when the child fails.
    """

    def __init__(
        self,
        output: Path,
        resource: Any,
        take: Callable[[Iterable[tuple[SpanKey, bytes]]], None],
    ) -> None:
        self._output = output
        self._take = take
        self._batches: queue.Queue[bytes | None] = queue.Queue(maxsize=_QUEUED_BATCHES)
        self._verdict: str | None = None
        self._error: BaseException | None = None
        self._finished = False
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by __exit__
        # The parent's module path, so the child runs this very code whatever its directory.
        start = (
            f"import sys; sys.path[:] = {sys.path!r}; "
            "from store.bundle.span_worker import main; sys.exit(main())"
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
        return self._verdict == _NEED_SDK or self._error is not None

    def send(self, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """Queue a batch's rows; waits while an earlier batch waits for the pipe."""
        self._put(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL))

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
        self._finished = True
        self._put(None)
        self._stop()
        if self._verdict == _NEED_SDK:
            raise SpansNeedSdk
        if isinstance(self._error, BundleExportError):
            raise self._error
        if self._verdict != _DONE or self._process.returncode != 0:
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
        try:
            while (data := self._batches.get()) is not None:
                stdin.write(_LENGTH.pack(len(data)))
                stdin.write(data)
                del data
            _write_frame(stdin, None)  # no more batches
            stdin.close()
        except OSError as error:  # the child stopped reading: its answer says why
            self._error = self._error or error
            with contextlib.suppress(OSError):
                stdin.close()
            while self._batches.get() is not None:  # let `send` and `finish` return
                pass

    def _read(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        try:
            with stdout:
                while True:
                    kind, payload = _read_frame(stdout)
                    if kind != _LINES:
                        self._verdict = kind
                        return
                    self._take(payload)
        except BaseException as error:  # reported by `finish`
            self._error = self._error or error
            if self._process.poll() is None:
                self._process.kill()


def _answers(keyed: Iterator[tuple[SpanKey, bytes]]) -> Iterator[list[tuple[SpanKey, bytes]]]:
    """`keyed` in lists of about `_ANSWER_BYTES` of lines."""
    answer: list[tuple[SpanKey, bytes]] = []
    size = 0
    for key, line in keyed:
        answer.append((key, line))
        size += len(line)
        if size >= _ANSWER_BYTES:
            yield answer
            answer, size = [], 0
    if answer:
        yield answer


def main() -> int:
    """The child: read the resource, then batches of rows until None; answer each."""
    from opentelemetry.sdk.resources import Resource

    from store.bundle.spans import events_from_rows, keyed_span_lines

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    attributes, schema_url = _read_frame(stdin)
    resource = Resource(attributes, schema_url)
    with paused_gc():
        try:
            while (rows := _read_frame(stdin)) is not None:
                events = events_from_rows(rows)
                del rows
                for answer in _answers(keyed_span_lines(events, resource)):
                    _write_frame(stdout, (_LINES, answer))
                del events
        except SpansNeedSdk:
            _write_frame(stdout, (_NEED_SDK, None))
            stdout.flush()
            return 0
    _write_frame(stdout, (_DONE, None))
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
