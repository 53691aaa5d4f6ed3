"""The child process of `span_worker`: batches of rows in, their keyed span lines out.

Run by `SpanWorker` with the parent's interpreter and module path. Values cross the pipes as
length-prefixed pickles (`write_frame`, `read_frame`). Imports no DuckDB nor pyarrow, so the
child starts in ~0.2 CPU-s.
"""

from __future__ import annotations

import gc
import pickle
import struct
import sys
from collections.abc import Iterator
from typing import IO, Any

from store.bundle.spans import SpanKey, SpansNeedSdk, events_from_rows, keyed_span_lines

_LENGTH = struct.Struct("<Q")
# The child's answers: lines of a batch, a batch's end, the spans need the SDK, or the end.
LINES, BATCH_DONE, NEED_SDK, DONE = "lines", "batch_done", "need_sdk", "done"
_ANSWER_BYTES = 1024 * 1024  # lines are sent about this much at a time


def frame(value: Any) -> bytes:
    """`value` as one frame: its pickle's length, then the pickle."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return frame_head(data) + data


def frame_head(data: bytes) -> bytes:
    """What goes before a pickle `data` to make it a frame."""
    return _LENGTH.pack(len(data))


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


def read_frame(stream: IO[bytes]) -> Any:
    """The next frame's value; EOFError at the end of the stream."""
    head = _read_exactly(stream, _LENGTH.size)
    if head is None:
        raise EOFError("the stream ended")
    data = _read_exactly(stream, _LENGTH.unpack(head)[0])
    if data is None:
        raise EOFError("a frame without its body")
    return pickle.loads(data)


def chunked(keyed: Iterator[tuple[SpanKey, bytes]]) -> Iterator[list[tuple[SpanKey, bytes]]]:
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
    """Read the resource's attributes and schema URL, then batches of rows until None; answer
    each with its lines and BATCH_DONE, and the end with DONE (NEED_SDK where the SDK must
    build the spans)."""
    from opentelemetry.sdk.resources import Resource

    gc.disable()  # many small acyclic objects, as `format.paused_gc` says; the process ends
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    attributes, schema_url = read_frame(stdin)
    resource = Resource(attributes, schema_url)
    try:
        while (rows := read_frame(stdin)) is not None:
            events = events_from_rows(rows)
            del rows
            for answer in chunked(keyed_span_lines(events, resource)):
                stdout.write(frame((LINES, answer)))
            del events
            stdout.write(frame((BATCH_DONE, None)))
            stdout.flush()
    except SpansNeedSdk:
        stdout.write(frame((NEED_SDK, None)))
    else:
        stdout.write(frame((DONE, None)))
    stdout.flush()
    return 0
