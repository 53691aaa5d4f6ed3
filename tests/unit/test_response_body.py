"""`read_response_body`: what httpx's `aread()` gives, decoded the same way and failing the same
way, but within a byte limit and in pieces that leave the event loop its turns."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Sequence

import httpx
import pytest

from executor.runtime.outcomes import ResponseTooLarge
from executor.runtime.response_body import read_response_body

MIB = 1 << 20
TEXT = b'{"success": true, "data": "' + b"abcdefgh" * 40_000 + b'"}'


class _Chunks(httpx.AsyncByteStream):
    """A response stream of fixed chunks that never waits, so only the reader yields."""

    def __init__(self, chunks: Sequence[bytes], *, endless: bool = False) -> None:
        self.chunks = chunks
        self.endless = endless
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            for chunk in self.chunks:
                self.pulled += 1
                yield chunk
            if not self.endless:
                return


def _response(encoding: str | None, chunks: Sequence[bytes], **stream: bool) -> httpx.Response:
    headers = {"Content-Encoding": encoding} if encoding is not None else {}
    return httpx.Response(200, headers=headers, stream=_Chunks(chunks, **stream),
                          request=httpx.Request("POST", "http://127.0.0.1:9/capabilities/x"))


def _split(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)] or [b""]


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def _corrupt_near_the_end(data: bytes) -> bytes:
    return data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:]


# (case name, Content-Encoding, body as sent, chunk size on the wire)
SAME_AS_HTTPX = [
    ("no_encoding", None, TEXT, 65536),
    ("identity", "identity", TEXT, 65536),
    ("gzip", "gzip", gzip.compress(TEXT), 65536),
    ("gzip_one_byte_chunks", "gzip", gzip.compress(TEXT[:3000]), 1),
    ("gzip_many_pieces", "gzip", gzip.compress(bytes(3 * MIB)), 65536),
    ("gzip_spelt_loosely", " GZip ", gzip.compress(TEXT), 4096),
    ("gzip_empty_body", "gzip", b"", 65536),
    ("gzip_of_nothing", "gzip", gzip.compress(b""), 65536),
    ("gzip_truncated", "gzip", gzip.compress(TEXT)[:-100], 65536),
    ("gzip_trailing_bytes_ignored", "gzip", gzip.compress(TEXT) + b"trailing", 65536),
    ("gzip_not_gzip", "gzip", b"this is not gzip", 65536),
    ("gzip_corrupt_in_a_later_chunk", "gzip", _corrupt_near_the_end(gzip.compress(TEXT)), 512),
    ("deflate_zlib", "deflate", zlib.compress(TEXT), 65536),
    ("deflate_raw", "deflate", _raw_deflate(TEXT), 65536),
    ("deflate_raw_one_byte_chunks", "deflate", _raw_deflate(TEXT[:2000]), 1),
    ("deflate_corrupt_after_output_read_again_as_raw", "deflate",
     _corrupt_near_the_end(zlib.compress(TEXT)), 1 << 20),
    ("deflate_corrupt_in_a_later_chunk", "deflate", _corrupt_near_the_end(zlib.compress(TEXT)),
     512),
    ("gzip_twice", "gzip, gzip", gzip.compress(gzip.compress(TEXT)), 65536),
    ("deflate_then_gzip", "deflate, gzip", gzip.compress(zlib.compress(TEXT)), 1000),
    ("identity_and_gzip_headers", "identity, gzip", gzip.compress(TEXT), 65536),
    ("br_is_not_decoded", "br", b"\x1b\x03\x00\xf8\xa5\x02", 65536),
    ("unknown_encoding_is_not_decoded", "x-custom", TEXT, 65536),
    ("gzip_then_unknown", "gzip, x-custom", gzip.compress(TEXT), 65536),
]


async def _httpx_reading(response: httpx.Response) -> tuple[str, bytes | str]:
    try:
        return "body", await response.aread()
    except httpx.DecodingError as exc:
        return "DecodingError", str(exc)


async def _our_reading(response: httpx.Response) -> tuple[str, bytes | str]:
    try:
        return "body", await read_response_body(response, 1 << 30)
    except httpx.DecodingError as exc:
        return "DecodingError", str(exc)


@pytest.mark.parametrize(
    ("encoding", "sent", "chunk_size"),
    [case[1:] for case in SAME_AS_HTTPX],
    ids=[case[0] for case in SAME_AS_HTTPX],
)
async def test_reads_and_fails_as_httpx_does(encoding, sent, chunk_size) -> None:
    chunks = _split(sent, chunk_size)

    ours = await _our_reading(_response(encoding, chunks))

    assert ours == await _httpx_reading(_response(encoding, chunks))


@pytest.mark.parametrize(
    ("encoding", "sent", "message"),
    [
        pytest.param(None, [b"x" * 1000] * 3, "at 3,000 bytes", id="identity"),
        pytest.param("gzip", [gzip.compress(bytes(MIB))], "at 131,072 bytes", id="gzip_pieces"),
    ],
)
async def test_a_body_past_the_limit_stops_where_it_passed_it(encoding, sent, message) -> None:
    with pytest.raises(ResponseTooLarge) as raised:
        await read_response_body(_response(encoding, sent), 2500 if encoding is None else 100_000)

    limit = 2500 if encoding is None else 100_000
    assert str(raised.value) == (
        f"the tool answered HTTP 200 with a body that passed max_response_body_bytes "
        f"({limit} bytes) {message}; read stopped"
    )
    assert isinstance(raised.value, httpx.TransportError)


async def test_a_body_of_exactly_the_limit_is_read_whole() -> None:
    assert await read_response_body(_response("gzip", [gzip.compress(TEXT)]), len(TEXT)) == TEXT
    with pytest.raises(ResponseTooLarge):
        await read_response_body(_response("gzip", [gzip.compress(TEXT)]), len(TEXT) - 1)


async def test_an_endless_body_is_not_read_past_the_limit() -> None:
    response = _response(None, [b"x" * 65536], endless=True)

    with pytest.raises(ResponseTooLarge):
        await read_response_body(response, MIB)

    assert response.stream.pulled == 17  # 16 chunks fill the limit; the 17th passes it


async def test_a_bomb_in_one_chunk_gives_the_event_loop_a_turn_every_mebibyte() -> None:
    bomb = gzip.compress(bytes(48 * MIB))  # one chunk on the wire, 48 MiB decoded
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count_turns())
    await asyncio.sleep(0)
    before = turns
    try:
        body = await read_response_body(_response("gzip", [bomb]), 64 * MIB)
    finally:
        counter.cancel()

    assert len(body) == 48 * MIB
    assert turns - before >= 40  # httpx's aread() decodes the chunk in one call: no turn


async def test_a_response_read_already_is_taken_as_it_is() -> None:
    response = httpx.Response(  # as httpx.MockTransport gives it
        200, content=b'{"success": true}', request=httpx.Request("POST", "http://127.0.0.1:9/x")
    )

    assert await read_response_body(response, 17) == b'{"success": true}'
    with pytest.raises(ResponseTooLarge, match=r"\(16 bytes\) at 17 bytes; read stopped"):
        await read_response_body(response, 16)


@pytest.mark.serial
async def test_bytes_after_the_end_of_a_gzip_stream_are_not_kept() -> None:
    trailing = [b"junk" * 16384] * 200  # 12.5 MiB after the gzip stream ends
    response = _response("gzip", [gzip.compress(TEXT), *trailing])

    tracemalloc.start()
    try:
        body = await read_response_body(response, 64 * MIB)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert body == TEXT  # httpx ignores them too, but its decoder keeps every one
    assert peak_bytes < 4 * MIB
