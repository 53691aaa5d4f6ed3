"""Loopback HTTP servers: the shared pieces (demo tools, demo LLM, replay), and the replay's own
server with the client transport that understands its failure markers."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx

from console.replay.edits import ReplayResponse

LOOPBACK = "127.0.0.1"
_BODYLESS_STATUSES = frozenset({204, 304})
_STEP_ID_HEADER = "X-TruvaG3-Step-ID"
# Markers from the replay server to the replay transport; never seen by the executor.
_MARK_TRANSPORT_ERROR = "X-Truva-Replay-Transport-Error"
_MARK_MESSAGE = "X-Truva-Replay-Message"
_MARK_STATUS = "X-Truva-Replay-Status"
_MARK_NAMES = frozenset(
    name.lower() for name in (_MARK_TRANSPORT_ERROR, _MARK_MESSAGE, _MARK_STATUS)
)


class QuietThreadingHTTPServer(ThreadingHTTPServer):
    """Daemon handler threads, no join on close, and a client that hung up is not an error."""

    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None


class ThreadedLoopbackServer:
    """An HTTP server run by `serve_forever` on a daemon thread: where it listens, and `stop()`."""

    _httpd: ThreadingHTTPServer

    def serve_in_thread(self, httpd: ThreadingHTTPServer, thread_name: str) -> None:
        """Start serving `httpd` on a daemon thread named `<thread_name>:<port>`."""
        self._httpd = httpd
        thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"{thread_name}:{self.port}", daemon=True,
        )  # fmt: skip
        thread.start()

    @property
    def port(self) -> int:
        """The TCP port it listens on."""
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`, no trailing slash."""
        return f"http://{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        """Stop serving and release the port (handler threads are daemons, never joined)."""
        self._httpd.shutdown()
        with contextlib.suppress(OSError):
            self._httpd.server_close()


class NoDelayHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 handler that sends without Nagle's delay and never logs to stderr."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body are separate writes; without this Nagle adds ~40 ms per response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    method: str
    path: str
    step_id: str | None


Answer = Callable[[ReplayRequest], "ReplayResponse | None"]


class _QuietServer(QuietThreadingHTTPServer):
    owner: ReplayServer


class _Handler(NoDelayHandler):
    server: _QuietServer

    def setup(self) -> None:
        super().setup()
        self.server.owner.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner.untrack(self.connection)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        step_id = self.headers.get(_STEP_ID_HEADER)
        request = ReplayRequest(self.command, urlsplit(self.path).path, step_id)
        response = self.server.owner.answer(request)
        if response is None:
            self.server.owner.wait_closed()
            self.close_connection = True
            return
        self._send(response)

    def _send(self, response: ReplayResponse) -> None:
        if response.transport_error == "reset":
            self.close_connection = True
            return
        status, body = response.status, response.body
        headers = list(response.headers)
        if response.transport_error is not None:
            status, body = 200, b""
            headers = [
                (_MARK_TRANSPORT_ERROR, response.transport_error),
                (_MARK_MESSAGE, quote(response.transport_message)),
            ]
        elif status < 200:
            headers.append((_MARK_STATUS, str(status)))
            status = 200
        try:
            self.send_response_only(status)
            for name, value in headers:
                self.send_header(name, _wire_text(value))
            if status not in _BODYLESS_STATUSES:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if status not in _BODYLESS_STATUSES:
                self.wfile.write(body)
        except OSError:
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


def _wire_text(value: str) -> str:
    """A header value whose latin-1 encoding is its original bytes (UTF-8 when not latin-1)."""
    try:
        value.encode("latin-1")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8").decode("latin-1")


class ReplayServer(ThreadedLoopbackServer):
    """Serves `answer(request)` on 127.0.0.1 from a daemon thread; None holds until `close()`."""

    def __init__(self, name: str, answer: Answer) -> None:
        self._answer = answer
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        httpd = _QuietServer((LOOPBACK, 0), _Handler)
        httpd.owner = self
        self.serve_in_thread(httpd, f"replay-{name}")

    def answer(self, request: ReplayRequest) -> ReplayResponse | None:
        """The response for `request`; a bug in the answer becomes a 404 naming it (not a 5xx,
        which the executor would retry)."""
        try:
            return self._answer(request)
        except Exception as error:
            body = json.dumps({"success": False, "error": {
                "code": "REPLAY_SERVER_BUG", "message": f"{type(error).__name__}: {error}",
                "category": "SERVICE_ERROR", "retryable": False}}).encode()  # fmt: skip
            return ReplayResponse(404, (("Content-Type", "application/json"),), body)

    def wait_closed(self) -> None:
        """Block the calling handler thread until the server closes."""
        self._closed.wait()

    def track(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    def close(self) -> None:
        """Stop serving, release held handlers and close open connections; returns promptly."""
        if self._closed.is_set():
            return
        self._closed.set()
        self.stop()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


_TRANSPORT_FAILURES: dict[str, type[httpx.TransportError]] = {
    "connect": httpx.ConnectError,
    "timeout": httpx.ReadTimeout,
    "protocol": httpx.LocalProtocolError,
}


class ReplayTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, plus the two things a loopback server cannot send for real: a
    recorded timeout, connect or protocol failure, and a 1xx final status."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        failure = response.headers.get(_MARK_TRANSPORT_ERROR)
        if failure is not None:
            await response.aclose()
            message = unquote(response.headers.get(_MARK_MESSAGE, ""))
            raise _TRANSPORT_FAILURES.get(failure, httpx.LocalProtocolError)(
                message, request=request
            )
        status = response.headers.get(_MARK_STATUS)
        if status is None:
            return response
        headers = [(k, v) for k, v in response.headers.raw if k.decode().lower() not in _MARK_NAMES]
        return httpx.Response(
            int(status), headers=headers, stream=response.stream, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self._inner.aclose()



@contextlib.contextmanager
def closing_server(server: ReplayServer) -> Iterator[ReplayServer]:
    """`server`, closed when the block ends."""
    try:
        yield server
    finally:
        server.close()
