"""Scripted tool HTTP servers on 127.0.0.1, and the loopback server machinery they share.

A `ScriptedToolServer` answers each path from a list of `ToolReply` values, in order; once a
path's list is down to its last reply, that reply repeats for every later request. Every request
is recorded, including those to unscripted paths, which get a 404 `NO_SCRIPT` envelope.

    with ScriptedToolServer() as tool:
        tool.script("/capabilities/search", ToolReply.error(503, "DOWN", "busy"), ToolReply.ok([1]))
        ...  # point the plan's tool base_url at tool.base_url
        assert len(tool.received("/capabilities/search")) == 2

Delays wait on an event that `close()` sets, so a server with a sleeping handler shuts down at
once; handler threads are daemons and the server never joins them.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit


class _Omitted:
    """Marks an envelope field that is left out of the JSON entirely."""

    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Any = _Omitted()


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    """One request as the server read it; header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    received_at: float = field(default_factory=time.monotonic)  # when the request was read


def decode_json_or_none(body: bytes) -> Any:
    """The body decoded as JSON, or None when it is empty or not JSON."""
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ToolReply:
    """One scripted answer.

    `body` is JSON-encoded unless it is `bytes` or `str`, which are sent as-is; None sends an
    empty body. `delay_s` is waited before anything else. `drop` closes the connection without
    any response (after `delay_s`, if given); `drop_after_delay` is the same, spelled for
    readability next to `delay_s`. `stream` is a chunk sent over and over with chunked transfer
    encoding, `stream_interval_s` apart, until the client hangs up, the server closes or
    `stream_max_s` passes (then the body ends); `body` is not sent then.
    """

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False
    drop_after_delay: bool = False
    stream: bytes | None = None
    stream_interval_s: float = 0.0
    stream_max_s: float = 30.0

    @property
    def drops_connection(self) -> bool:
        """Whether this reply closes the connection instead of answering."""
        return self.drop or self.drop_after_delay

    def encoded(self) -> tuple[bytes, str]:
        """The body bytes and their default Content-Type."""
        if self.body is None:
            return b"", "application/json"
        if isinstance(self.body, bytes):
            return self.body, "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode(), "text/plain; charset=utf-8"
        return json.dumps(self.body).encode(), "application/json"

    @classmethod
    def ok(
        cls,
        data: Any = None,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        delay_s: float = 0.0,
    ) -> ToolReply:
        """A success envelope `{"success": true, "data": data}`."""
        return cls(
            status=status,
            body={"success": True, "data": data},
            headers=dict(headers or {}),
            delay_s=delay_s,
        )

    @classmethod
    def ok_of_size(cls, size: int) -> ToolReply:
        """A success envelope `{"success": true, "data": "xx…"}` of exactly `size` bytes."""
        frame = b'{"success": true, "data": ""}'
        if size < len(frame):
            raise ValueError(f"ok_of_size({size}): the smallest envelope is {len(frame)} bytes")
        body = frame[:-2] + b"x" * (size - len(frame)) + frame[-2:]
        return cls(status=200, body=body, headers={"Content-Type": "application/json"})

    @classmethod
    def gzipped(cls, body: bytes, *, status: int = 200) -> ToolReply:
        """`body` sent gzip-compressed, with `Content-Encoding: gzip`."""
        return cls(status=status, body=gzip.compress(body),
                   headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})

    @classmethod
    def gzip_bomb(cls, expanded_bytes: int) -> ToolReply:
        """A small gzip body (about 1/1000 of its size) that expands to `expanded_bytes` zeros."""
        return cls(status=200, body=_gzipped_zeros(expanded_bytes),
                   headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})

    @classmethod
    def endless(cls, chunk: bytes = b"x" * 65536, *, interval_s: float = 0.0) -> ToolReply:
        """A chunked body that does not end: `chunk` every `interval_s` seconds."""
        return cls(status=200, stream=chunk, stream_interval_s=interval_s,
                   headers={"Content-Type": "application/json"})

    @classmethod
    def error(
        cls,
        status: int,
        code: str,
        message: str,
        category: str = "",
        retryable: Any = OMITTED,
        details: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        delay_s: float = 0.0,
    ) -> ToolReply:
        """An error envelope; `retryable` is left out unless given (None sends JSON null)."""
        error: dict[str, Any] = {"code": code, "message": message, "category": category}
        if retryable is not OMITTED:
            error["retryable"] = retryable
        if details is not None:
            error["details"] = dict(details)
        return cls(
            status=status,
            body={"success": False, "error": error},
            headers=dict(headers or {}),
            delay_s=delay_s,
        )


