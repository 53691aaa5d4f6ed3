"""A small JSON-over-HTTP server on loopback for the demo tools and the demo LLM (stdlib only).

`DemoHTTPServer` serves one `handle(request) -> DemoResponse` function from a daemon thread on
`ThreadingHTTPServer`, keeps a log of what it received, and closes at once (handler threads are
daemons and are never joined).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import urlsplit

from console.replay.loopback import (
    LOOPBACK,
    NoDelayHandler,
    QuietThreadingHTTPServer,
    ThreadedLoopbackServer,
)


@dataclass(frozen=True, slots=True)
class DemoRequest:
    """One request as read; header names lower-cased, `json` None when the body is not JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any


@dataclass(frozen=True, slots=True)
class DemoResponse:
    """One answer: `body` is JSON-encoded unless it is bytes."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes:
        """The body bytes as sent."""
        if isinstance(self.body, bytes):
            return self.body
        return json.dumps(self.body, ensure_ascii=False).encode("utf-8")


Handler = Callable[[DemoRequest], DemoResponse]


def decode_json(body: bytes) -> Any:
    """The body as JSON, or None when it is empty or not JSON."""
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


class _Server(QuietThreadingHTTPServer):
    owner: DemoHTTPServer


class _RequestHandler(NoDelayHandler):
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = DemoRequest(
            method=self.command,
            path=urlsplit(self.path).path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
            json=decode_json(body),
        )
        response = self.server.owner.respond(request)
        payload = response.encoded()
        try:
            self.send_response(response.status)
            if not any(name.lower() == "content-type" for name in response.headers):
                self.send_header("Content-Type", "application/json")
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


class DemoHTTPServer(ThreadedLoopbackServer):
    """Serves `handler` on 127.0.0.1:`port` (0 picks a free port) until `close()`."""

    def __init__(self, name: str, handler: Handler, *, port: int = 0) -> None:
        self.name = name
        self._handler = handler
        self._lock = threading.Lock()
        self._received: list[DemoRequest] = []
        self._closed = False
        try:
            httpd = _Server((LOOPBACK, port), _RequestHandler)
        except OSError as error:
            raise OSError(
                error.errno, f"demo {name}: cannot listen on {LOOPBACK}:{port}: {error.strerror}"
            ) from error
        httpd.owner = self
        self.serve_in_thread(httpd, f"demo-{name}")

    def received(self, path: str | None = None) -> list[DemoRequest]:
        """Requests received (for `path` only, when given), in arrival order."""
        with self._lock:
            return [r for r in self._received if path is None or r.path == path]

    def respond(self, request: DemoRequest) -> DemoResponse:
        """Log the request and answer it; a handler bug becomes a 500, not a dropped connection."""
        with self._lock:
            self._received.append(request)
        try:
            return self._handler(request)
        except Exception as error:
            return DemoResponse(
                500,
                {"success": False, "error": {
                    "code": "DEMO_SERVER_BUG", "message": f"{type(error).__name__}: {error}",
                    "category": "SERVICE_ERROR", "retryable": False}},
            )  # fmt: skip

    def close(self) -> None:
        """Stop serving and release the port; returns promptly."""
        if self._closed:
            return
        self._closed = True
        self.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
