"""A tool's response body read within a byte limit, decoded by its Content-Encoding as httpx
decodes it, in bounded pieces that leave the event loop free to hear a cancel or a timeout."""

from __future__ import annotations

import asyncio
import contextlib
import io
import zlib
from collections.abc import Iterator, Sequence

import httpx

from executor.runtime.outcomes import ResponseTooLarge, UndecodableResponse

# The most one decompress call may produce: a gzip bomb expands in pieces of this size.
_PIECE_BYTES = 64 * 1024
# Bytes received or decoded between two turns given to the event loop.
_YIELD_EVERY_BYTES = 1024 * 1024


class _ReadAgainAsRaw(Exception):
    """A deflate body's first chunk failed as zlib data after giving output: httpx then reads
    that chunk again, from its start, as raw DEFLATE."""


class _Inflater:
    """One `gzip` or `deflate` layer of a body, as httpx's decoder of that name reads it, but
    giving its output in pieces of at most `_PIECE_BYTES`."""

    def __init__(self, encoding: str, *, outermost: bool) -> None:
        gzip = encoding == "gzip"
        self._decompressor = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)
        self._outermost = outermost
        # httpx reads a deflate body whose first chunk fails as zlib data as raw DEFLATE; the
        # reader clears this once the body's first chunk is decoded.
        self.may_read_raw = not gzip

    def decode(self, data: bytes) -> Iterator[bytes]:
        """The output of `data`, piece by piece; zlib's errors as httpx.DecodingError."""
        if self._decompressor.eof:
            return  # httpx ignores bytes after the end of the stream (zlib would keep them all)
        pending = data
        emitted = False
        while True:
            try:
                piece = self._decompressor.decompress(pending, _PIECE_BYTES)
            except zlib.error as exc:
                if not self.may_read_raw:
                    raise httpx.DecodingError(str(exc)) from exc
                self.may_read_raw = False
                self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
                if emitted and self._outermost:
                    raise _ReadAgainAsRaw from exc
                pending = data
                continue
            if piece:
                emitted = True
                yield piece
            if len(piece) < _PIECE_BYTES:  # less than a full piece: the input is used up
                return
            pending = self._decompressor.unconsumed_tail

    def flush(self) -> Iterator[bytes]:
        """What the decompressor still holds at the end of the body."""
        try:
            rest = self._decompressor.flush()
        except zlib.error as exc:
            raise httpx.DecodingError(str(exc)) from exc
        if rest:
            yield rest


def _layers(headers: httpx.Headers) -> list[_Inflater]:
    """The body's decoding layers, outermost first: httpx's choice (identity and the encodings it
    has no decoder for leave the bytes as they are)."""
    encodings = [value.strip().lower() for value in headers.get_list(
        "content-encoding", split_commas=True
    )]
    inflated = [value for value in reversed(encodings) if value in ("gzip", "deflate")]
    return [_Inflater(value, outermost=index == 0) for index, value in enumerate(inflated)]


def _decoded(layers: Sequence[_Inflater], data: bytes) -> Iterator[bytes]:
    if not layers:
        if data:
            yield data
        return
    for piece in layers[0].decode(data):
        yield from _decoded(layers[1:], piece)


def _flushed(layers: Sequence[_Inflater]) -> Iterator[bytes]:
    for index, layer in enumerate(layers):
        for piece in layer.flush():
            yield from _decoded(layers[index + 1:], piece)


async def send_and_read(
    http: httpx.AsyncClient, request: httpx.Request, limit_bytes: int
) -> tuple[httpx.Response, bytes]:
    """Send `request` and read its answer: the response and its decoded body, at most
    `limit_bytes` (ResponseTooLarge). A body its Content-Encoding does not decode is a failed
    request (UndecodableResponse, a transport error), as Go's client fails reading it."""
    response = await http.send(request, stream=True)
    try:
        return response, await read_response_body(response, limit_bytes)
    except httpx.DecodingError as exc:
        encoding = response.headers.get("content-encoding", "")
        raise UndecodableResponse(
            f"the tool answered HTTP {response.status_code} with a body its "
            f"Content-Encoding ({encoding}) does not decode: {exc}", request=request,
        ) from exc
    finally:
        await response.aclose()


async def read_response_body(response: httpx.Response, limit_bytes: int) -> bytes:
    """The decoded body of a streamed `response`, what `aread()` gives, at most `limit_bytes`.

    A longer body raises ResponseTooLarge as soon as the decoded size passes the limit; one that
    does not decode raises httpx.DecodingError, as httpx does. The caller closes the response.
    """
    if response.is_stream_consumed:  # a transport that read it already (httpx.MockTransport)
        body = response.content
        if len(body) > limit_bytes:
            raise _too_large(response, limit_bytes, len(body))
        return body
    bounded = _BoundedBody(response, limit_bytes)
    layers = _layers(response.headers)
    first_chunk = True
    async with contextlib.aclosing(response.aiter_raw()) as raw_chunks:
        async for raw in raw_chunks:
            await bounded.count_turn(len(raw))
            try:
                await bounded.take(_decoded(layers, raw))
            except _ReadAgainAsRaw:
                bounded.restart()
                await bounded.take(_decoded(layers, raw))
            if first_chunk:
                first_chunk = False
                for layer in layers:
                    layer.may_read_raw = False
    await bounded.take(_flushed(layers))
    return bounded.value()


class _BoundedBody:
    """The decoded body as it is read: at most `limit_bytes`, with a turn given to the event
    loop every `_YIELD_EVERY_BYTES` received or decoded."""

    def __init__(self, response: httpx.Response, limit_bytes: int) -> None:
        self._response = response
        self._limit_bytes = limit_bytes
        self._buffer = io.BytesIO()
        self._size = 0
        self._since_turn = 0

    async def count_turn(self, handled_bytes: int) -> None:
        """Count bytes received or decoded; every `_YIELD_EVERY_BYTES`, give the loop a turn."""
        self._since_turn += handled_bytes
        if self._since_turn >= _YIELD_EVERY_BYTES:
            self._since_turn = 0
            await asyncio.sleep(0)

    def restart(self) -> None:
        """Drop what was taken: the body is decoded again from its start."""
        self._buffer = io.BytesIO()
        self._size = 0

    async def take(self, pieces: Iterator[bytes]) -> None:
        """Append decoded pieces; ResponseTooLarge as soon as they pass the limit."""
        for piece in pieces:
            self._size += len(piece)
            if self._size > self._limit_bytes:
                raise _too_large(self._response, self._limit_bytes, self._size)
            self._buffer.write(piece)
            await self.count_turn(len(piece))

    def value(self) -> bytes:
        return self._buffer.getvalue()


def _too_large(response: httpx.Response, limit_bytes: int, size: int) -> ResponseTooLarge:
    return ResponseTooLarge(
        f"the tool answered HTTP {response.status_code} with a body that passed "
        f"max_response_body_bytes ({limit_bytes} bytes) at {size:,} bytes; read stopped",
        request=response.request,
    )