@functools.cache
def _gzipped_zeros(expanded_bytes: int) -> bytes:
    """`expanded_bytes` zeros, gzip-compressed a MiB at a time (never all in memory)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1 << 20)
    parts = []
    left = expanded_bytes
    while left > 0:
        parts.append(compressor.compress(block[:left]))
        left -= len(block)
    parts.append(compressor.flush())
    return b"".join(parts)


class _QuietThreadingHTTPServer(ThreadingHTTPServer):
    """Daemon handler threads, no join on close, and client disconnects are not errors."""

    daemon_threads = True
    block_on_close = False
    owner: LoopbackHTTPServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.owner._note_handler_error()


class _ScriptedHandler(BaseHTTPRequestHandler):
    """Reads the whole request, then hands it to the owning `LoopbackHTTPServer`."""

    protocol_version = "HTTP/1.1"
    server: _QuietThreadingHTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body are separate writes; without this Nagle adds ~40 ms per response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._untrack(self.connection)

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = ReceivedRequest(
            method=self.command,
            path=urlsplit(self.path).path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
            json=decode_json_or_none(body),
        )
        self.server.owner._receive(self, request)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections for the block: bound, never listening.

    A port bound and released at once can be taken by a server of another test worker before
    the test connects to it; held bound, connecting to it is refused and nothing else gets it.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]


@contextlib.contextmanager
def stalled_port() -> Iterator[int]:
    """A loopback port where connecting hangs for the block: a listener whose accept queue is
    full, so Linux drops the next SYN and the client waits to retry it (seconds), never
    connected, never refused."""
    with contextlib.ExitStack() as held:
        listener = held.enter_context(socket.socket())
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(4):  # more than the queue holds; the ones past it wait, unanswered
            filler = held.enter_context(socket.socket())
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        time.sleep(0.05)
        yield port


class LoopbackHTTPServer:
    """A threading HTTP server on 127.0.0.1 with a free port, served from a daemon thread."""

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._requests: list[ReceivedRequest] = []
        self._open_connections: set[socket.socket] = set()
        self.handler_errors = 0
        self._httpd = _QuietThreadingHTTPServer(("127.0.0.1", 0), _ScriptedHandler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{type(self).__name__}:{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return self._httpd.server_address[1]

    def close(self) -> None:
        """Stop serving, wake any delayed handler, and close open connections; never blocks long."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            connections = list(self._open_connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def wait_for_requests(self, count: int, timeout_s: float = 5.0) -> bool:
        """Block until `count` requests have arrived (False on timeout); await it via to_thread."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self._requests) >= count, timeout_s)

    def _receive(self, handler: BaseHTTPRequestHandler, request: ReceivedRequest) -> None:
        with self._arrived:
            self._requests.append(request)
            request_number = len(self._requests)
            self._arrived.notify_all()
        self._handle(handler, request, request_number)

    def _handle(
        self, handler: BaseHTTPRequestHandler, request: ReceivedRequest, request_number: int
    ) -> None:
        raise NotImplementedError

    def _wait(self, delay_s: float) -> bool:
        """Wait `delay_s` seconds; False when the server closed meanwhile."""
        if delay_s > 0:
            self._stopping.wait(delay_s)
        return not self._stopping.is_set()

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str],
    ) -> None:
        try:
            handler.send_response(status)
            names = {name.lower() for name in headers}
            if "content-type" not in names:
                handler.send_header("Content-Type", content_type)
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:
            handler.close_connection = True

    @staticmethod
    def _drop(handler: BaseHTTPRequestHandler) -> None:
        handler.close_connection = True

    def _track(self, connection: socket.socket) -> None:
        with self._lock:
            self._open_connections.add(connection)

    def _untrack(self, connection: socket.socket) -> None:
        with self._lock:
            self._open_connections.discard(connection)

    def _note_handler_error(self) -> None:
        with self._lock:
            self.handler_errors += 1


class ScriptedToolServer(LoopbackHTTPServer):
    """A tool server whose paths answer from scripts of `ToolReply` values (any HTTP method)."""

    NO_SCRIPT_CODE: ClassVar[str] = "NO_SCRIPT"

    def __init__(self) -> None:
        self._scripts: dict[str, deque[ToolReply]] = {}
        self.stream_hangups = 0  # streamed replies the client stopped reading (hung up)
        super().__init__()

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`, with no trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        """The absolute URL of `path` on this server."""
        return self.base_url + path

    def script(self, path: str, *replies: ToolReply) -> Self:
        """Append replies for `path`; they are used in order and the last one repeats."""
        if not replies:
            raise ValueError(f"script({path!r}) needs at least one ToolReply, got none")
        with self._lock:
            self._scripts.setdefault(path, deque()).extend(replies)
        return self

    def replace_script(self, path: str, *replies: ToolReply) -> Self:
        """Replace the replies for `path`, so later requests get the new behaviour."""
        with self._lock:
            self._scripts.pop(path, None)
        return self.script(path, *replies)

    def received(self, path: str | None = None) -> list[ReceivedRequest]:
        """Requests received for `path` (all requests when None), in arrival order."""
        with self._lock:
            return [r for r in self._requests if path is None or r.path == path]

    def _next_reply(self, path: str) -> ToolReply | None:
        with self._lock:
            replies = self._scripts.get(path)
            if not replies:
                return None
            return replies.popleft() if len(replies) > 1 else replies[0]

    def _handle(
        self, handler: BaseHTTPRequestHandler, request: ReceivedRequest, request_number: int
    ) -> None:
        reply = self._next_reply(request.path)
        if reply is None:
            reply = ToolReply.error(
                404,
                self.NO_SCRIPT_CODE,
                f"no script for {request.method} {request.path} on this test server",
                "NOT_FOUND",
            )
        if not self._wait(reply.delay_s) or reply.drops_connection:
            self._drop(handler)
            return
        if reply.stream is not None:
            if self._stream(handler, reply):
                with self._lock:
                    self.stream_hangups += 1
            return
        body, content_type = reply.encoded()
        self._send(handler, reply.status, body, content_type, reply.headers)

    def _stream(self, handler: BaseHTTPRequestHandler, reply: ToolReply) -> bool:
        """Send `reply.stream` over and over, chunked; whether the client hung up."""
        assert reply.stream
        frame = b"%x\r\n%s\r\n" % (len(reply.stream), reply.stream)
        deadline = time.monotonic() + reply.stream_max_s
        handler.close_connection = True
        try:
            handler.send_response(reply.status)
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            while time.monotonic() < deadline and self._wait(reply.stream_interval_s):
                handler.wfile.write(frame)
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            return True
        return False


def start_tool_server() -> ScriptedToolServer:
    """Start a `ScriptedToolServer`; call `close()` (or use it as a context manager) when done."""
    return ScriptedToolServer()
